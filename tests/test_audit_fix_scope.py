"""Fixes that never hurt: --fix writes only into files the framework trains with
(LlamaFactory's own inference, merge, predict and v1 examples stay as they are),
and never changes the recipe, adds memory to a config that does not fit, or
names a file that is not there."""

from __future__ import annotations

import shutil

import pytest

from kbsolve import api
from audit_helpers import run_cli
from plans import shipped_kb
from shared_data import shared_dir

NOT_TRAINING = ("examples/inference/qwen3_lora_sft.yaml", "examples/merge_lora/qwen3_lora_sft.yaml",
                "examples/extras/nlg_eval/llama3_lora_predict.yaml",
                "examples/v1/train_full/train_full_fsdp2.yaml")
TRAINING = "examples/train_lora/qwen3_lora_sft.yaml"


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture()
def examples(tmp_path):
    source = shared_dir("examples") / "llamafactory"
    for rel in NOT_TRAINING + (TRAINING,):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / rel, tmp_path / rel)
    return tmp_path


def test_fix_writes_only_into_training_configs(kb, examples):
    before = {rel: (examples / rel).read_bytes() for rel in NOT_TRAINING}
    report, written = api.audit(str(examples), "8xH100", kb=kb, fix=True)
    assert set(written) <= {TRAINING}
    assert {rel: (examples / rel).read_bytes() for rel in NOT_TRAINING} == before
    for u in report.units:
        if u.path in NOT_TRAINING:
            assert u.changes == [] and not any(u.recommendations.values())
            assert any(n.startswith("not audited") for n in u.notes)  # keys alone checked


def test_fix_symptom_refuses_an_inference_config(examples, capsys):
    code, _, err = run_cli(capsys, "fix", str(examples / NOT_TRAINING[0]), "--symptom", "oom",
                           "--gpus", "1xH100")
    assert code == 2 and "inference" in err and len(err.strip().splitlines()) == 1


LORA_Z3 = """model_name_or_path: {model}
stage: sft
do_train: true
finetuning_type: {method}
deepspeed: examples/deepspeed/ds_z3_config.json
dataset: alpaca_en_demo
template: qwen
cutoff_len: 16384
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
bf16: true
output_dir: saves/x
"""


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-72B-Instruct", "my-org/in-house-72b"],
                         ids=["catalog", "unknown"])
def test_no_fix_changes_the_batch_or_leaves_zero3(kb, tmp_path, model):
    # a 72B LoRA under ZeRO-3 that does not fit 8 A100-40G: ZeRO-2 would not shard the
    # frozen weights, and accumulation 2 -> 8 would change the recipe's global batch;
    # with the model unknown there is no estimate, so nothing is written at all
    for method in ("lora", "full"):
        config = tmp_path / method / "train.yaml"
        config.parent.mkdir()
        config.write_text(LORA_Z3.format(model=model, method=method))
        report, _ = api.audit(str(config), "8xA100-40G-SXM", kb=kb)
        changes = {c.key: c.new for c in report.units[0].changes}
        assert "z3" in str(changes.get("deepspeed", "z3"))  # ZeRO-3 kept (offload may cure)
        assert "gradient_accumulation_steps" not in changes
        assert "per_device_train_batch_size" not in changes
        if model.startswith("my-org"):
            assert changes == {} and not any(report.units[0].recommendations.values())
            assert {r.id for r in report.units[0].checks if r.tip}  # one line of tips


def test_a_fix_names_only_files_that_exist_where_the_run_starts(kb, tmp_path):
    # lf_project runs from its root and has no examples/deepspeed/: the ZeRO-3 fix of
    # oom.yaml writes its DeepSpeed JSON beside the config and names that file
    from audit_helpers import PROJECTS
    project = tmp_path / "lf"
    shutil.copytree(PROJECTS / "lf_project", project)
    oom = project / "configs" / "oom.yaml"  # a full 8B fine-tune that ZeRO-3 alone cures
    oom.write_text(oom.read_text().replace("cutoff_len: 8192", "cutoff_len: 2048")
                   .replace("per_device_train_batch_size: 16", "per_device_train_batch_size: 1")
                   .replace("disable_gradient_checkpointing: true\n", ""))
    report, written = api.audit(str(project), "8xH100", kb=kb, fix=True)
    after = {line.split(":", 1)[0]: line.split(":", 1)[1].strip()
             for line in (project / "configs" / "oom.yaml").read_text().splitlines()
             if ":" in line and not line.startswith("#")}
    # (ZeRO-3, with offload where the error band's upper end needs it)
    assert after["deepspeed"].startswith("configs/ds_z3") and after["deepspeed"].endswith(".json")
    assert (project / after["deepspeed"]).is_file()
    assert written["configs/oom.yaml"].created == [after["deepspeed"].split("/", 1)[1]]
    again = next(u for u in report.units if u.path.endswith("oom.yaml"))
    assert again.files["deepspeed"] == after["deepspeed"]
    assert {r.id: r.status for r in again.checks}["D_ZERO3"] == "enabled"
    for u in report.units:  # no change anywhere names a path that is not there
        for c in u.changes:
            if isinstance(c.new, str) and c.new.endswith((".json", ".yaml")):
                assert (project / c.new).is_file() or c.new_file, c


@pytest.mark.slow
def test_no_fix_on_the_real_project_corpus_is_harmful():
    # bench/data/real_projects (corpus22): audited and fixed with each set's labelled
    # hardware; no written change writes a recipe key, a missing path, a v0 key into a
    # v1 file, or more memory into a config labelled OOM (bench/audit_real/harm.py)
    from bench.audit_real.run import run_all
    result = run_all(fix=True)
    assert result["totals"]["harmful"] == 0 and result["tracebacks"] == 0


def test_a_config_that_does_not_fit_is_only_changed_to_fit(kb, tmp_path):
    """An OOM (a 3B full fine-tune): --fix writes a cure that --fix can write whole
    (the first `fix --symptom oom` offers), or nothing, never a leaner config that
    still OOMs; re-audited, the written config fits. On one GPU every cure needs
    FORCE_TORCHRUN or an accelerate file besides the config: nothing is written."""
    config = tmp_path / "train.yaml"
    config.write_text("model_name_or_path: Qwen/Qwen2.5-3B-Instruct\nstage: sft\n"
                      "do_train: true\nfinetuning_type: full\ndataset: alpaca_en_demo\n"
                      "template: qwen\ncutoff_len: 2048\nper_device_train_batch_size: 2\n"
                      "gradient_accumulation_steps: 4\nbf16: true\noutput_dir: saves/x\n")
    report, _ = api.audit(str(config), "1xA100-40G-SXM", kb=kb)
    assert report.units[0].fit.status == "oom" and report.units[0].changes == []
    report, _ = api.audit(str(config), "4xA100-40G-SXM", kb=kb)
    unit = report.units[0]
    assert unit.fit.status == "oom" and unit.changes
    assert not [c.key for c in unit.changes if ":" in c.key]  # nothing left to do by hand
    report, written = api.audit(str(config), "4xA100-40G-SXM", kb=kb, fix=True)
    again, _ = api.audit(str(config), "4xA100-40G-SXM", kb=kb)
    assert written and again.units[0].fit.status == "fits"
