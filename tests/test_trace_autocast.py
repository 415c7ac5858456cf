"""The LLM trace grids under CUDA autocast's float32 op list (issue 23), and the
KB's activation terms that follow from the model code there.

Each test reads the committed traces (bench/data/traces/grid*.json) and compares
what one more layer holds in the trace (the two traced depths' difference) with
what one more layer adds in the KB (the estimate of the same case's model at
those two depths): the per-layer term itself, not a total it hides in."""

import json
from pathlib import Path

import pytest

from bench import trace_compare
from bench.trace import __main__ as trace_main
from bench.trace import grid

GROUP = trace_compare.GROUPS["activations"]


def _rows(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in json.loads(path.read_text(encoding="utf-8"))["cases"]}


def _config(case: dict, layers: int) -> dict:
    """The case's model as the config.json kbsolve reads, at `layers` layers."""
    if case["model"] in grid.FAMILIES:
        return dict(grid.hf_config_json(case["model"]), num_hidden_layers=layers)
    model_type = grid.MODELS[case["model"]][0]
    catalog = grid.catalog_models()[case["model"]]
    return dict(grid.hf_config(catalog, model_type), model_type=model_type, num_hidden_layers=layers)


def _kb_bytes(tmp_path: Path, case: dict, layers: int, terms=GROUP) -> float:
    """The KB's bytes of `terms` for the case at `layers` layers (LlamaFactory on
    one H200, the case's settings, as bench/trace_compare.py estimates it)."""
    from kbsolve import api
    path = tmp_path / f"{case['id']}-{layers}" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_config(case, layers)), encoding="utf-8")
    query = {"gpus": "1xH200", "model": str(path), "framework": "llamafactory",
             "seq_len": case["seq"], "headroom": 0.0}
    estimate = api.estimate(query, trace_compare.settings(case), api.load_kb())
    return sum(t.gib * 2**30 for t in estimate.memory.breakdown
               if t.term in terms and t.level == "allocated" and t.location == "gpu")


def _traced_per_layer(case: dict, key: str = "fb_transient") -> float:
    depths = sorted(case["depths"], key=int)
    low, high = case["depths"][depths[0]], case["depths"][depths[-1]]
    return (high[key] - low[key]) / (int(depths[-1]) - int(depths[0]))


def _kb_per_layer(tmp_path: Path, case: dict, terms=GROUP) -> float:
    """Per layer, from the first traced depth to the model's full depth (the
    estimate's terms are printed to 0.01 GiB: one layer's difference would be
    mostly rounding)."""
    low, high = min(int(d) for d in case["depths"]), case["full_layers"]
    return (_kb_bytes(tmp_path, case, high, terms) - _kb_bytes(tmp_path, case, low, terms)) / (high - low)


def _tokens(case: dict) -> int:
    return case["batch"] * case["seq"] * (2 if case["task"] in ("dpo", "rm", "orpo", "simpo") else 1)


def _hidden(case: dict) -> int:
    config = grid.case_config(case)
    return config.get("hidden_size") or config["n_embd"]


def test_every_llm_case_models_cuda_autocast():
    """LlamaFactory's bf16 outside DeepSpeed is accelerate's native AMP (CUDA
    autocast around the forward), and its PPO trainer enters torch.autocast
    itself: every LLM case asks for CUDA autocast's float32 list. The committed
    files say which rows were traced so (retraced_cuda_autocast): every row of
    the families grid and of PPO's; of the main grid's catalog models, which cast their norms,
    softmax and loss to fp32 themselves, on a sample whose figures did not move
    by a byte."""
    for cases in (grid.cases(), grid.family_cases(), grid.ppo_cases()):
        assert cases and all(c["cuda_autocast"] is True for c in cases)
    assert "cuda_autocast" in trace_main.CASE_KEYS
    for path in (trace_compare.DATA, trace_compare.FAMILY_DATA, trace_compare.PPO_DATA):
        data = json.loads(path.read_text(encoding="utf-8"))
        retraced = {c["id"] for c in data["cases"] if c.get("cuda_autocast")}
        if path == trace_compare.PPO_DATA:
            assert retraced == {c["id"] for c in data["cases"]}
            continue
        note = data["retraced_cuda_autocast"]
        assert retraced == set(note["cases"]) and set(note["changed"]) <= retraced, path.name
        if path == trace_compare.FAMILY_DATA:
            assert retraced == {c["id"] for c in data["cases"]}
            for case_id in note["changed"]:  # no LoRA figure of a catalog model moved
                case = next(c for c in data["cases"] if c["id"] == case_id)
                assert case["model"] in grid.FAMILIES or case["method"] == "full", case_id
        if path == trace_compare.DATA:
            # the catalog models' sample (every model, LoRA and full) traced to the byte
            assert len(retraced) >= 36 and not note["changed"]
            assert {c["model"] for c in data["cases"] if c["id"] in retraced} == set(grid.MODELS)


