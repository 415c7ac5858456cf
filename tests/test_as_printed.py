"""Plans run as printed (issue 24): a handful of bench/as_printed.py's 200 queries
(the whole grid runs in `python -m bench`), and the check itself catches files that
differ from their plan."""

from __future__ import annotations

import pytest
import yaml

from kbsolve.bench.as_printed import check, grid
from plans import shipped_kb, solved

# one LlamaFactory plan on one and on two nodes, DeepSpeed, Unsloth, Flow-Factory, pytorch
SAMPLE = [{"gpus": "4xL40S", "model": "qwen3-8b"},
          {"gpus": "8xA100", "model": "qwen3-8b", "set": ["deepspeed=z3"], "allow": []},
          {"gpus": "1xA100", "model": "qwen3-8b", "set": ["use_unsloth=true"], "allow": []},
          {"gpus": "2x8xH100", "model": "llama3-8b", "network": "ib-400"},
          {"gpus": "8xA100", "model": "wan14b", "task": "grpo"},
          {"gpus": "4xH100", "model": "qwen3-8b", "framework": "pytorch"}]


def test_the_grid_has_200_queries_over_every_framework():
    queries = grid()
    assert len(queries) == 200
    assert {q.get("framework") for q in queries} >= {None, "torchtitan", "diffusers", "pytorch"}


@pytest.mark.parametrize("fields", SAMPLE, ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_emitted_files_are_the_plan(fields, tmp_path):
    plan = solved({**fields, "top": 0})
    assert plan.status in ("optimal", "feasible")  # feasible: a time-out's best, still a plan
    assert check(shipped_kb(), fields, plan, tmp_path / "out") == []


@pytest.fixture
def lf_folder(tmp_path):
    fields = {"gpus": "4xL40S", "model": "qwen3-8b", "set": ["deepspeed=z2"], "allow": []}
    plan = solved({**fields, "top": 0})
    folder = tmp_path / "out"
    assert check(shipped_kb(), fields, plan, folder) == []
    return fields, plan, folder


def test_the_check_sees_a_changed_setting_and_a_missing_file(lf_folder):
    fields, plan, folder = lf_folder
    train = yaml.safe_load((folder / "train.yaml").read_text())
    train["per_device_train_batch_size"] += 1
    (folder / "train.yaml").write_text(yaml.safe_dump(train))
    (folder / "ds_config.json").unlink()
    wrong = check(shipped_kb(), fields, plan, folder, emit=False)
    assert any(w.startswith("per_device_train_batch_size=") for w in wrong)
    assert any("names ds_config.json, which was not written" in w for w in wrong)


def test_the_check_sees_an_unpinned_process_count_and_a_missing_package(lf_folder):
    fields, plan, folder = lf_folder
    script = (folder / "run.sh").read_text()
    (folder / "run.sh").write_text(script.replace('NPROC_PER_NODE="${NPROC_PER_NODE:-4}"', ""))
    requirements = (folder / "requirements.txt").read_text()
    (folder / "requirements.txt").write_text(
        "\n".join(line for line in requirements.splitlines() if "deepspeed" not in line))
    wrong = check(shipped_kb(), fields, plan, folder, emit=False)
    assert any("one process per visible device per node, the plan has 4" in w for w in wrong)
    assert "requirements.txt misses deepspeed" in wrong
