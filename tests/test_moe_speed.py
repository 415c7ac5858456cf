"""MoE speed (issue 23): MFU counts the FLOPs of the active parameters, never the total,
and transformers' per-expert loop is a speed term of its own. Property over the catalog:
no estimate claims more than the GPU's peak."""

from __future__ import annotations

import pytest

from kbsolve import api
from plans import shipped_kb

QUERY = {"gpus": "8xH100", "seq_len": 4096}
DENSE = ("qwen3-8b", "llama3-8b", "qwen2.5-72b")


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def _moe(kb) -> list[str]:
    return sorted(n for n, m in kb.catalog.models.items() if m.kind == "llm" and m.experts > 1)


def test_the_catalog_has_moe_models(kb):
    assert {"qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b"} <= set(_moe(kb))


@pytest.mark.parametrize("method", ["lora", "full"])
def test_mfu_is_at_most_the_peak_for_every_moe_model_and_some_dense_ones(kb, method):
    names = _moe(kb) + [n for n in DENSE if n in kb.catalog.models]
    for name in names:
        speed = api.estimate({**QUERY, "model": name}, {"finetuning_type": method}, kb).speed
        assert speed.mfu is not None and 0 < speed.mfu <= 1.0, (name, method, speed.mfu)


def test_mfu_counts_active_parameters(kb):
    model = kb.catalog.model("qwen3-30b-a3b")
    speed = api.estimate({**QUERY, "model": model.name}, {"finetuning_type": "lora"}, kb).speed
    peak = kb.catalog.gpu("H100").bf16_tflops * 1e12 * 8
    flops_per_token = speed.mfu * peak / speed.tokens_per_s
    params_counted = flops_per_token / 4  # LoRA: 4 FLOPs per parameter and token
    # 3.3B active of 30.5B total (the model card); rounding of the MFU to 4 digits aside
    assert 2.5e9 < params_counted < 4.5e9


def test_the_expert_loop_costs_moe_runs_only(kb):
    loop = {"finetuning_type": "lora", "experts_kernel": "loop"}  # transformers 4.x
    moe = api.estimate({**QUERY, "model": "qwen3-30b-a3b"}, loop, kb).speed
    dense = api.estimate({**QUERY, "model": "qwen3-8b"}, loop, kb).speed
    assert dense.terms["expert_loop"] == 0
    # 128 experts in each of 48 layers, visited one by one in every layer pass: it outweighs
    # the GEMMs of 3.3B active parameters
    assert moe.terms["expert_loop"] > moe.terms["gemms"]


def test_grouped_experts_pay_weight_reads_not_the_loop(kb):
    """transformers 5.8 runs the experts as grouped GEMMs (its default
    experts_implementation): no per-expert loop, but with few tokens per expert
    the GEMMs are bound by reading the experts' weights, a roofline's max."""
    def speed(model, kernel, batch, seq):
        settings = {"finetuning_type": "lora", "experts_kernel": kernel,
                    "per_device_train_batch_size": str(batch)}
        return api.estimate({**QUERY, "model": model, "seq_len": seq}, settings, kb).speed
    small = speed("qwen3-30b-a3b", "grouped_mm", 1, 1024)
    large = speed("qwen3-30b-a3b", "grouped_mm", 4, 4096)
    assert small.terms["expert_loop"] == 0 and small.terms["expert_weight_reads"] > 0
    # 16 x the tokens: the GEMMs' FLOPs outgrow the weight reads
    assert large.terms["expert_weight_reads"] == 0
    assert small.mfu < large.mfu <= 1.0
    # the loop's fixed costs per visited expert are the slower path
    for batch, seq in ((1, 1024), (4, 4096)):
        assert speed("qwen3-30b-a3b", "loop", batch, seq).step_time_s > \
            speed("qwen3-30b-a3b", "grouped_mm", batch, seq).step_time_s
    dense = speed("qwen3-8b", "grouped_mm", 1, 1024)
    assert dense.terms["expert_weight_reads"] == 0 and dense.terms["expert_loop"] == 0


def test_a_moe_plan_pins_the_transformers_that_groups_its_experts(kb, tmp_path):
    """The plan's requirements name the transformers whose grouped-GEMM experts it
    priced; a dense plan pins none."""
    for model, wanted in (("qwen3-30b-a3b", True), ("qwen3-8b", False)):
        plan = api.solve({**QUERY, "model": model, "framework": "llamafactory"}, kb)
        folder = tmp_path / model
        api.emit(plan, str(folder), kb)
        requirements = (folder / "requirements.txt").read_text(encoding="utf-8")
        assert ("transformers==5.8.0" in requirements) == wanted, (model, requirements)
        if wanted:
            assert plan.config["experts_kernel"] == "grouped_mm"
