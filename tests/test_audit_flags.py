"""`audit` and `fix` take the planner's --model, --gpu-spec and --host-ram; the
model also comes from a local folder's config.json; an unknown model is said
once and no verdict rests on a guess of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbsolve import api
from audit_helpers import run_cli
from plans import shipped_kb
from shared_data import shared_dir

HF_CONFIG = Path(__file__).parent / "fixtures" / "catalog" / "hf" / "Llama-3.1-8B" / "config.json"


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture()
def local_model(tmp_path):
    """LlamaFactory's own LoRA example, training a model from a local folder."""
    example = shared_dir("examples") / "llamafactory/examples/train_lora/qwen3_lora_sft.yaml"
    text = example.read_text().replace("Qwen/Qwen3-4B-Instruct-2507", "./my_model")
    (tmp_path / "train.yaml").write_text(text)
    return tmp_path


def _unit(report):
    assert len(report.units) == 1
    return report.units[0]


def test_unknown_model_is_said_once_and_nothing_rests_on_it(kb, local_model):
    unit = _unit(api.audit(str(local_model), "1xA100", kb=kb)[0])
    said = [line for line in unit.undecided if "model" in line and "unknown" in line]
    assert len(said) == 1 and "--model" in said[0] and "fit check" in said[0]
    assert unit.fit.status == "undecided" and unit.basic["model"].startswith("unknown")
    assert not any(line.startswith("unknown facts") and "model." in line
                   for line in unit.undecided)


def test_local_config_json_names_the_model(kb, local_model):
    (local_model / "my_model").mkdir()
    shutil.copy(HF_CONFIG, local_model / "my_model" / "config.json")
    unit = _unit(api.audit(str(local_model), "1xA100", kb=kb)[0])
    assert "my_model/config.json" in unit.basic["model"]
    assert unit.fit.status == "fits" and unit.fit.device_gib > 10


def test_model_flag_wins(kb, local_model):
    unit = _unit(api.audit(str(local_model), "1xA100", kb=kb, model="qwen3-32b")[0])
    assert unit.basic["model"].startswith("qwen3-32b") and "--model" in unit.basic["model"]
    assert unit.fit.status in ("fits", "oom") and unit.fit.device_gib > 60


def test_gpu_spec_gives_the_card(kb, local_model, tmp_path):
    spec = tmp_path / "card.yaml"
    spec.write_text("name: CARD-24G\nmemory_gib: 24\narch: ada\nbf16: true\n"
                    "bf16_tflops: 150\nfp16_tflops: 150\nfa2: true\n")
    unit = _unit(api.audit(str(local_model), kb=kb, model="qwen3-8b", gpu_spec=str(spec))[0])
    assert "CARD-24G" in unit.basic["hardware"] and "--gpu-spec" in unit.basic["hardware"]
    assert unit.fit.status in ("fits", "oom") and unit.fit.budget_gib < 24


def test_host_ram_judges_offloaded_memory(kb, local_model):
    config = local_model / "train.yaml"
    config.write_text(config.read_text().replace("finetuning_type: lora", "finetuning_type: full")
                      + "deepspeed: examples/deepspeed/ds_z3_offload_config.json\n")
    small = _unit(api.audit(str(local_model), "1xA100", kb=kb, model="qwen3-8b",
                            host_ram=8)[0]).fit
    large = _unit(api.audit(str(local_model), "1xA100", kb=kb, model="qwen3-8b",
                            host_ram=2048)[0]).fit
    plain = _unit(api.audit(str(local_model), "1xA100", kb=kb, model="qwen3-8b")[0]).fit
    assert small.status == "oom" and small.host_gib > small.host_budget_gib
    assert large.status == "fits" and large.host_gib == small.host_gib
    assert plain.host_budget_gib is None  # not judged against a guessed machine


def test_cli_flags_and_bad_model(capsys, local_model):
    code, out, _ = run_cli(capsys, "audit", str(local_model), "--gpus", "1xA100",
                           "--model", "qwen3-8b", "--host-ram", "64")
    assert code == 0 and "from --model" in out and "--host-ram" in out
    code, out, err = run_cli(capsys, "audit", str(local_model), "--model", "qwen9-77b")
    assert code == 2 and out == "" and "unknown model 'qwen9-77b'" in err
    code, out, _ = run_cli(capsys, "fix", str(local_model / "train.yaml"), "--symptom", "oom",
                           "--gpus", "1xA100", "--model", "qwen3-8b")
    assert code == 0 and "GiB" in out


def test_plan_keeps_the_configs_sequence_length(kb, tmp_path):
    """A 70B LoRA at cutoff_len 20480: the plan is solved at 20480 tokens, so it
    does not trade accumulation for a micro-batch of 8 (what 2048 tokens allow)."""
    example = shared_dir("examples") / "llamafactory/examples/train_lora/qwen3_lora_sft.yaml"
    (tmp_path / "train.yaml").write_text(example.read_text().replace(
        "Qwen/Qwen3-4B-Instruct-2507", "meta-llama/Meta-Llama-3-70B-Instruct").replace(
        "cutoff_len: 2048", "cutoff_len: 20480"))
    plan = _unit(api.audit(str(tmp_path), "8xA100", kb=kb, plan=True)[0]).plan
    assert plan.status in ("optimal", "feasible")
    changed = {c.key for c in plan.changes}
    assert not changed & {"per_device_train_batch_size", "gradient_accumulation_steps",
                          "cutoff_len"}


def test_values_are_judged_as_written(kb, tmp_path):
    """A micro-batch of 3 (not among the planner's 1, 2, 4, ... it searches) is 3, not the
    default: its memory lies between those of 1 and 4."""
    example = shared_dir("examples") / "llamafactory/examples/train_lora/qwen3_lora_sft.yaml"
    fits = {}
    for batch in (1, 3, 4):
        folder = tmp_path / str(batch)
        folder.mkdir()
        (folder / "train.yaml").write_text(example.read_text().replace(
            "per_device_train_batch_size: 1", f"per_device_train_batch_size: {batch}"))
        fits[batch] = _unit(api.audit(str(folder), "1xA100", kb=kb)[0])
    three = fits[3]
    assert three.fit.status == "fits"
    assert fits[1].fit.device_gib < three.fit.device_gib < fits[4].fit.device_gib


def test_flow_factory_precision_is_the_configs_own(kb, tmp_path):
    """Flow-Factory's launcher passes the YAML's mixed_precision to accelerate
    (src/flow_factory/cli.py:149,177 @a0b2bc5), over its config file's: fp16 is fp16."""
    example = shared_dir("examples") / "flow-factory/examples/awm/lora/flux1/default.yaml"
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "acc.yaml").write_text(
        "distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_processes: 8\nnum_machines: 1\n")
    text = example.read_text().replace('mixed_precision: "bf16"', 'mixed_precision: "fp16"')
    text = text.replace("config_file: config/deepspeed/deepspeed_zero2.yaml",
                        "config_file: config/acc.yaml")
    (tmp_path / "train.yaml").write_text(text)
    unit = _unit(api.audit(str(tmp_path), "8xH100", kb=kb)[0])
    statuses = {c.id: c.status for c in unit.checks}
    assert statuses["A_BF16"] != "enabled" and statuses["A_INFER_DTYPE"] == "enabled"
    assert any("files disagree" in n and "fp16" in n for n in unit.notes)
