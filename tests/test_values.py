"""Inputs that count (issue 24): values the framework accepts beyond the search's
domains, lists as the frameworks write them, cards given by their memory, and a
global batch smaller than the GPU count."""

import pytest

from kbsolve.api import load_kb
from kbsolve.cli.main import main
from kbsolve.program.query import Query, resolve


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ---- a card given by its memory: bf16 unknown, not absent ------------------------------


def test_bf16_on_a_card_given_by_memory_is_taken_with_a_warning(capsys):
    code, out, _ = run(capsys, "estimate", "--gpus", "2x80GB", "--model", "qwen3-8b",
                       "--set", "bf16=true")
    assert code == 0 and "HW_BF16" not in out
    assert "W_BF16_UNSTATED" in out


def test_plan_on_a_card_given_by_memory_uses_bf16_only_with_consent(capsys):
    code, out, _ = run(capsys, "--gpus", "2x24GB", "--model", "qwen3-8b", "--top", "0")
    assert code == 0 and "bf16_unstated" in out.split("kept out without your consent")[1]
    code, out, _ = run(capsys, "--gpus", "2x24GB", "--model", "qwen3-8b", "--top", "0",
                       "--set", "bf16=true", "--format", "json")
    assert code == 0 and '"bf16": true' in out and "W_BF16_UNSTATED" in out


def test_a_spec_that_states_no_bf16_still_refuses_it(capsys, tmp_path):
    spec = tmp_path / "v100ish.yaml"
    spec.write_text("name: OLD-16\nmemory_gib: 15\nbf16: false\n")
    code, out, _ = run(capsys, "estimate", "--gpus", "1", "--gpu-spec", str(spec),
                       "--model", "qwen3-0.6b", "--set", "bf16=true")
    assert code == 1 and "HW_BF16" in out
    resolved = resolve(load_kb(), Query(gpus="1", gpu_spec=str(spec), model="qwen3-0.6b"))
    assert resolved.problem.facts["gpu.bf16_known"] is True
    assert resolve(load_kb(), Query(gpus="1x16GB", model="qwen3-0.6b")
                   ).problem.facts["gpu.bf16_known"] is False


# ---- values the framework takes beyond the search's domains ----------------------------


@pytest.mark.parametrize("pin", ["per_device_train_batch_size=6",
                                 "per_device_train_batch_size=40", "lora_rank=2"])
def test_estimate_takes_values_beyond_the_search_set(capsys, pin):
    code, out, err = run(capsys, "estimate", "--gpus", "8xA100", "--model", "qwen3-8b",
                         "--set", pin, "--format", "json")
    import json
    data = json.loads(out)
    name, value = pin.split("=")
    assert code in (0, 1) and not err and data["config"][name] == int(value)


def test_memory_follows_a_rank_beyond_the_set(kb):
    from kbsolve.api import estimate
    low = estimate(Query(gpus="1xA100", model="qwen3-8b"), {"lora_rank": "2"}, kb=kb)
    high = estimate(Query(gpus="1xA100", model="qwen3-8b"), {"lora_rank": "4"}, kb=kb)
    assert low.memory.per_gpu_gib.device < high.memory.per_gpu_gib.device


def test_plan_keeps_a_pin_beyond_the_set(capsys):
    code, out, _ = run(capsys, "--gpus", "4xA100", "--model", "qwen3-8b", "--top", "0",
                       "--set", "per_device_train_batch_size=3", "--global-batch", "48",
                       "--format", "json")
    assert code == 0 and '"per_device_train_batch_size": 3' in out


def test_bounds_still_refuse(capsys):
    code, _, err = run(capsys, "estimate", "--gpus", "1xA100", "--model", "qwen3-8b",
                       "--set", "lora_rank=0")
    assert code == 2 and "lora_rank takes whole numbers >= 1" in err


def test_audit_reads_a_value_beyond_the_set(capsys, tmp_path):
    (tmp_path / "train.yaml").write_text(
        "model_name_or_path: Qwen/Qwen3-8B\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
        "lora_rank: 2\ndataset: alpaca_en_demo\ntemplate: qwen3\noutput_dir: out\n"
        "per_device_train_batch_size: 6\ngradient_accumulation_steps: 2\nbf16: true\n")
    code, out, _ = run(capsys, "audit", str(tmp_path), "--gpus", "1xA100", "--format", "json")
    assert code in (0, 1)
    for name in ("lora_rank", "per_device_train_batch_size"):
        assert f"needs a value the KB does not model: {name}" not in out


# ---- a default global batch smaller than the GPU count ---------------------------------


def test_default_batch_below_the_gpu_count_offers_the_batch_that_fits(kb):
    from kbsolve.api import solve
    query = Query(gpus="16x8xH100", model="qwen3-0.6b", top=0)
    plan = solve(query, kb=kb)
    assert plan.status == "infeasible"
    fix = next(f for f in plan.fixes if f.kind == "global_batch")
    assert fix.global_batch == 128 and "--global-batch 128" in fix.description
    assert "recipe change" in fix.description
    fixed = solve(query.model_copy(update={"global_batch": fix.global_batch}), kb=kb)
    assert fixed.status == "optimal" and fixed.global_batch.value == 128


# ---- lists as the frameworks write them ------------------------------------------------


def test_lora_target_list_changes_memory_and_speed(kb):
    from kbsolve.api import estimate
    query = Query(gpus="1xA100", model="qwen3-8b")
    every = estimate(query, {"lora_target": "all"}, kb=kb)
    qv = estimate(query, {"lora_target": "q_proj,v_proj"}, kb=kb)
    assert qv.memory.per_gpu_gib.device < every.memory.per_gpu_gib.device
    assert qv.speed.step_time_s < every.speed.step_time_s
    assert "W_LORA_TARGET_AS_ALL" not in {w.id for w in qv.warnings}


def test_target_components_as_flow_factory_writes_them(capsys):
    code, out, _ = run(capsys, "--gpus", "8xH100", "--model", "wan2.2-t2v-a14b", "--top", "0",
                       "--set", "target_components=transformer,transformer_2")
    assert code == 0 and "read as both" in out and '"both"' in out
