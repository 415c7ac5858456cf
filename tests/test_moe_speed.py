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
    moe = api.estimate({**QUERY, "model": "qwen3-30b-a3b"}, {"finetuning_type": "lora"}, kb).speed
    dense = api.estimate({**QUERY, "model": "qwen3-8b"}, {"finetuning_type": "lora"}, kb).speed
    assert dense.terms["expert_loop"] == 0
    # 128 experts in each of 48 layers, visited one by one in every layer pass: it outweighs
    # the GEMMs of 3.3B active parameters
    assert moe.terms["expert_loop"] > moe.terms["gemms"]
