"""LlamaFactory emission: the files `kbsolve --emit` writes for a few pinned
plans match golden copies, the DeepSpeed JSON and accelerate YAML match
LlamaFactory's own example files key by key, and run.sh launches correctly.

Regenerate the goldens with KBSOLVE_REGOLD=1 after an intended change.
A slow tier (`-m slow`) parses the emitted YAML with LlamaFactory's real
`get_train_args`, here when `llamafactory` is importable, else in the side venv
`python -m bench.parsers.venvs llamafactory` builds; without either it skips and
says so in the summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbsolve import api
from plans import check_by_reference, shipped_kb, solved
from shared_data import shared_dir

GOLDEN = Path(__file__).parent / "golden" / "emit_llamafactory"
LF_EXAMPLES = "examples/llamafactory/examples"  # in ../shared

# name -> (gpus, model, pins): pinned so that the solver's choice cannot drift
PLANS = {
    "qlora_1x4090": ("1x4090", "qwen3-8b", [
        "quantization_bit=4", "finetuning_type=lora", "lora_rank=16", "use_unsloth=true",
        "fp8=false", "neat_packing=true", "flash_attn=fa2", "per_device_train_batch_size=1",
        "gradient_accumulation_steps=8", "disable_gradient_checkpointing=false",
        "enable_liger_kernel=false", "optim=adamw_torch", "bf16=true", "use_unsloth_gc=false"]),
    "full_z3_8xh100": ("8xH100", "qwen3-8b", [
        "finetuning_type=full", "deepspeed=z3", "flash_attn=fa2", "enable_liger_kernel=true",
        "per_device_train_batch_size=1", "gradient_accumulation_steps=4", "bf16=true",
        "neat_packing=true", "disable_gradient_checkpointing=false", "optim=adamw_torch",
        "fp8=false", "use_adam_mini=false", "use_unsloth_gc=false"]),
    "fsdp_qlora_2x4090": ("2x4090", "llama3-70b", [
        "finetuning_type=lora", "quantization_bit=4", "fsdp=fsdp1_offload", "flash_attn=fa2",
        "per_device_train_batch_size=1", "gradient_accumulation_steps=16", "bf16=true",
        "neat_packing=true", "disable_gradient_checkpointing=false", "lora_rank=16",
        "enable_liger_kernel=true", "optim=adamw_torch", "fp8=false", "use_unsloth_gc=true"]),
}

# The real keys of LlamaFactory 0.9.6.dev0's five argument classes that kbsolve
# writes (fact sheet §1); a key outside this set would fail HfArgumentParser.
REAL_KEYS = {
    "stage", "finetuning_type", "lora_rank", "lora_alpha", "lora_dropout", "lora_target",
    "use_dora", "use_rslora", "pissa_init", "pissa_iter", "pissa_convert", "loraplus_lr_ratio",
    "oft_rank", "oft_block_size", "quantization_bit", "quantization_method", "quantization_type",
    "double_quantization", "use_unsloth", "use_unsloth_gc", "use_reentrant_gc",
    "enable_liger_kernel", "flash_attn", "deepspeed", "bf16", "fp16", "pure_bf16", "fp8",
    "fp8_backend", "fp8_enable_fsdp_float8_all_gather", "upcast_layernorm", "upcast_lmhead_output",
    "neat_packing", "packing", "disable_gradient_checkpointing", "gradient_checkpointing",
    "per_device_train_batch_size", "gradient_accumulation_steps", "cutoff_len",
    "model_name_or_path", "optim", "use_galore", "galore_rank", "use_apollo", "apollo_rank",
    "use_badam", "use_adam_mini", "use_muon", "dataset", "template", "output_dir", "do_train",
    "preprocessing_num_workers", "dataloader_num_workers", "report_to", "use_kt",
    "learning_rate", "num_train_epochs", "lr_scheduler_type", "warmup_ratio", "logging_steps",
    "save_steps", "plot_loss",
}


def _query(name: str) -> dict:
    gpus, model, pins = PLANS[name]
    return {"gpus": gpus, "model": model, "set": pins, "top": 0}


def _emit(name: str, tmp_path: Path) -> dict[str, str]:
    plan = solved(_query(name))
    assert plan.status in ("optimal", "feasible"), plan.status
    written = api.emit(plan, str(tmp_path), shipped_kb())
    return {Path(p).name: Path(p).read_text(encoding="utf-8") for p in written}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_emission_matches_golden(name, tmp_path):
    files = _emit(name, tmp_path)
    folder = GOLDEN / name
    if os.environ.get("KBSOLVE_REGOLD"):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*"):
            old.unlink()
        for file_name, text in files.items():
            (folder / file_name).write_text(text, encoding="utf-8")
    expected = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*")}
    assert files == expected


@pytest.mark.parametrize("name", sorted(PLANS))
def test_golden_plan_is_the_reference_optimum_around_it(name):
    """The plan behind each golden emission, by an independent property (issue 25): the
    exact evaluator reproduces its memory and step time, and the reference enumerator
    finds nothing better among the options the pins leave free, one at a time."""
    plan = solved(_query(name))
    assert plan.status == "optimal"
    assert check_by_reference(_query(name), plan) >= 10


@pytest.mark.parametrize("name", sorted(PLANS))
def test_train_yaml_has_real_keys_only(name, tmp_path):
    train = yaml.safe_load(_emit(name, tmp_path)["train.yaml"])
    assert set(train) <= REAL_KEYS, set(train) - REAL_KEYS
    assert train["do_train"] is True and train["dataset"] and train["output_dir"]
    assert train["flash_attn"] in {"auto", "disabled", "sdpa", "fa2", "fa3"}


def test_zero3_json_is_llamafactorys_example(tmp_path):
    theirs = json.loads(shared_dir(LF_EXAMPLES, "deepspeed", "ds_z3_config.json").read_text())
    files = _emit("full_z3_8xh100", tmp_path)
    ours = json.loads(files["ds_config.json"])
    # HF fills "auto" with hidden x hidden; kbsolve writes the number it becomes
    assert ours["zero_optimization"].pop("reduce_bucket_size") == 4096 * 4096
    theirs["zero_optimization"].pop("reduce_bucket_size")
    assert ours == theirs
    assert yaml.safe_load(files["train.yaml"])["deepspeed"] == "ds_config.json"
    assert "export FORCE_TORCHRUN=1" in files["run.sh"]
    assert "llamafactory-cli train train.yaml" in files["run.sh"]


def test_fsdp_qlora_uses_accelerate(tmp_path):
    theirs = yaml.safe_load(
        shared_dir(LF_EXAMPLES, "accelerate", "fsdp_config_offload.yaml").read_text())
    files = _emit("fsdp_qlora_2x4090", tmp_path)
    ours = yaml.safe_load(files["accelerate_config.yaml"])
    for key in ("tpu_env", "tpu_use_cluster", "tpu_use_sudo"):
        theirs.pop(key)  # TPU settings, at accelerate's defaults
    assert ours == theirs
    assert "accelerate launch --config_file accelerate_config.yaml" in files["run.sh"]
    assert "FORCE_TORCHRUN" not in files["run.sh"]
    assert "deepspeed" not in yaml.safe_load(files["train.yaml"])
    # 4-bit bnb under FSDP checks bitsandbytes>=0.43.0 (quantization.py 196-201)
    assert "bitsandbytes>=0.43.0" in files["requirements.txt"].splitlines()


# LlamaFactory's get_train_args on each train.yaml named, in an interpreter that has
# llamafactory; prints one line per file: what the test compares, or the error. One child
# parses every plan's file (importing torch and transformers is most of its cost). On a
# machine without a GPU, `use_cpu` stands in for the GPU HF's bf16 check wants, and the
# package checks (unsloth, liger-kernel: fact sheet P21) are skipped; every key and every
# other rule of get_train_args still applies.
PARSE = """
import json, sys, traceback
import torch, yaml
from llamafactory.hparams import get_train_args, parser
for path in sys.argv[1:]:
    train = yaml.safe_load(open(path, encoding="utf-8"))
    if not torch.cuda.is_available():
        train["use_cpu"] = True
        parser.check_version = lambda *a, **k: None
    try:
        _, data_args, _, finetuning_args, _ = get_train_args(train)
    except BaseException:
        print(json.dumps({"path": path, "error": traceback.format_exc()[-3000:]}), flush=True)
        continue
    print(json.dumps({"path": path, "finetuning_type": finetuning_args.finetuning_type,
                      "cutoff_len": data_args.cutoff_len}), flush=True)
