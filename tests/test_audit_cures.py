"""Cures and priorities judged by the estimate on the user's own config: `fix
--symptom` and the audit's P0/P1 only offer what lowers memory (OOM) or raises
throughput (slow) here, and never change the recipe, the numerics or a library
without --allow. Also: LlamaFactory's and Flow-Factory's own repository files,
the detected framework in the header, the training shape and list values."""

from __future__ import annotations

import shutil
from fractions import Fraction

import pytest
import yaml

from kbsolve import api
from audit_helpers import run_cli
from plans import shipped_kb
from shared_data import shared_dir

LF = "llamafactory"


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def lf_examples():
    return shared_dir("examples", "llamafactory", "examples")


# What a cure may not change without --allow (the brief's list): the method, the
# task, LoRA's rank, quantization, FP8, pure bf16, the optimizer's algorithm and
# Unsloth; optim may change only between AdamW kernels.
RECIPE_KEYS = {"finetuning_type", "stage", "lora_rank", "quantization_bit", "fp8",
               "pure_bf16", "use_badam", "use_galore", "use_apollo", "use_adam_mini",
               "use_muon", "use_unsloth", "use_kt", "neat_packing"}
ADAMW = {"adamw_torch", "adamw_torch_fused"}


def changes_recipe(changes: dict) -> bool:
    return bool(RECIPE_KEYS & changes.keys()) or changes.get("optim", "adamw_torch") not in ADAMW


def micro_times_accumulation(values: dict) -> Fraction:
    return Fraction(values.get("per_device_train_batch_size", 8)) * \
        Fraction(values.get("gradient_accumulation_steps", 1))


@pytest.mark.parametrize("name", ["train_lora/qwen3_lora_sft.yaml",
                                  "train_full/qwen3_full_sft.yaml"])
def test_oom_cures_lower_memory_and_keep_the_recipe(kb, lf_examples, name):
    config = lf_examples / name
    original = yaml.safe_load(config.read_text())
    result = api.fix(str(config), "oom", "1x4090", kb=kb)
    assert result.suggestions
    for s in result.suggestions:
        assert s.device_gib < result.before.device_gib, s
        assert s.saved_gib > 0
        assert not changes_recipe(s.changes), s.changes
        assert micro_times_accumulation({**original, **s.changes}) == \
            micro_times_accumulation(original), s.changes
    if result.before.status == "oom":  # the cures that make it fit come first
        fitting = [s.device_gib <= s.budget_gib for s in result.suggestions]
        assert fitting[0] and fitting == sorted(fitting, reverse=True)
    else:  # then those that cost no speed
        costly = [s.speed_delta_pct < 0 for s in result.suggestions]
        assert costly == sorted(costly)
    assert result.needs_allow  # 8-bit optimizers, BAdam...: named, with their --allow


def test_slow_cures_raise_throughput_and_consent_admits_more(kb, lf_examples):
    config = lf_examples / "train_lora" / "qwen3_lora_sft.yaml"
    plain = api.fix(str(config), "slow", "1x4090", kb=kb)
    assert plain.suggestions
    for s in plain.suggestions:
        assert s.speed_delta_pct > 0 and s.device_gib <= s.budget_gib
        assert not {"use_unsloth", "fp8", "stage"} & s.changes.keys()
    # the three fastest changes that need consent are named with their --allow (method,
    # packing, FP8 here: Unsloth's own offloaded checkpointing, always on, leaves it
    # fourth); Unsloth is offered once its library is allowed
    assert len(plain.needs_allow) == 3 and all(held.allow for held in plain.needs_allow)
    allowed = api.fix(str(config), "slow", "1x4090", kb=kb, allow=["library,numerics"])
    assert any("use_unsloth" in s.changes for s in allowed.suggestions)


def test_unknown_allow_name_is_a_usage_error(capsys, lf_examples):
    config = lf_examples / "train_lora" / "qwen3_lora_sft.yaml"
    code, _, err = run_cli(capsys, "fix", str(config), "--symptom", "oom", "--gpus",
                           "1x4090", "--allow", "unslot")
    assert code == 2 and "--allow unslot" in err and "unsloth" in err
    assert "Traceback" not in err


@pytest.fixture()
def full_sft_alone(tmp_path, lf_examples):
    """LlamaFactory's full-SFT example outside LlamaFactory's repository: its
    deepspeed: examples/deepspeed/ds_z3_config.json is not in the project."""
    target = tmp_path / "qwen3_full_sft.yaml"
    shutil.copy(lf_examples / "train_full" / "qwen3_full_sft.yaml", target)
    return target


def test_audit_fix_keeps_the_method_and_the_global_batch(full_sft_alone, capsys, kb):
    original = full_sft_alone.read_text()
    code, out, err = run_cli(capsys, "audit", str(full_sft_alone), "--gpus", "8xA100", "--fix")
    assert code == 0
    assert "- Frameworks detected: llamafactory (" in out
    after = yaml.safe_load(full_sft_alone.read_text())
    assert after["finetuning_type"] == "full"
    assert after["per_device_train_batch_size"] == 1
    assert after["gradient_accumulation_steps"] == 2
    assert after["deepspeed"] == "examples/deepspeed/ds_z3_config.json"
    backup = full_sft_alone.parent / "qwen3_full_sft.yaml.bak"
    # written only where a gain clears the KB's threshold (Liger: +4.2% here, under 5%)
    assert backup.read_text() == original if "wrote" in err else \
        not backup.exists() and full_sft_alone.read_text() == original


