"""The launch of a config is the script line that names it by its path (from the
directory the line runs in): its environment, counts and accelerate config; a
sibling script for a config of the same name elsewhere gives it nothing."""

from __future__ import annotations

import shutil

import pytest

from kbsolve import api
from plans import shipped_kb
from shared_data import shared_dir


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture()
def project(tmp_path):
    """LlamaFactory's full SFT example twice, one launched by accelerate with the
    repository's FSDP config, one by llamafactory-cli on 4 nodes."""
    examples = shared_dir("examples") / "llamafactory" / "examples"
    text = "\n".join(line for line in (examples / "train_full/qwen3_full_sft.yaml")
                     .read_text().splitlines() if not line.startswith("deepspeed:"))
    for folder in ("8gpu", "32gpu"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.yaml").write_text(text + "\n")
    (tmp_path / "examples" / "accelerate").mkdir(parents=True)
    shutil.copy(examples / "accelerate/fsdp_config.yaml", tmp_path / "examples/accelerate")
    (tmp_path / "run_32.sh").write_text("export NNODES=4\nexport NODE_RANK=0\n"
                                        "FORCE_TORCHRUN=1 llamafactory-cli train 32gpu/train.yaml\n")
    (tmp_path / "run_8.sh").write_text("#!/bin/bash\nGPUS=8\naccelerate launch \\\n"
                                       "  --config_file examples/accelerate/fsdp_config.yaml \\\n"
                                       "  --num_processes $GPUS src/train.py 8gpu/train.yaml\n")
    return tmp_path


def _units(kb, path):
    report = api.audit(str(path), kb=kb)[0]
    return {u.path: u for u in report.units}, report


def test_a_config_takes_only_the_script_that_names_its_path(kb, project):
    units, _ = _units(kb, project)
    eight, many = units["8gpu/train.yaml"], units["32gpu/train.yaml"]
    assert eight.basic["launch"] == "run_8.sh" and "environment" not in eight.basic
    assert eight.basic["hardware"].startswith("8 GPUs") or "x 8" in eight.basic["hardware"]
    assert many.basic["launch"] == "run_32.sh" and "NNODES=4" in many.basic["environment"]


def test_accelerate_config_file_of_the_launch_is_read(kb, project):
    units, report = _units(kb, project)
    eight = units["8gpu/train.yaml"]
    assert eight.files["accelerate"] == "examples/accelerate/fsdp_config.yaml"
    assert "examples/accelerate/fsdp_config.yaml" not in units  # a launch file, no config
    assert "accelerate" not in units["32gpu/train.yaml"].files


def test_paths_resolve_from_the_directory_the_launch_runs_in(kb, tmp_path):
    """A config outside a vendored LlamaFactory, run from inside it: its
    `deepspeed: examples/deepspeed/...` is the vendored file."""
    examples = shared_dir("examples") / "llamafactory" / "examples"
    vendored = tmp_path / "LLaMA-Factory"
    (vendored / "examples" / "deepspeed").mkdir(parents=True)
    shutil.copy(examples / "deepspeed/ds_z3_config.json", vendored / "examples/deepspeed")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "sft.yaml").write_text(
        (examples / "train_full/qwen3_full_sft.yaml").read_text())
    (tmp_path / "train.sh").write_text("cd LLaMA-Factory\n"
                                       "llamafactory-cli train ../configs/sft.yaml\n")
    units, _ = _units(kb, tmp_path)
    unit = units["configs/sft.yaml"]
    assert unit.files["deepspeed"] == "LLaMA-Factory/examples/deepspeed/ds_z3_config.json"
    assert unit.basic["launch"] == "train.sh"


@pytest.mark.parametrize("path, text, kept", [
    ("requirements.txt", "llamafactory==0.8.3\ntorch>=2.4\n", False),
    ("requirements.txt", "llamafactory==0.9.3\n", True),
    ("LLaMA-Factory/src/llamafactory/extras/env.py", 'VERSION = "0.8.3"\n', False)])
def test_framework_version_the_project_pins(kb, tmp_path, path, text, kept):
    """Rules limited to versions (P18, `versions ">=0.9.0"`) follow the version the
    project pins or vendors, and the report says which one."""
    examples = shared_dir("examples") / "llamafactory" / "examples"
    (tmp_path / "train.yaml").write_text(
        (examples / "train_lora/qwen3_lora_sft_ds3.yaml").read_text() + "use_unsloth: true\n")
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(text)
    unit = _units(kb, tmp_path)[0]["train.yaml"]
    version = "0.8.3" if "0.8.3" in text else "0.9.3"
    assert f"pins {version} ({path}:1)" in unit.basic["framework"]
    assert ("P18" in {f.id for f in unit.errors}) is kept