"""


def llamafactory_python() -> str:
    """An interpreter with LlamaFactory's parser: this one, else the side venv that
    bench/parsers/venvs.py builds; skips, naming the venv and how to build it, when
    neither has it."""
    import importlib.util

    from bench.parsers import venvs
    if importlib.util.find_spec("llamafactory") is not None:
        return sys.executable
    if venvs.ready("llamafactory"):
        return str(venvs.python_of("llamafactory"))
    pytest.skip(f"LlamaFactory's parser is neither importable here nor in its side venv "
                f"{venvs.python_of('llamafactory').parent.parent} (not built): build it with "
                f"`python -m bench.parsers.venvs llamafactory` from the repository root "
                f"(KBSOLVE_TEST_VENVS chooses the folder)")


@pytest.fixture(scope="module")
def real_parser_verdicts(tmp_path_factory) -> dict:
    """name -> (the train.yaml given to get_train_args, what it parsed or its error)."""
    python = llamafactory_python()
    folder = tmp_path_factory.mktemp("real-parser")
    given = {}
    for name in sorted(PLANS):
        train = yaml.safe_load(_emit(name, folder / name)["train.yaml"])
        train.pop("deepspeed", None)  # DeepSpeed needs a distributed launch (rule P7)
        train["output_dir"] = str(folder / name / "out")
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(train), encoding="utf-8")
        given[str(path)] = (name, train)
    done = subprocess.run([python, "-c", PARSE, *given], capture_output=True, text=True,
                          cwd=folder, env={**os.environ, "DISABLE_VERSION_CHECK": "1"},
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = {}
    for line in done.stdout.splitlines():
        if line.startswith("{") and '"path"' in line:
            parsed = json.loads(line)
            name, train = given[parsed.pop("path")]
            verdicts[name] = (train, parsed)
    assert set(verdicts) == set(PLANS), done.stdout[-3000:] + done.stderr[-3000:]
    return verdicts


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
def test_real_parser_accepts(name, real_parser_verdicts):
    """LlamaFactory's own get_train_args on the emitted YAML."""
    train, parsed = real_parser_verdicts[name]
    assert "error" not in parsed, parsed.get("error")
    assert parsed["finetuning_type"] == train["finetuning_type"]
    packed = train.get("neat_packing") or train.get("packing")
    assert parsed["cutoff_len"] == train["cutoff_len"] - (1 if packed else 0)  # rule D5