def test_repository_deepspeed_path_is_read_as_zero3(full_sft_alone, kb):
    unit = api.audit(str(full_sft_alone), "8xA100", kb=kb, plan=True)[0].units[0]
    assert {r.id: r.status for r in unit.checks}["D_ZERO3"] == "enabled"
    planned = {c.key: c.new for c in unit.plan.changes}  # the plan keeps the recipe too
    assert "finetuning_type" not in planned
    micro = planned.get("per_device_train_batch_size", 1)
    assert micro * planned.get("gradient_accumulation_steps", 2) == 2
    assert not any("which is not in the project" in n for n in unit.notes)
    assert any("own file" in n and "ds_z3_config.json" in n for n in unit.notes)
    # the same config on one GPU is OOM, and no offered item changes the method
    one = api.audit(str(full_sft_alone), "1x4090", kb=kb)[0].units[0]
    assert one.fit.status == "oom"
    offered = [r for p in ("P0", "P1") for r in one.recommendations[p]]
    assert not any("finetuning_type" in r.changes for r in offered)
    assert any("finetuning_type" in r.changes for r in one.needs_allow)


def test_priorities_agree_with_the_estimate(kb, lf_examples):
    config = lf_examples / "train_lora" / "qwen3_lora_sft.yaml"
    unit = api.audit(str(config), "8xL40S", kb=kb, allow=["unsloth"])[0].units[0]
    assert unit.fit.status == "fits"
    offered = [r for p in ("P0", "P1", "P2") for r in unit.recommendations[p]]
    assert offered
    for r in offered:  # the config fits: only what makes it 5% faster (the KB's threshold)
        assert r.effect and float(r.effect.split(", ")[1].split("%")[0]) >= 5, (r.id, r.effect)
    refused = {r.id: r for r in unit.checks if r.status == "not_enabled" and r.effect}
    assert "under the KB's threshold" in refused["F_FA2"].reason  # +0.7%: noise
    names = {r.id: r for r in unit.checks}
    assert names["G_UNSLOTH"].status != "recommended"  # single-GPU only
    assert all("use_unsloth" not in r.changes for r in unit.needs_allow)  # it was allowed


def test_image_and_video_configs_that_fit_get_no_memory_advice(kb):
    config = shared_dir("examples", "flow-factory", "examples", "nft", "full", "wan22",
                        "t2v.yaml")
    unit = api.audit(str(config), "8xH200", kb=kb)[0].units[0]
    assert unit.fit.status == "fits"
    offered = {k for p in ("P0", "P1", "P2") for r in unit.recommendations[p]
               for k in r.changes}
    assert not {"train.ema_device", "train.enable_gradient_checkpointing",
                "train.offload_samples_to_cpu"} & offered
    assert any("model.finetune_type" in r.changes for r in unit.needs_allow)


WAN22 = """\
config_file: config/deepspeed/deepspeed_zero2.yaml
num_processes: 8
mixed_precision: bf16
model:
  finetune_type: lora
  target_components: ['transformer', 'transformer_2']
  model_name_or_path: Wan-AI/Wan2.2-T2V-A14B-Diffusers
  model_type: wan2_t2v
train:
  trainer_type: grpo
  resolution: [{height}, 720]
  num_frames: 5
  per_device_batch_size: 1
  group_size: 16
  unique_sample_num_per_epoch: 48
  gradient_step_per_epoch: 2
  offload_samples_to_cpu: true
eval:
  num_frames: 42
"""


def test_flow_factory_lists_repo_files_and_training_shape(tmp_path, kb):
    project = tmp_path / "ff"
    project.mkdir()
    (project / "train.yaml").write_text(WAN22.format(height=384))
    unit = api.audit(str(project), "8xH200", kb=kb)[0].units[0]
    errors = {f.id for f in unit.errors}
    assert "R17" in errors  # both experts (a YAML list) under DeepSpeed: accelerate refuses
    assert "R19_FRAMES" not in errors  # eval.num_frames 42 is not the training shape
    assert "R19_SIZE" not in errors and "R19_SIZE_WAN" not in errors
    assert "train.resolution" not in unit.unknown_keys
    # another of Flow-Factory's own files (config/accelerate_configs/...), which the
    # project lacks: written beside the config, and named from where the run starts
    repair = {c.key: c for c in unit.changes}
    # (FSDP's file since issue 23's DiT traces: both 14B experts unsharded under DDP no
    # longer fit 8xH200 at the traced band; either way one of Flow-Factory's own files)
    assert repair["config_file"].new == repair["config_file"].new_file
    assert repair["config_file"].new in {"multi_gpu.yaml", "fsdp_full_shard.yaml"}
    assert "distributed_type" in repair["config_file"].content
    (project / "train.yaml").write_text(WAN22.format(height=385))
    odd = api.audit(str(project), "8xH200", kb=kb)[0].units[0]
    # train.resolution is read: Wan rounds 385 down and logs it (wan2_t2v.py:275-288
    # @a0b2bc5), so it is a start-up warning in the notes, not an error
    assert not {"R19_SIZE", "R19_SIZE_WAN"} & {f.id for f in odd.errors + odd.silent}
    assert any("R19_SIZE_WAN" in note for note in odd.notes)


def test_offloaded_4bit_weights_are_counted_at_their_stored_size(kb):
    estimate = api.estimate({"gpus": "2x4090", "model": "qwen2.5-72b", "host_ram": 128},
                            {"quantization_bit": "4", "fsdp": "fsdp1_offload"}, kb=kb)
    host = {t.term: t.gib for t in estimate.memory.breakdown if t.location == "host"}
    params_b = kb.catalog.model("qwen2.5-72b").params_b
    # per process, in GB: half of the weights at about 0.52 bytes (NF4, the embeddings
    # in 16 bits), not at 2 bytes (params_b * 1.0, the old term)
    assert params_b * 0.2 < host["offloaded_params"] * 1.074 < params_b * 0.4
