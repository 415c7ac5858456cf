"""Plans an engineer would run (issue 14): the global batch is the recipe's,
numerics, recipe and library changes need consent (a pin or --allow), host
RAM is checked under a stated assumption, and a plan never fires a warning
about its own choice without saying why it keeps it."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.bench.recipe import check
from kbsolve.cli.main import main
from plans import shipped_kb, solved


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# A slice of bench/recipe.py's 60-query grid; bench runs all of it.
GRID = [{"gpus": "1x4090", "model": "qwen3-8b", "top": 0},
        {"gpus": "8xA100", "model": "qwen3-8b", "top": 0},
        {"gpus": "2x8xH100", "model": "llama3-70b", "top": 0},
        {"gpus": "8xH100", "model": "qwen3-32b", "task": "dpo", "top": 0},
        {"gpus": "8xA100", "model": "wan14b", "top": 0},
        {"gpus": "1xA100", "model": "sd3.5-medium", "task": "nft", "top": 0}]


@pytest.mark.parametrize("query", GRID, ids=lambda q: f"{q['model']}-{q['gpus']}")
def test_grid_plans_keep_the_recipe(kb, query):
    plan = solved(query)
    assert plan.status == "optimal"
    wrong, batch = check(kb, query, plan)
    assert wrong == []
    assert batch == plan.global_batch.value


def test_the_global_batch_is_the_same_on_every_gpu_count(kb):
    batches = {g: solved({"gpus": g, "model": "qwen3-8b", "top": 0}).global_batch
               for g in ("1x4090", "8xA100")}
    assert {b.value for b in batches.values()} == {64}
    assert batches["8xA100"].factors[-1] == "8 data_parallel"
    assert "default" in batches["1x4090"].origin


def test_global_batch_from_the_query_is_met_exactly(kb):
    plan = api.solve({"gpus": "8xA100", "model": "qwen3-8b", "global_batch": 128, "top": 0},
                     kb)
    assert plan.status == "optimal" and plan.global_batch.value == 128
    micro, accum = plan.config["per_device_train_batch_size"], \
        plan.config["gradient_accumulation_steps"]
    assert micro * accum * 8 == 128


def test_pinning_every_batch_option_is_the_recipe(kb):
    plan = api.solve({"gpus": "8xA100", "model": "qwen3-8b", "top": 0,
                      "set": ["per_device_train_batch_size=2",
                              "gradient_accumulation_steps=4"]}, kb)
    assert plan.status == "optimal" and plan.global_batch.value == 64
    assert any("global batch 64: from your" in note for note in plan.notes)


def test_fp8_only_with_consent(kb):
    plain = solved({"gpus": "8xH100", "model": "qwen3-8b", "top": 0})
    assert plain.config["fp8"] is False
    fp8 = next(c for c in plain.explanation if c.option == "fp8")
    assert fp8.kind == "default" and "--allow fp8" in fp8.reasons[0].detail
    allowed = api.solve({"gpus": "8xH100", "model": "qwen3-8b", "top": 0,
                         "allow": ["numerics"]}, kb)
    assert allowed.config["fp8"] is True  # FP8 is faster on Hopper: chosen once allowed


def test_the_refused_70b_fits_once_quantization_is_allowed(kb):
    # the refusal without --allow, and its first fix naming quantization, are checked
    # on the plan test_refusal_release.py solves (the same query, one solve fewer)
    fixed = api.solve({"gpus": "1x4090", "model": "llama3-70b", "top": 0,
                       "allow": ["quantization"]}, kb)
    assert fixed.status == "optimal"
    # the plan that 4-bit allows sets the upcast LlamaFactory asks for
    assert fixed.config["quantization_bit"] in (4, 8) and fixed.config["upcast_layernorm"]


def test_a_pinned_change_is_consent(kb):
    plan = api.solve({"gpus": "1x4090", "model": "qwen3-8b", "top": 0,
                      "set": ["quantization_bit=4", "use_unsloth=true"]}, kb)
    assert plan.status == "optimal"
    assert plan.config["quantization_bit"] == 4 and plan.config["use_unsloth"] is True


def test_accepted_warnings_say_why(kb):
    plan = solved({"gpus": "8xA100", "model": "wan14b", "top": 0})
    accepted = {w.id: w.accepted for w in plan.warnings if w.accepted}
    assert {"W_R23_HUB_OFFLINE", "W_FP16_LATENTS_CLAMP"} <= set(accepted)
    assert "offline cluster" in accepted["W_R23_HUB_OFFLINE"]


def test_bad_allow_and_bad_global_batch_exit_2(capsys, tmp_path):
    code, out, err = run(capsys, "--gpus", "1x4090", "--model", "qwen3-8b",
                         "--allow", "fp88", "--emit", str(tmp_path / "out"))
    assert code == 2 and "did you mean 'fp8'" in err and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "--gpus", "2x8xH100", "--model", "qwen3-8b",
                         "--global-batch", "24", "--emit", str(tmp_path / "out"))
    assert code == 2 and "GLOBAL_BATCH" in err and "values that can: 16, 32" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_list_optins(capsys):
    code, out, _ = run(capsys, "list", "optins", "--framework", "llamafactory")
    assert code == 0 and "fp8" in out and "numerics" in out and "unsloth" in out
