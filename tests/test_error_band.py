"""The memory model's error band (issue 16, part 5): every memory figure carries the
band of its class of run, "fits" is checked at the band's upper end, and where a value
fits only without the band the plan says so. The queries are built from the band's own
figures (an estimate, then a budget between the prediction and its upper end), so the
tests hold whatever sizes bench/fit.py writes into kb/core/calibration.kb."""

from __future__ import annotations

import json

import pytest

from kbsolve import api
from kbsolve.render import render
from kbsolve.render.audit_markdown import fit_line
from kbsolve.render.audit_words import words
from audit_helpers import run_cli
from plans import shipped_kb

A100 = {"gpus": "1xA100", "model": "qwen3-8b", "seq_len": 4096}
# LoRA without gradient checkpointing: its activations fill most of the GPU
PINS = {"finetuning_type": "lora", "deepspeed": "none", "fsdp": "none", "use_unsloth_gc": "false",
        "enable_liger_kernel": "true", "per_device_train_batch_size": "2",
        "gradient_accumulation_steps": "32", "flash_attn": "fa2", "bf16": "true"}
NO_CHECKPOINTING = {**PINS, "disable_gradient_checkpointing": "true"}


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def calibrated(kb, cls: str) -> float:
    return float(kb.lets[f"core.memory_band_{cls}"].expr.value)


@pytest.mark.parametrize("settings, cls", [
    ({"finetuning_type": "lora"}, "lora"), ({"finetuning_type": "oft"}, "lora"),
    ({"finetuning_type": "full"}, "full"), ({"finetuning_type": "freeze"}, "full"),
    ({"finetuning_type": "lora", "quantization_bit": "4"}, "qlora")])
def test_estimate_carries_the_band_of_its_class(kb, settings, cls):
    memory = api.estimate(A100, settings, kb).memory
    band = memory.band
    assert band.rule == "llamafactory.error_band"
    assert band.share == pytest.approx(calibrated(kb, cls), abs=1e-4)
    # the device level the fit checks is the band's upper end; below it, the prediction
    assert memory.per_gpu_gib.device == band.upper_gib.device
    assert band.predicted_gib.device == pytest.approx(memory.per_gpu_gib.device - band.gib,
                                                      abs=0.002)
    assert band.predicted_gib.reserved == memory.per_gpu_gib.reserved
    assert band.upper_gib.reserved == pytest.approx(
        band.predicted_gib.reserved * (1 + band.share), rel=1e-3)
    assert memory.fits == (band.upper_gib.device <= memory.budget_gib)