def test_gpt2_new_gelu_keeps_its_fp32_chain(tmp_path):
    """GPT-2's NewGELU under CUDA autocast: pow runs in fp32, so its saved input,
    tanh's output and 1 + tanh are fp32 (14 bytes per intermediate element with
    0.5 x in bf16, model.act_saved_bytes); LoRA without checkpointing, one
    layer as traced (was 38 h per token in the KB against 63.6 h traced under
    CPU autocast's lists, 91.7 h under CUDA's)."""
    rows = [c for c in _rows(trace_compare.FAMILY_DATA).values() if c["model"] == "gpt2-xl"
            and c["method"] == "lora" and not c["checkpointing"] and c["attention"] == "sdpa"]
    assert len(rows) == 2
    for case in rows:
        traced = _traced_per_layer(case)
        per_token_h = traced / _tokens(case) / _hidden(case)
        assert per_token_h == pytest.approx(91.7, abs=0.3), case["id"]
        assert _kb_per_layer(tmp_path, case) == pytest.approx(traced, rel=0.07), case["id"]


def test_bloom_checkpoints_the_fp32_residual_stream(tmp_path):
    """BLOOM's word_embeddings_layernorm runs in fp32 under CUDA autocast, so
    its residual stream is fp32 and each checkpointed layer input 4 bytes."""
    rows = [c for c in _rows(trace_compare.FAMILY_DATA).values() if c["model"] == "bloom-7b1"
            and c["method"] == "lora" and c["checkpointing"] and c["task"] == "sft"]
    assert len(rows) == 2
    for case in rows:
        traced = _traced_per_layer(case)
        assert traced / _tokens(case) / _hidden(case) == pytest.approx(4.0, abs=0.05), case["id"]
        assert _kb_per_layer(tmp_path, case) == pytest.approx(traced, rel=0.02), case["id"]


def test_falcon_eager_softmax_takes_the_layernorms_fp32(tmp_path):
    """Falcon's eager softmax takes hidden_states' dtype, fp32 under CUDA
    autocast (its LayerNorm's output): 6 bytes per score element and layer, as
    Llama's eager path, not the 2 of a bf16 softmax."""
    rows = [c for c in _rows(trace_compare.FAMILY_DATA).values() if c["model"] == "falcon-7b"
            and c["method"] == "lora" and not c["checkpointing"] and c["attention"] == "eager"]
    assert len(rows) == 2
    for case in rows:
        assert _kb_per_layer(tmp_path, case) == pytest.approx(_traced_per_layer(case), rel=0.05), case["id"]


def test_full_tuning_keeps_fp32_norms_and_a_cast_per_projection(tmp_path):
    """Full tuning without checkpointing (fp32 weights, CUDA autocast): each
    RMSNorm saves its fp32 input and normalised states, every projection saves
    its own bf16 cast of the norm's fp32 output (full_layer_bytes_per_token).
    Per layer, less the bf16 weight copies autocast keeps (2 bytes per traced
    fp32 weight, the autocast_weight_copies term): was 34 h per token in the
    KB against 63-92 h traced."""
    models = ("llama3-8b", "qwen2.5-7b", "llama3.2-1b", "qwen3-0.6b", "qwen3-8b", "gemma3-4b",
              "mistral-7b-v0.3")
    rows = [c for c in _rows(trace_compare.DATA).values() if c["model"] in models
            and c["method"] == "full" and not c["checkpointing"] and c["task"] == "sft" and c["batch"] == 2]
    assert {c["model"] for c in rows} == set(models)
    for case in rows:
        traced = _traced_per_layer(case) - 2 * _traced_per_layer(case, "weights") / 4
        assert _kb_per_layer(tmp_path, case, ("activations",)) == pytest.approx(traced, rel=0.03), case["id"]


def test_gemma2_softcapped_logits_keep_tanhs_output(tmp_path):
    """Gemma 2's final_logit_softcapping keeps tanh's bf16 output for backward:
    2 bytes per logit more than the other models' loss path, in SFT and in RM's
    unused logits alike (rm was -26 to -28 % on activations)."""
    rows = _rows(trace_compare.DATA)
    for task, per_logit in (("sft", 14.0), ("rm", 8.0)):
        case = rows[f"gemma2-9b-{task}-lora_all-gc-eager-b2-s2048"]
        vocab = grid.case_config(case)["vocab_size"]
        kb = _kb_bytes(tmp_path, case, case["full_layers"], ("logits",))
        assert kb / (_tokens(case) * vocab) == pytest.approx(per_logit, rel=1e-3)
        low = case["depths"][min(case["depths"], key=int)]
        fixed = low["fb_transient"] - _traced_per_layer(case) * min(int(d) for d in case["depths"])
        assert fixed / (_tokens(case) * vocab) == pytest.approx(per_logit, rel=0.02), task
