"""Seed 000's five scenario templates: kbsolve solves the same query, finds a
plan that fits and is at least as fast as the template, and explains what is
wrong with each template (the seed's names mapped to the real keys)."""

from __future__ import annotations

import pytest

from kbsolve import api
from plans import shipped_kb

# (query, template settings under their real names, rules the template breaks,
#  warnings it must raise). Scenario 4 asks for ZeRO-3 (R16); scenario 5 keeps
# group_size 1 and 8 prompts on 8 ranks with G = 2 (R11: Flow-Factory rounds M up).
SCENARIOS = {
    "1_wan1.3b_grpo_lora_8xA100": (
        {"gpus": "8xA100", "model": "wan1.3b", "resolution": "384x720", "frames": 17},
        {"fsdp": "fsdp2", "finetune_type": "lora", "lora_rank": "64", "target_modules": "all",
         "attn_backend": "flash_hub", "master_weight_dtype": "bfloat16", "max_epochs": "500",
         "enable_gradient_checkpointing": "true", "offload_samples_to_cpu": "true",
         "latent_storage_dtype": "fp16", "group_size": "4", "ema_device": "cpu",
         "dataloader_num_workers": "8", "dynamics_type": "Flow-SDE"},
        set(), {"W_R24_LORA_ALL"}),
    "2_wan14b_grpo_lora_zero2_8xH100": (
        {"gpus": "8xH100", "model": "wan14b", "resolution": "384x720", "frames": 33},
        {"deepspeed": "zero2", "finetune_type": "lora", "lora_rank": "128",
         "target_modules": "all", "attn_backend": "_flash_3_hub", "learning_rate": "5e-6",
         "enable_gradient_checkpointing": "true", "offload_samples_to_cpu": "true",
         "group_size": "4", "ema_device": "cpu", "ref_param_device": "cpu"},
        set(), {"W_R24_LORA_ALL"}),
    "3_flux_grpo_lora_4xA100": (
        {"gpus": "4xA100", "model": "flux-dev", "resolution": "512x512"},
        {"fsdp": "fsdp2", "finetune_type": "lora", "lora_rank": "64", "target_modules": "all",
         "attn_backend": "flash_hub", "enable_gradient_checkpointing": "true",
         "offload_samples_to_cpu": "true", "group_size": "4", "ema_device": "cpu"},
        set(), {"W_R24_LORA_ALL"}),
    "4_wan14b_full_zero3_8xA100": (
        {"gpus": "8xA100", "model": "wan14b", "resolution": "384x720", "frames": 17},
        {"deepspeed": "zero3", "finetune_type": "full", "target_modules": "all",
         "attn_backend": "flash_hub", "learning_rate": "1e-6",
         "enable_gradient_checkpointing": "true", "offload_samples_to_cpu": "true",
         "max_grad_norm": "0.5", "ema_device": "cpu", "gradient_accumulation_steps": "4"},
        {"R16"}, set()),
    "5_ltx2_nft_lora_8xH100": (
        {"gpus": "8xH100", "model": "ltx-2", "resolution": "512x512", "frames": 33,
         "task": "nft"},
        {"fsdp": "fsdp2", "finetune_type": "lora", "lora_rank": "64", "target_modules": "all",
         "attn_backend": "_flash_3_hub", "enable_gradient_checkpointing": "true",
         "offload_samples_to_cpu": "true", "ema_device": "cpu",
         "model_name_or_path": "Lightricks/LTX-Video-0.9.7-dev"},
        {"R11_GEOMETRY"}, {"W_CHECKPOINT_NOT_CATALOG", "W_R24_LORA_ALL"}),
}


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_seed_scenario(kb, name):
    query, template, broken, warnings = SCENARIOS[name]
    estimate = api.estimate(query, template, kb)
    assert {r.rule.split(".")[-1] for r in estimate.broken} == broken
    fired = {w.id.split(".")[-1] for w in estimate.warnings}
    assert warnings <= fired
    plan = api.solve(query, kb)
    assert plan.status == "optimal"
    assert plan.memory.fits
    if not broken and estimate.memory.fits:
        assert plan.speed.samples_per_s >= estimate.speed.samples_per_s
    chosen = {c.option: c.value for c in plan.explanation}
    assert chosen["deepspeed"] != "zero3"
    if chosen["finetune_type"] == "lora":
        assert chosen["target_modules"] == "default"
