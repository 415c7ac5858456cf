"""kbsolve audit on the fixture projects: detection, reading, judging, scores,
errors and silent failures, all checked against the KB's own items."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kbsolve import api
from audit_helpers import PROJECTS, unit
from plans import shipped_kb

LF, FF = "llamafactory", "flow-factory"


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def lf(kb):
    return api.audit(str(PROJECTS / "lf_project"), "8xH100", kb=kb)[0]


@pytest.fixture(scope="module")
def ff(kb):
    return api.audit(str(PROJECTS / "ff_project"), kb=kb)[0]


def test_detection_reads_every_kind_of_sign(lf):
    kinds = {sign.split()[0] for sign in lf.frameworks[LF]}
    assert {"cli", "dependency", "path"} <= kinds
    assert any("data/dataset_info.json" in s for s in lf.frameworks[LF])


def test_each_config_is_a_unit_and_references_are_not(lf):
    paths = sorted(u.path for u in lf.units)
    assert paths == ["configs/broken.yaml", "configs/oom.yaml", "configs/qwen_lora.yaml"]
    assert all(u.framework == LF for u in lf.units)
    assert unit(lf, "broken.yaml").files["deepspeed"] == "configs/ds_z3.json"


def test_malformed_yaml_is_reported_with_its_line_and_the_rest_audited(lf):
    assert any(n.startswith("configs/malformed.yaml:3:") and "YAML syntax error" in n
               for n in lf.notes)


def test_launch_script_gives_env_and_gpu_count(kb):
    report = api.audit(str(PROJECTS / "lf_project"), kb=kb)[0]
    good = unit(report, "qwen_lora.yaml")
    assert "FORCE_TORCHRUN=1" in good.basic["environment"]
    assert good.basic["launch"] == "run.sh"
    assert good.basic["hardware"].startswith("4 GPUs") or "x 4" in good.basic["hardware"]


def test_unknown_gpu_leaves_hardware_items_undecided(kb):
    report = api.audit(str(PROJECTS / "lf_project" / "configs" / "qwen_lora.yaml"), kb=kb)[0]
    good = report.units[0]
    assert good.basic["hardware"] == "unknown (give --gpus)"
    assert good.fit.status == "undecided"
    needs_gpu = [c for c in kb.of(kb.checks, LF) if c.applies is not None
                 and any(p.startswith("gpu.") for p in _facts(c.applies))]
    statuses = {r.id: r.status for r in good.checks}
    assert needs_gpu and all(statuses[c.id] == "undecided" for c in needs_gpu)
    assert any("gpu." in item for item in good.undecided)


def _facts(node):
    from kbsolve.dsl.ir import facts_used
    return facts_used(node)


def test_hard_rule_errors_carry_because_and_source(kb, lf):
    broken = unit(lf, "broken.yaml")
    rules = {f.id: f for f in broken.errors if f.kind == "rule"}
    assert {"P13", "P16"} <= rules.keys()
    for rule_id, finding in rules.items():
        rule = kb.rules[f"{LF}.{rule_id}"]
        assert finding.because == rule.meta.because and finding.source == rule.meta.source
    assert rules["P13"].location == "configs/broken.yaml:6:1"  # the deepspeed line


def test_invented_key_is_an_error_where_unknown_keys_are_rejected(kb, lf):
    assert kb.frameworks[LF].unknown_keys == "error"
    broken = unit(lf, "broken.yaml")
    assert any(f.id == "use_liger" and f.kind in ("nokey", "alias") for f in broken.errors)


def test_silent_failures_old_value_no_op_and_warning(lf):
    silent = {(f.kind, f.id) for f in unit(lf, "broken.yaml").silent}
    assert ("no_op", "quantization_method") in silent  # bitsandbytes quantizes nothing
    assert ("no_op", "galore_rank") in silent
    assert ("warning", "W_FP8_STAGE") in silent


def test_scores_follow_the_checks_points(kb, lf):
    for u in lf.units:
        by_id = {r.id: r for r in u.checks}
        for cat in u.categories:
            earned = sum(by_id[c.id].points for c in kb.of(kb.checks, LF)
                         if c.category == cat.id and c.id in by_id
                         and by_id[c.id].status in ("enabled", "not_applicable"))
            assert cat.score == min(earned, kb.categories[f"{LF}.{cat.id}"].points)
        assert u.points == sum(c.points for c in kb.of(kb.categories, LF))
        assert u.score == sum(c.score for c in u.categories)


def test_statuses_follow_the_check_conditions(kb, lf):
    good = unit(lf, "qwen_lora.yaml")
    status = {r.id: r.status for r in good.checks}
    lora = [c for c in kb.of(kb.checks, LF) if c.recommend == (("finetuning_type", "lora"),)]
    assert lora and all(status[c.id] == "enabled" for c in lora)


def test_recommended_diff_is_proven_and_repairs_the_errors(kb, lf):
    # P16 (fp8 with quantization_bit) is repaired only by turning fp8 or quantization off,
    # a numerics choice of the user's: named with the --allow it needs, not written without
    broken = unit(lf, "broken.yaml")
    numerics = {"deepspeed", "pure_bf16", "fp8", "quantization_bit"}
    assert not numerics & {c.key for c in broken.changes}
    [note] = [n for n in broken.notes if n.startswith("P13, P16: repaired by")]
    needed = note.split("pass --allow ", 1)[1].split()[0]
    assert needed in ("fp8", "quantization") and "," not in note.split("pass --allow ", 1)[1]
    project = api.audit(str(PROJECTS / "lf_project"), "8xH100", kb=kb, allow=[needed])[0]
    [allowed] = [u for u in project.units if u.path.endswith("broken.yaml")]
    assert allowed.changes_proven
    changed = {c.key for c in allowed.changes}
    assert "use_liger" in changed and ({"deepspeed", "pure_bf16"} & changed)


def test_fit_check_names_the_overflow_and_its_term(kb):
    report = api.audit(str(PROJECTS / "lf_project" / "configs" / "oom.yaml"), "1xA100",
                       kb=kb)[0]
    fit = report.units[0].fit
    assert fit.status == "oom" and fit.over_gib > 0
    assert fit.over_gib == pytest.approx(fit.device_gib - fit.budget_gib, abs=0.01)
    assert fit.largest_term == max(fit.breakdown, key=lambda t: t.gib).term


def test_flow_factory_sections_nokeys_and_rules(kb, ff):
    config = unit(ff, "train.yaml")
    assert config.framework == FF and kb.frameworks[FF].unknown_keys == "ignore"
    assert config.files["accelerate"] == "config/accelerate.yaml"
    assert "8" in config.basic["hardware"]
    assert any(f.kind == "rule" and f.id == "R8" for f in config.errors)
    silent = {(f.kind, f.id) for f in config.silent}
    assert ("nokey", "run_name") in silent  # top level: ignored
    assert ("wrong_section", "group_size") in silent
    assert ("no_op", "scheduler.noise_level") in silent
    assert ("value_alias", "model.master_weight_dtype") in silent
    assert not any(f.id == "log.run_name" for f in config.silent + config.errors)
    assert config.points == sum(c.points for c in kb.of(kb.categories, FF))


def test_audit_never_writes_without_fix(tmp_path):
    import hashlib
    import shutil
    project = tmp_path / "p"
    shutil.copytree(PROJECTS / "lf_project", project)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in project.rglob("*")
              if p.is_file()}
    api.audit(str(project), "8xH100")
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in project.rglob("*")
             if p.is_file()}
    assert before == after


def test_old_key_name_is_flagged_with_the_real_one(lf):
    broken = unit(lf, "broken.yaml")
    alias = next(f for f in broken.errors if f.id == "finetune_type")
    assert alias.kind == "alias" and "finetuning_type" in alias.message
    assert alias.fix == {"finetune_type": None, "finetuning_type": "lora"}


def test_nvidia_smi_gives_the_gpu_when_no_flag(tmp_path, monkeypatch, kb):
    import os
    from kbsolve.audit import hardware
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\necho 'NVIDIA H100 80GB HBM3'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(hardware, "_SMI", [])
    report = api.audit(str(PROJECTS / "lf_project" / "configs" / "oom.yaml"), kb=kb)[0]
    assert report.hardware_source == "nvidia-smi"
    assert report.hardware == f"2x{kb.catalog.gpu('H100').name}"
    assert report.units[0].fit.status in ("fits", "oom")


def _broken_context(kb):
    from audit_helpers import audit_context
    return audit_context(kb, PROJECTS / "lf_project" / "configs" / "broken.yaml", "8xH100")


def _predicted(est, metrics):
    """Device memory without the error band: what the run is predicted to use."""
    return metrics.levels["device"] - metrics.memory[est.band_key]


def test_a_change_of_band_class_is_compared_by_memory_not_by_its_band(kb):
    # broken.yaml is QLoRA (the QLoRA band); turning quantization off makes it LoRA, whose
    # band is another share: the change adds memory whatever the two bands are, and is
    # counted so (issue 23: with a wide QLoRA band the LoRA config's upper edge came out
    # below the QLoRA one's, and the repair took 'quantization off' for a saving)
    from kbsolve.audit.effects import Estimator
    ctx = _broken_context(kb)
    est = Estimator(ctx, frozenset())
    assert not est.base_fits and est.band_share > 0
    off = {f"{LF}.deepspeed": "none", f"{LF}.quantization_bit": Fraction(0)}
    e = est.effect(off)
    after_share = e.metrics.memory[est.band_key] / e.metrics.levels["reserved"]
    assert after_share != est.band_share  # another band class
    grown = _predicted(est, e.metrics) - _predicted(est, est.base)
    assert grown > 2**30 and e.raises_memory
    assert e.saved == -grown * (1 + est.band_share)  # the growth, at the base's band share
    assert e.device == e.metrics.levels["device"]  # fit stays at the config's own band


def test_the_repair_does_not_depend_on_the_band_width(kb):
    # the repair of P13 and P16 adds memory whichever way (the config already does not fit):
    # the one that adds the least with the fewest consents, the same at any QLoRA band
    from kbsolve.audit.consent import needing_consent
    from kbsolve.audit.effects import Estimator
    from kbsolve.audit.recommend import repair
    ctx = _broken_context(kb)
    found = []
    for share in (None, Fraction(151, 1000), Fraction(291, 1000), Fraction(5, 10)):
        est = Estimator(ctx, frozenset())
        if share is not None:
            est.band_share = share
        found.append(repair(ctx, ["P13", "P16"], est, consent=False))
        assert not repair(ctx, ["P13", "P16"], est)  # nothing without consent
    assert all(f == found[0] for f in found)
    assert [o.name for o in needing_consent(ctx, found[0])] == ["fp8"]
    assert f"{LF}.quantization_bit" not in found[0]
