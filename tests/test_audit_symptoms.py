"""kbsolve fix --symptom (issue 24): OOM cures that make the config fit come
first, the others after and marked; `unstable` finds the recipe's own cure for
a full fine-tune at lr 1e-3 with a constant schedule (KB warnings with sources),
offered only with --allow recipe."""

from __future__ import annotations

import shutil

import pytest
import yaml

from kbsolve import api
from audit_helpers import PROJECTS, audit_once, run_cli  # noqa: F401 - a fixture
from plans import shipped_kb

UNSTABLE = """model_name_or_path: Qwen/Qwen3-8B
stage: sft
do_train: true
finetuning_type: full
deepspeed: ds_z3_config.json
dataset: alpaca_en_demo
template: qwen3
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-3
lr_scheduler_type: constant
bf16: true
output_dir: saves/x
"""


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def test_oom_cures_come_first_and_the_others_are_marked(kb, audit_once, capsys):
    config = PROJECTS / "lf_project" / "configs" / "oom.yaml"
    result = api.fix(str(config), "oom", "1xA100", kb=kb)
    cures = [s.fits for s in result.suggestions]
    assert result.before.status == "oom" and cures[0] and not all(cures)
    assert cures == sorted(cures, reverse=True)  # every cure above every non-cure
    for s in result.suggestions:
        assert s.fits == (s.device_gib <= s.budget_gib)
    code, out, _ = run_cli(capsys, "fix", str(config), "--symptom", "oom", "--gpus", "1xA100")
    lines = [line for line in out.splitlines() if line[:1].isdigit()]
    assert code == 0 and "does not cure the OOM" not in lines[0]
    assert all("does not cure the OOM: still" in line for line, fits in zip(lines, cures)
               if not fits)


@pytest.fixture()
def unstable(tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text(UNSTABLE)
    shutil.copy(PROJECTS / "lf_project" / "configs" / "ds_z3.json",
                tmp_path / "ds_z3_config.json")
    return config


def test_unstable_full_fine_tune_gets_the_recipe_cure(kb, unstable):
    held = api.fix(str(unstable), "unstable", "8xH100", kb=kb)
    withheld = {k for h in held.needs_allow for k in h.changes}
    assert {"learning_rate", "lr_scheduler_type"} <= withheld  # named, not offered
    assert all("recipe" in h.allow for h in held.needs_allow)
    assert not any({"learning_rate", "lr_scheduler_type"} & s.changes.keys()
                   for s in held.suggestions)
    allowed = api.fix(str(unstable), "unstable", "8xH100", kb=kb, allow=["recipe"])
    offered = {k: v for s in allowed.suggestions for k, v in s.changes.items()}
    assert offered["learning_rate"] == pytest.approx(1e-5)  # the full examples' rate
    assert offered["lr_scheduler_type"] == "cosine"
    reasons = " ".join(r for s in allowed.suggestions for r in s.reasons)
    assert "learning_rate was above 10x the shipped example's" in reasons
    assert "W_CONSTANT_SCHEDULE" in reasons
    assert "[recipe] review" in reasons


def test_unstable_write_needs_consent(kb, unstable, capsys):
    run_cli(capsys, "fix", str(unstable), "--symptom", "unstable", "--gpus", "8xH100", "--write")
    kept = yaml.safe_load(unstable.read_text())
    assert kept["learning_rate"] == 1e-3 and kept["lr_scheduler_type"] == "constant"
    code, out, _ = run_cli(capsys, "fix", str(unstable), "--symptom", "unstable", "--gpus",
                           "8xH100", "--write", "--allow", "recipe")
    after = yaml.safe_load(unstable.read_text())
    assert code == 0 and "wrote" in out
    # written as 1.0e-05: PyYAML (which LlamaFactory loads with) reads 1e-05 as a string
    assert isinstance(after["learning_rate"], float) and after["learning_rate"] < 1e-4
