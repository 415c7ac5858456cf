"""`--emit DIR` never overwrites or loses the user's files: a folder holding files
kbsolve did not write is refused (exit 2, one line naming the file) unless
`--force`; a manifest records what it wrote, and the next emit removes its own
stale files (an old ds_config.json). Every OS error on a user's path is exit 2 with
one line, never an internal error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbsolve import api
from cli_helpers import run_kbsolve
from plans import shipped_kb, solved
from test_llamafactory_emit import PLANS

MANIFEST = ".kbsolve-emitted.json"


def _plan(name: str):
    gpus, model, pins = PLANS[name]
    return solved({"gpus": gpus, "model": model, "set": pins, "top": 0})


def test_a_folder_with_the_users_train_yaml_is_refused_and_kept(tmp_path):
    mine = tmp_path / "train.yaml"
    mine.write_text("model_name_or_path: my/own\n")
    with pytest.raises(api.KbError) as refused:
        api.emit(_plan("qlora_1x4090"), str(tmp_path), shipped_kb())
    line = refused.value.render()
    assert "train.yaml" in line and "--force" in line and "\n" not in line.strip()
    assert refused.value.exit_code == 2
    assert mine.read_text() == "model_name_or_path: my/own\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.yaml"]


def test_force_writes_over_and_keeps_unrelated_files(tmp_path):
    (tmp_path / "train.yaml").write_text("mine\n")
    (tmp_path / "notes.txt").write_text("keep me\n")
    written = api.emit(_plan("qlora_1x4090"), str(tmp_path), shipped_kb(), force=True)
    assert str(tmp_path / "train.yaml") in written
    assert (tmp_path / "train.yaml").read_text() != "mine\n"
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"
    listed = json.loads((tmp_path / MANIFEST).read_text())["files"]
    assert "notes.txt" not in listed and "train.yaml" in listed


def test_the_next_emit_removes_its_own_stale_ds_config(tmp_path):
    first = api.emit_files(_plan("full_z3_8xh100"), str(tmp_path), shipped_kb())
    assert (tmp_path / "ds_config.json").exists(), first.written
    second = api.emit_files(_plan("qlora_1x4090"), str(tmp_path), shipped_kb())
    assert second.removed == [str(tmp_path / "ds_config.json")]
    assert not (tmp_path / "ds_config.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != MANIFEST) == \
        sorted(Path(p).name for p in second.written)


def test_a_file_changed_since_it_was_emitted_is_the_users(tmp_path):
    api.emit(_plan("full_z3_8xh100"), str(tmp_path), shipped_kb())
    edited = tmp_path / "ds_config.json"
    edited.write_text(edited.read_text() + "\n")
    with pytest.raises(api.KbError, match="ds_config.json"):
        api.emit(_plan("qlora_1x4090"), str(tmp_path), shipped_kb())
    api.emit(_plan("qlora_1x4090"), str(tmp_path), shipped_kb(), force=True)
    assert edited.exists()  # forced, but an edited stale file is never removed


def test_cli_refuses_before_solving(tmp_path):
    (tmp_path / "train.yaml").write_text("mine\n")
    done = run_kbsolve(["--gpus", "1x4090", "--model", "qwen3-8b", "--emit", str(tmp_path)])
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "train.yaml" in done.stderr and "--force" in done.stderr


@pytest.mark.parametrize("where", ["model", "gpu_spec", "emit"])
def test_a_name_over_255_bytes_is_one_line_exit_2(tmp_path, where):
    long = str(tmp_path / ("a" * 300))
    args = {"model": ["--gpus", "1x4090", "--model", long + ".yaml"],
            "gpu_spec": ["--gpu-spec", long + ".yaml", "--model", "qwen3-8b"],
            "emit": ["--gpus", "1x4090", "--model", "qwen3-8b", "--emit", long]}[where]
    done = run_kbsolve(args)
    assert done.returncode == 2, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "too long" in done.stderr
