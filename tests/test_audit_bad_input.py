"""Bad input: one line and exit 2, or a note while the rest is audited; never a traceback."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from audit_helpers import PROJECTS, run_cli

GOOD = (PROJECTS / "lf_project" / "configs" / "qwen_lora.yaml").read_text()


def audit(capsys, path, *extra):
    code, out, err = run_cli(capsys, "audit", str(path), "--format", "json", *extra)
    assert "Traceback" not in out + err
    return code, out, err


def test_missing_path_is_one_line_exit_2(capsys, tmp_path):
    code, out, err = audit(capsys, tmp_path / "nope")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "nope: no such file or folder" in err


def test_empty_project_is_exit_2(capsys, tmp_path):
    code, _, err = audit(capsys, tmp_path)
    assert code == 2 and "no training config" in err


def test_project_without_configs_is_exit_2(capsys, tmp_path):
    (tmp_path / "notes.yaml").write_text("shopping: [milk, eggs]\n")
    (tmp_path / "data.json").write_text("{}")
    code, _, err = audit(capsys, tmp_path)
    assert code == 2 and "no training config" in err


@pytest.fixture()
def hostile(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "good.yaml").write_text(GOOD)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi")) + "finetuning_type: lora\nstage: sft\n"
    (root / "bomb.yaml").write_text(bomb)
    (root / "binary.yaml").write_bytes(b"stage: sft\x00\x01\x02finetuning_type")
    (root / "huge.yaml").write_text("stage: sft\n" + "# pad\n" * 600_000)
    (root / "latin1.yaml").write_bytes("stage: sft\nfinetuning_type: lora # caf\xe9\n"
                                       .encode("latin-1"))
    (root / "dir.yaml").mkdir()
    os.symlink(root, root / "loop")
    os.symlink(root / "missing", root / "broken_link.yaml")
    outside = tmp_path / "outside.yaml"
    outside.write_text(GOOD)
    os.symlink(outside, root / "escape.yaml")
    locked = root / "locked.yaml"
    locked.write_text(GOOD)
    locked.chmod(0)
    yield root
    locked.chmod(0o644)


def test_hostile_files_are_skipped_with_notes(capsys, hostile):
    import json
    code, out, _ = audit(capsys, hostile)
    assert code == 0
    report = json.loads(out)
    audited = {u["path"] for u in report["units"]}
    assert "good.yaml" in audited
    assert not audited & {"bomb.yaml", "binary.yaml", "huge.yaml", "escape.yaml", "latin1.yaml"}
    notes = "\n".join(report["notes"])
    assert "bomb.yaml" in notes and "aliases" in notes
    assert "binary.yaml" in notes and "binary" in notes
    assert "huge.yaml" in notes and "larger than" in notes
    assert "latin1.yaml" in notes and "UTF-8" in notes
    assert "escape.yaml: skipped, a symlink leaving the project" in notes
    assert "loop: skipped" in notes and "broken_link.yaml: skipped" in notes
    if os.geteuid() != 0:  # root reads anything
        assert "locked.yaml" in notes and "locked.yaml" not in audited


def test_broken_deepspeed_json_is_the_configs_error(capsys, tmp_path):
    """The config names it: DeepSpeed fails to parse it when the run starts."""
    shutil.copytree(PROJECTS / "lf_project", tmp_path / "p")
    (tmp_path / "p" / "configs" / "ds_z3.json").write_text('{"zero_optimization": {"stage": 3,,}')
    import json
    code, out, _ = audit(capsys, tmp_path / "p")
    broken = next(u for u in json.loads(out)["units"] if u["path"].endswith("broken.yaml"))
    assert code == 0 and any("ds_z3.json:1:" in f["message"] and "invalid JSON" in f["message"]
                             for f in broken["errors"] if f["kind"] == "unreadable_file")


def test_bad_gpus_flag_is_exit_2(capsys):
    code, _, err = audit(capsys, PROJECTS / "lf_project", "--gpus", "8xNoSuchGPU")
    assert code == 2 and "NoSuchGPU" in err


def test_deep_nesting_and_self_reference(capsys, tmp_path):
    import json
    deep = tmp_path
    for i in range(70):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (tmp_path / "self.yaml").write_text(GOOD + "deepspeed: self.yaml\n")
    code, out, _ = audit(capsys, tmp_path)
    report = json.loads(out)
    assert code == 0 and [u["path"] for u in report["units"]] == ["self.yaml"]
    assert any("nested more than 64" in n for n in report["notes"])


def test_unparsable_yaml_alone_is_its_parser_line_exit_2(capsys, tmp_path):
    broken = tmp_path / "train.yaml"
    broken.write_text("stage: sft\nfinetuning_type: lora\nlora_target: [q_proj, v_proj\n"
                      "cutoff_len: 1024\n")
    for path in (broken, tmp_path):  # the file named, or its folder
        code, out, err = audit(capsys, path)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert "train.yaml:" in err and "YAML syntax error" in err
        assert "no training config" not in err


def test_other_frameworks_lookalike_is_one_line_not_audited(capsys, tmp_path):
    # verl's SFT trainer config (sections model/data/optim/trainer, as in
    # volcengine/verl verl/trainer/config/sft_trainer.yaml): once audited as Flow-Factory
    (tmp_path / "sft_trainer.yaml").write_text(
        "data:\n  train_batch_size: 256\n  micro_batch_size_per_gpu: 4\n"
        "  train_files: ~/data/gsm8k/train.parquet\n  max_length: 1024\n"
        "model:\n  partial_pretrain: Qwen/Qwen2.5-0.5B-Instruct\n"
        "  enable_gradient_checkpointing: false\n  lora_rank: 0\n  lora_alpha: 16\n"
        "  target_modules: all-linear\n"
        "optim:\n  lr: 1e-5\n  weight_decay: 0.01\n"
        "trainer:\n  total_epochs: 4\n  nnodes: 1\n  n_gpus_per_node: 8\n  seed: 1\n")
    (tmp_path / "notes.yaml").write_text("shopping: [milk, eggs]\n")
    code, out, err = audit(capsys, tmp_path)
    report = json.loads(out)
    assert code == 0 and report["units"] == []
    assert report["not_audited"] == [line for line in report["not_audited"]
                                     if line.startswith("sft_trainer.yaml: not audited: verl")]
    assert len(report["not_audited"]) == 1 and report["not_configs"] == 1


def test_a_named_file_that_does_not_parse_is_the_runs_error(capsys, tmp_path):
    """R1ChemLLaMAFactory's ds_z3_config.json is a Git LFS pointer: DeepSpeed gets no
    JSON, so the run stops; the audit says so and how to get the file."""
    (tmp_path / "train.yaml").write_text(GOOD + "deepspeed: ds_z3.json\n")
    (tmp_path / "ds_z3.json").write_text("version https://git-lfs.github.com/spec/v1\n"
                                         "oid sha256:6e27\nsize 789\n")
    code, out, _ = audit(capsys, tmp_path, "--gpus", "8xH100")
    [unit] = json.loads(out)["units"]
    [error] = [f for f in unit["errors"] if f["kind"] == "unreadable_file"]
    assert error["id"] == "deepspeed" and "invalid JSON" in error["message"]
    assert "git lfs pull" in error["message"]
