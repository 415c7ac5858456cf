"""The audit on torchtitan and diffusers runs (issue 22): a TOML key torchtitan drops
(or, in newer versions, refuses) is said with a "did you mean"; a sub-option of a
feature that is switched off is left alone; advice with no estimated gain is a tip;
an OOM cure keeps the values the user wrote when another cure fits."""

from __future__ import annotations

import pytest

from kbsolve import api
from plans import shipped_kb

LAUNCH = "torchrun --nproc_per_node=8 -m torchtitan.models.flux.train --job.config_file flux.toml\n"
TOML = """[model]
name = "flux"
flavor = "flux-dev"

[training]
local_batch_size = 4
steps = 100

[eval]
classifer_free_guidance_scale = 5.0
my_fork_field = 3

[checkpoint]
enable = false
interval = 10
"""


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def flux(kb, tmp_path_factory):
    root = tmp_path_factory.mktemp("tt")
    (root / "run.sh").write_text(LAUNCH)
    (root / "flux.toml").write_text(TOML)
    [unit] = api.audit(str(root), None, kb=kb)[0].units
    return unit


def test_a_misspelt_toml_key_is_dropped_with_a_did_you_mean(flux):
    [dropped] = [f for f in flux.silent if f.kind == "dropped"]
    assert dropped.id == "eval.classifer_free_guidance_scale"
    assert "did you mean 'eval.classifier_free_guidance_scale'" in dropped.message
    assert "eval.classifer_free_guidance_scale" not in flux.unknown_keys
    assert not flux.errors  # not refused: older versions drop it, the version is not known


def test_a_field_no_version_has_and_no_field_resembles_is_listed_apart(flux):
    # a fork's custom config module may add fields: not a finding, one line
    assert "eval.my_fork_field" in flux.unknown_keys
    assert "eval.my_fork_field" not in {f.id for f in flux.silent + flux.errors}


def test_sub_option_of_a_switched_off_feature_is_left_alone(flux):
    everything = flux.silent + flux.errors
    assert not any("checkpoint.interval" in (f.id, *f.fix) for f in everything)
    assert "checkpoint.interval" not in {c.key for c in flux.changes}


def test_advice_with_no_estimated_gain_is_a_tip(flux):
    assert "W_NO_CHECKPOINTS" not in {f.id for f in flux.silent}
    assert [t for t in flux.tips if t.startswith("W_NO_CHECKPOINTS ")]


def test_an_option_off_by_a_value_not_a_switch_is_still_said(kb, tmp_path):
    """prefetch_factor applies only with num_workers > 0: a comparison, not a feature's
    own enable switch, so the value that does nothing is still a finding."""
    (tmp_path / "run.sh").write_text(LAUNCH)
    (tmp_path / "flux.toml").write_text(TOML + "\n[dataloader]\nnum_workers = 0\n"
                                         "prefetch_factor = 4\n")
    [unit] = api.audit(str(tmp_path), None, kb=kb)[0].units
    assert "dataloader.prefetch_factor" in {f.id for f in unit.silent if f.kind == "no_op"}
    assert not any(f.id == "checkpoint.interval" for f in unit.silent)



DREAMBOOTH = """accelerate launch train_dreambooth_lora_flux.py \\
  --pretrained_model_name_or_path=black-forest-labs/FLUX.1-dev \\
  --instance_data_dir=dog --output_dir=out --mixed_precision="bf16" \\
  --instance_prompt="a photo of sks dog" --resolution=512 \\
  --train_batch_size=4 --gradient_accumulation_steps=4 --optimizer="prodigy" \\
  --learning_rate=1. --max_train_steps=500
"""


def test_flux_lora_oom_cure_is_gradient_checkpointing_not_the_batch(kb, tmp_path):
    """Batch 4 at 512 px without checkpointing on 80 GB: the text encoders stay
    resident, the run does not fit; the cure that fits without touching the written
    micro-batch and accumulation is gradient checkpointing. (diffusers#10994 reports
    batch 2 out of memory; the traced activations, bench/data/traces/grid_dit.json,
    put batch 2 at 54 GiB allocated, so the case is batch 4 since issue 23's DiT traces.)"""
    (tmp_path / "train.sh").write_text(DREAMBOOTH)
    [unit] = api.audit(str(tmp_path), "1xA100-80G-SXM", kb=kb, model="flux1-dev")[0].units
    terms = {t.term: t.gib for t in unit.fit.breakdown}
    assert terms["text_encoders"] > 8
    assert unit.fit.status == "oom"
    changed = {c.key: c.new for c in unit.changes}
    assert changed.get("gradient_checkpointing") is True
    assert "train_batch_size" not in changed and "gradient_accumulation_steps" not in changed


def test_flux_full_finetune_is_audited_and_its_states_do_not_fit_80_gb(kb, tmp_path):
    """train_dreambooth_flux.py trains all 11.9B weights in fp32 with Prodigy's four fp32
    states (diffusers#10196): weights, gradients and states alone are 24 bytes a weight."""
    (tmp_path / "train.sh").write_text(DREAMBOOTH.replace(
        "train_dreambooth_lora_flux.py", "train_dreambooth_flux.py").replace(
        "--resolution=512", "--resolution=1024").replace("--train_batch_size=2",
                                                         "--train_batch_size=1"))
    report = api.audit(str(tmp_path), "1xA100-80G-SXM", kb=kb, model="flux1-dev")[0]
    [unit] = report.units
    terms = {t.term: t.gib for t in unit.fit.breakdown}
    assert unit.fit.status == "oom"
    assert terms["transformer_weights"] == pytest.approx(terms["full_gradients"])
    assert terms["full_optimizer_states"] == pytest.approx(4 * terms["transformer_weights"], rel=1e-4)
    assert "text_encoders" not in terms  # this script deletes the list, freeing them
    assert not unit.changes  # no flag of the script makes it fit one card


def test_full_finetune_is_a_method_a_plan_takes_only_with_consent(kb):
    query = {"framework": "diffusers", "model": "flux1-dev", "gpus": "8xH100", "top": 0}
    plan = api.solve(query, kb)
    chosen = {c.option: c.value for c in plan.explanation}
    assert chosen["script"] != "train_dreambooth_flux.py"
