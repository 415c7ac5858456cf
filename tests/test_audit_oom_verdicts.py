"""The audit's OOM verdicts and cures (issue 22): a config that does not fit gets
the cure `kbsolve fix --symptom oom` ranks first, not a pile of checklist items;
repairs that cure it are the only change; a verdict that holds whatever an
unreadable value is (a DeepSpeed file that does not exist, a refused value) is
given, with no cure resting on a guess, and one that depends on it is undecided."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.audit.effects import Estimator
from kbsolve.audit.recommend import cure_or_repairs
from kbsolve.render.audit_markdown import markdown
from audit_helpers import audit_context
from plans import shipped_kb

LF = "llamafactory"
# LoRA on an 8B model, micro-batch 4 at 2048 tokens, plain DDP: every GPU holds the
# frozen 16-bit weights; by the estimate Liger and Unsloth GC together (two
# checklist items) would make it fit, and so would ZeRO-3 with offload alone
LORA_8B = ("model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\n"
           "do_train: true\nfinetuning_type: lora\nlora_target: all\n"
           "dataset: alpaca_en_demo\ntemplate: llama3\ncutoff_len: 2048\n"
           "per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\nbf16: true\n"
           "output_dir: saves/x\n")


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def _config(tmp_path, text: str):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return path


def test_an_oom_gets_the_cure_fix_ranks_first_not_the_checklist(kb, tmp_path):
    config = _config(tmp_path, LORA_8B)
    [unit] = api.audit(str(config), "8xRTX-4090", kb=kb)[0].units
    assert unit.fit.status == "oom"
    listed = {k for p in ("P0", "P1") for r in unit.recommendations[p] for k in r.changes}
    assert {"enable_liger_kernel", "use_unsloth_gc"} <= listed  # still listed, with gains
    first = next(s for s in api.fix(str(config), "oom", "8xRTX-4090", kb=kb).suggestions
                 if s.fits)
    written = {c.key: c for c in unit.changes}
    assert written.keys() == first.changes.keys()
    assert not written.keys() & listed - first.changes.keys()
    assert all(c.reason.startswith("cures the OOM") for c in written.values())
    _, done = api.audit(str(config), "8xRTX-4090", kb=kb, fix=True)
    [again] = api.audit(str(config), "8xRTX-4090", kb=kb)[0].units
    assert done and again.fit.status == "fits"


def _context(kb, config, gpus: str):
    return audit_context(kb, config, gpus)


def test_repairs_that_cure_the_oom_are_the_only_change(kb, tmp_path):
    ctx = _context(kb, _config(tmp_path, LORA_8B), "8xRTX-4090")
    est = Estimator(ctx, frozenset())
    assert not est.base_fits
    lean = {f"{LF}.enable_liger_kernel": True, f"{LF}.use_unsloth_gc": True}
    assert est.effect(lean).fits
    changes, why = cure_or_repairs(ctx, lean, est, "main")
    assert changes == lean and why.startswith("the repair cures the OOM")
    half = {f"{LF}.use_unsloth_gc": True}  # leaner, still OOM: a cure on top of it
    assert not est.effect(half).fits
    changes, why = cure_or_repairs(ctx, half, est, "main")
    assert why.startswith("cures the OOM") and changes.items() >= half.items()
    assert est.effect(changes).fits


FULL = ("model_name_or_path: {model}\nstage: sft\ndo_train: true\nfinetuning_type: full\n"
        "dataset: alpaca_en_demo\ntemplate: {template}\ncutoff_len: {cutoff}\n"
        "per_device_train_batch_size: 1\ngradient_accumulation_steps: 1\nbf16: true\n"
        "deepspeed: examples/deepspeed/ds_z3_offload_confg.json\noutput_dir: saves/x\n")


def test_an_oom_whatever_the_unreadable_value_is_is_a_verdict_without_a_cure(kb, tmp_path):
    _config(tmp_path, FULL.format(model="meta-llama/Meta-Llama-3-70B-Instruct",
                                  template="llama3", cutoff=32768))
    [unit] = api.audit(str(tmp_path), "8xA100-80G-SXM", kb=kb)[0].units
    assert any("ds_z3_offload_confg.json" in f.message for f in unit.errors)
    assert unit.fit.status == "oom" and unit.fit.unknowns == ["deepspeed"]
    assert "OOM whatever deepspeed is" in unit.fit.reason and unit.fit.over_gib > 0
    assert not any(c.reason.startswith("cures the OOM") for c in unit.changes)
    report = api.audit(str(tmp_path), "8xA100-80G-SXM", kb=kb)[0]
    assert "OOM whatever deepspeed is" in markdown(report)


def test_a_verdict_that_depends_on_the_unreadable_value_is_undecided(kb, tmp_path):
    # a 7B full fine-tune: plain DDP does not fit an 80 GB GPU, ZeRO-3 does
    config = _config(tmp_path, FULL.format(model="Qwen/Qwen2.5-7B-Instruct", template="qwen",
                                           cutoff=2048))
    [unit] = api.audit(str(config.parent), "8xA100-80G-SXM", kb=kb)[0].units
    assert unit.fit.status == "undecided" and not unit.fit.unknowns
    assert "deepspeed" in unit.fit.reason


def test_a_file_beside_one_named_config_is_unknown_not_a_default(kb, tmp_path):
    """`kbsolve audit train.yaml`: the DeepSpeed file it names may lie outside what
    was given; the stage it sets is not taken as "none" (which would call this
    ZeRO-3 fine-tune an OOM and recommend ZeRO-3)."""
    config = _config(tmp_path, FULL.format(model="Qwen/Qwen2.5-7B-Instruct", template="qwen",
                                           cutoff=2048))
    [unit] = api.audit(str(config), "8xA100-80G-SXM", kb=kb)[0].units
    assert unit.fit.status == "undecided" and "deepspeed" in unit.fit.reason
    assert not unit.errors and any("not judged at a default" in n for n in unit.notes)
    assert not {c.key for c in unit.changes} & {"deepspeed"}


def test_a_refused_key_that_stands_for_an_option_leaves_its_value_unknown(kb, tmp_path):
    """`Lora_target` is refused (keys are case-sensitive); the user meant a value of
    lora_target, which the run never reads: the fit is not judged at its default.
    A refused key no memory term reads (`num train epochs`) leaves the fit decided."""
    text = LORA_8B.replace("lora_target: all\n", "Lora_target: q_proj,v_proj\n")
    config = _config(tmp_path, text)
    [unit] = api.audit(str(config), "2xA100-80G-SXM", kb=kb)[0].units
    assert any(f.id == "Lora_target" and "did you mean 'lora_target'" in f.message
               for f in unit.errors)
    assert unit.fit.status == "undecided" and unit.fit.reason.endswith("lora_target")
    config.write_text(LORA_8B + "num train epochs: 3.0\n")
    [unit] = api.audit(str(config), "2xA100-80G-SXM", kb=kb)[0].units
    assert any(f.id == "num train epochs" for f in unit.errors)
    assert unit.fit.status == "fits"