def test_plan_json_and_estimate_output_carry_the_band(kb, capsys):
    estimate = api.estimate(A100, NO_CHECKPOINTING, kb)
    data = json.loads(render(estimate, "json"))["memory"]["band"]
    assert data["share"] == estimate.memory.band.share and data["because"]
    assert data["upper_gib"]["device"] > data["predicted_gib"]["device"]
    argv = ["estimate", "--gpus", A100["gpus"], "--model", A100["model"], "--seq-len", "4096"]
    for key, value in NO_CHECKPOINTING.items():
        argv += ["--set", f"{key}={value}"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == (0 if estimate.feasible else 1), out
    band = estimate.memory.band
    assert (f"device {band.predicted_gib.device:.2f} GiB (model error band "
            f"+{band.share:.1%}: up to {band.upper_gib.device:.2f} GiB)") in out
    assert f"error band +{band.share:.1%}: {band.because}" in out


def _budget_inside_the_band(kb) -> tuple[float, object]:
    """A headroom whose budget lies between the prediction of the config without
    checkpointing and the band's upper end; the config with checkpointing fits it."""
    big = api.estimate(A100, NO_CHECKPOINTING, kb).memory
    small = api.estimate(A100, {**PINS, "disable_gradient_checkpointing": "false"}, kb).memory
    low, high = big.band.predicted_gib.device, big.band.upper_gib.device
    if high - low < 0.05 * big.gpu_gib:
        pytest.skip("the LoRA band is too narrow for a whole-percent headroom inside it")
    pct = round(100 * (1 - (low + high) / 2 / big.gpu_gib))
    budget = big.gpu_gib * (1 - pct / 100)
    assert low <= budget < high and small.band.upper_gib.device <= budget
    return pct / 100, big


def test_a_value_that_fits_only_without_the_band_loses_and_says_so(kb):
    headroom, big = _budget_inside_the_band(kb)
    plan = api.solve({**A100, "headroom": headroom, "top": 0,
                      "set": [f"{k}={v}" for k, v in PINS.items()]}, kb)
    assert plan.status == "optimal" and plan.memory.fits
    choice = next(c for c in plan.explanation if c.option == "disable_gradient_checkpointing")
    assert choice.value is False
    fit = next(r for r in choice.reasons if r.rule == "memory:fit")
    assert "disable_gradient_checkpointing=true" in fit.detail
    assert "fits the model's prediction" in fit.detail and "error band" in fit.detail
    assert f"{big.band.predicted_gib.device:.2f} GiB" in fit.detail
    assert fit.location.startswith("kb/llamafactory/memory.kb") and "memory_band" in fit.source


def test_a_config_that_fits_only_without_the_band_is_refused_and_says_so(kb):
    headroom, big = _budget_inside_the_band(kb)
    plan = api.solve({**A100, "headroom": headroom, "top": 0,
                      "set": [f"{k}={v}" for k, v in NO_CHECKPOINTING.items()]}, kb)
    assert plan.status == "infeasible"
    fit = next(r for r in plan.core if r.rule == "memory:fit")
    assert "at the model's error band's upper end" in fit.detail
    assert "fits the model's prediction" in fit.detail
    assert "memory_band" in fit.source
    assert "error band's upper end" in render(plan, "table")


def test_audit_fit_check_uses_the_upper_end_and_says_so(kb, tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text("model_name_or_path: Qwen/Qwen3-8B\nstage: sft\ndo_train: true\n"
                      "cutoff_len: 4096\n" + "".join(f"{k}: {v}\n" for k, v in
                                                   NO_CHECKPOINTING.items()
                                                   if k not in ("deepspeed", "fsdp")))
    unit = api.audit(str(config), "1xA100", kb=kb)[0].units[0]
    fit = unit.fit
    band = next(t.gib for t in fit.breakdown if t.term == "error_band")
    assert fit.device_gib == pytest.approx(fit.predicted_gib + band, abs=0.002)
    assert fit.band_share == pytest.approx(calibrated(kb, "lora"), abs=1e-4)
    assert fit.status == ("fits" if fit.device_gib <= fit.budget_gib else "oom")
    assert fit.largest_term != "error_band"  # the band is no cause of an overflow
    assert "runs from sources left out of the fit" in fit.band_because  # the measured coverage
    line = fit_line(unit, words("en"))
    if fit.status == "fits":
        assert line.startswith("fits at the model's error band's upper end")
    elif fit.predicted_gib <= fit.budget_gib:
        assert line.startswith("may OOM: the prediction")
    else:
        assert line.startswith("will OOM by") and "error band's upper end" in line


def test_flow_factory_states_that_its_conservative_band_is_not_measured(kb):
    """Issue 23: no Flow-Factory run is measured, so it takes the stated stand-in band and
    says so, and fits are checked at its upper end like every other band."""
    estimate = api.estimate({"gpus": "1xA100", "model": "sd3.5-medium"}, {}, kb)
    band = estimate.memory.band
    assert band.share > 0 and "not measured" in band.because
    assert estimate.memory.per_gpu_gib.device == band.upper_gib.device
    table = render(estimate, "table")
    assert f"model error band +{band.share:.1%}" in table and "not measured" in table


@pytest.mark.parametrize("settings, cls", [({"finetuning_type": "lora"}, "lora"),
                                           ({"finetuning_type": "full"}, "full"),
                                           ({"finetuning_type": "lora", "quantization_bit": "4"}, "qlora")])
def test_the_band_says_the_coverage_bench_measured(kb, settings, cls):
    """Issue 23: a measured count of runs from sources left out of the fit, never an
    unmeasured share."""
    import re
    because = api.estimate(A100, settings, kb).memory.band.because
    covered = re.search(r"covered (\d+) of (\d+) runs from sources left out of the fit", because)
    assert covered and int(covered.group(1)) <= int(covered.group(2))
    assert "9 in 10 published runs" not in because


@pytest.mark.parametrize("query, settings", [
    ({"gpus": "1xH100", "model": "flux1-dev", "framework": "diffusers"}, {})])
def test_frameworks_without_measured_runs_take_the_stated_conservative_band(kb, query, settings):
    band = api.estimate(query, settings, kb).memory.band
    assert band.share == pytest.approx(float(kb.lets["core.memory_band_unmeasured"].expr.value), abs=1e-4)
    assert band.share >= max(calibrated(kb, "full"), calibrated(kb, "lora"))
    assert "not measured" in band.because


@pytest.mark.parametrize("query", [
    {"gpus": "8xH100", "model": "wan2.1-t2v-14b", "framework": "flow-factory"},
    {"gpus": "1xH200", "model": "flux1-dev", "framework": "flow-factory"}])
def test_flow_factory_takes_the_band_from_the_traces_and_says_so(kb, query):
    """Issue 23: no published run measures Flow-Factory (diffusion or video): its band
    is the unmeasured stand-in plus the KB's spread against the DiT traces, and the
    plan says where it comes from."""
    from bench import fit
    band = api.estimate(query, {}, kb).memory.band
    traced = float(kb.lets["core.memory_band_traced"].expr.value)
    assert band.share == pytest.approx(traced, abs=1e-4)
    unmeasured = float(kb.lets["core.memory_band_unmeasured"].expr.value)
    assert traced == pytest.approx(unmeasured + fit.trace_spread(), abs=5e-4)
    assert traced > unmeasured
    assert "not measured on published runs; band from traces" in band.because
