"""--fix and kbsolve fix: ruamel round trip, .bak, atomic write, proof by re-audit."""

from __future__ import annotations

import shutil

import pytest

from kbsolve import api
from audit_helpers import PROJECTS, run_cli, unit


@pytest.fixture()
def project(tmp_path):
    target = tmp_path / "lf"
    shutil.copytree(PROJECTS / "lf_project", target)
    return target


def test_audit_fix_writes_keeps_comments_and_a_backup(project):
    broken = project / "configs" / "broken.yaml"
    original = broken.read_text()
    report, written = api.audit(str(project), "8xH100", fix=True, allow=["fp8", "quantization"])
    assert "configs/broken.yaml" in written
    text = broken.read_text()
    assert (project / "configs" / "broken.yaml.bak").read_text() == original
    assert text.startswith("# Every kind of mistake the audit must find.")
    assert "use_liger" not in text and "galore_rank" not in text
    assert "model_name_or_path: Qwen/Qwen3-8B\nstage: dpo\n" in text
    again = unit(report, "broken.yaml")  # --fix invents no dataset: that error stays
    assert [(f.kind, f.id) for f in again.errors] == [("missing_key", "dataset")]
    assert not [f for f in again.silent if f.kind in ("no_op", "value_alias")]
    assert not list(project.rglob(".*.tmp"))


def test_fixed_config_keeps_key_order(project):
    good = project / "configs" / "qwen_lora.yaml"
    keys_before = [line.split(":")[0] for line in good.read_text().splitlines()
                   if line and not line.startswith("#")]
    api.audit(str(project), "8xH100", fix=True)
    keys_after = [line.split(":")[0] for line in good.read_text().splitlines()
                  if line and not line.startswith("#")]
    assert keys_after[:len(keys_before)] == keys_before
    assert "# the base model" in good.read_text()


def test_fix_symptom_oom_makes_the_config_fit(project, capsys):
    oom = project / "configs" / "oom.yaml"
    # a full 8B fine-tune fits one A100 only offloaded, and, with the model's error band,
    # not even then: the bigger H200 has room for the band
    code, out, _ = run_cli(capsys, "fix", str(oom), "--symptom", "oom", "--gpus", "1xH200",
                           "--write")
    assert code == 0, out
    assert "now fits" in out
    report = api.audit(str(oom), "1xH200")[0]
    assert report.units[0].fit.status == "fits" and report.units[0].errors == []
    assert "# Full fine-tuning of an 8B model on one GPU" in oom.read_text()
    assert (project / "configs" / "oom.yaml.bak").exists()


def test_fix_without_write_changes_nothing(project, capsys):
    oom = project / "configs" / "oom.yaml"
    before = oom.read_bytes()
    code, out, _ = run_cli(capsys, "fix", str(oom), "--symptom", "oom", "--gpus", "1xA100")
    assert code == 0 and "1." in out
    assert oom.read_bytes() == before


@pytest.mark.parametrize("symptom", ["slow", "unstable"], ids=["speed", "stability"])
def test_other_symptoms_give_reasons(project, symptom):
    result = api.fix(str(project / "configs" / "qwen_lora.yaml"), symptom, "8xH100")
    for s in result.suggestions:
        assert s.reasons and s.device_gib <= s.budget_gib
        if symptom == "slow":
            assert s.speed_delta_pct > 0


def test_fix_needs_hardware(project, capsys):
    code, _, err = run_cli(capsys, "fix", str(project / "configs" / "oom.yaml"),
                           "--symptom", "oom")
    assert code == 2 and "give --gpus" in err and "Traceback" not in err
