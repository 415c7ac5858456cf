"""The report's three views and two languages; golden Markdown for the seed-004
PyTorch fixture in English and Chinese (KBSOLVE_UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import json
import os

import pytest

from audit_helpers import PROJECTS, audit_once, run_cli  # noqa: F401 - a fixture

GOLDEN = PROJECTS / "golden"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pytorch_report_matches_golden(capsys, lang):
    code, out, _ = run_cli(capsys, "audit", str(PROJECTS / "pt_project"), "--lang", lang)
    assert code == 0
    text = out.replace(str(PROJECTS / "pt_project"), "<project>")
    golden = GOLDEN / f"pt_project.{lang}.md"
    if os.environ.get("KBSOLVE_UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_markdown_has_the_seed_sections(audit_once, capsys):
    code, out, _ = run_cli(capsys, "audit", str(PROJECTS / "lf_project"), "--gpus", "8xH100")
    assert code == 0
    for heading in ("### Basic info", "### Audit overview", "#### P0 - do now",
                    "#### P1 - strongly recommended", "#### P2 - worth trying",
                    "### Recommended configuration changes", "```diff", "### Errors",
                    "### Silent failures", "### Fit check"):
        assert heading in out
    assert "| **Total** | **" in out


def test_chinese_uses_the_seed_titles_and_check_titles(audit_once, capsys):
    code, out, _ = run_cli(capsys, "audit", str(PROJECTS / "lf_project"), "--gpus", "8xH100",
                           "--lang", "zh")
    assert code == 0
    for heading in ("训练优化审计报告", "### 基本信息", "### 审计结果总览",
                    "#### P0 - 立即执行（显著收益，零风险）", "### 推荐配置修改", "**总计**"):
        assert heading in out
    from kbsolve import api
    kb = api.load_kb()  # the run's shipped KB, copied to this test's cache (conftest)
    category = next(c for c in kb.of(kb.categories, "llamafactory"))
    assert f"{category.id}. {category.title_zh}" in out


def test_json_is_the_report_model(capsys):
    code, out, _ = run_cli(capsys, "audit", str(PROJECTS / "ff_project"), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["units"][0]["framework"] == "flow-factory"
    assert {"errors", "silent", "fit", "categories", "changes"} <= data["units"][0].keys()


def test_terminal_view_is_short(capsys):
    code, out, _ = run_cli(capsys, "audit", str(PROJECTS / "lf_project"), "--gpus", "1xA100",
                           "--format", "terminal")
    assert code == 0 and "will OOM by" in out
    blocks = out.split("\n\n")[1:]
    assert len(blocks) == 3 and all(len(b.splitlines()) <= 30 for b in blocks)


def test_best_plan_is_a_reasoned_minimal_diff():
    from kbsolve import api
    report, _ = api.audit(str(PROJECTS / "lf_project" / "configs" / "qwen_lora.yaml"),
                          "8xH100", plan=True)
    plan = report.units[0].plan
    assert plan.status in ("optimal", "feasible") and plan.changes
    assert all(c.reason and not c.reason.startswith("default") for c in plan.changes)
    assert plan.speedup is not None and plan.speedup >= 1.0


def test_audit_once_audits_a_fixture_once_per_arguments_and_copies_it(monkeypatch, request):
    import audit_helpers
    from kbsolve import api
    calls = []

    def audit(path, gpus=None, kb=None, *, packs=None, fix=False, plan=False, allow=None,
              model=None, gpu_spec=None, host_ram=None):
        calls.append((path, gpus, fix))
        return {"units": [path]}, {}
    monkeypatch.setattr(audit_helpers, "_DONE", {})
    monkeypatch.setattr(api, "audit", audit)
    request.getfixturevalue("audit_once")
    project = str(PROJECTS / "lf_project")
    first = api.audit(project, "8xH100")
    again = api.audit(project, "8xH100", packs=[], allow=[])  # as the command calls it
    assert first == again and first[0] is not again[0] and len(calls) == 1
    api.audit(project, "1xA100")
    api.audit(project, "8xH100", fix=True)  # writes: always the real call
    api.audit(project, "8xH100", fix=True)
    assert calls == [(project, "8xH100", False), (project, "1xA100", False),
                     (project, "8xH100", True), (project, "8xH100", True)]
