"""Seed 004's plain PyTorch scripts: code-pattern checks on the AST."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.audit.code_patterns import judge_code, parse_pattern, scan
from audit_helpers import PROJECTS, unit
from plans import shipped_kb


@pytest.fixture(scope="module")
def report():
    return api.audit(str(PROJECTS / "pt_project"), kb=shipped_kb())[0]


def test_every_code_check_trips_on_the_faulty_script(report):
    faulty = unit(report, "train_flux.py")
    assert faulty.kind == "code" and faulty.framework == "pytorch"
    assert faulty.checks and all(r.status == "recommended" and r.evidence
                                 for r in faulty.checks)
    assert faulty.score == 0 and faulty.points == sum(c.points for c in faulty.categories)


def test_the_clean_script_passes(report):
    clean = unit(report, "train_clean.py")
    assert {r.status for r in clean.checks} <= {"enabled", "not_applicable"}
    assert clean.score == clean.points > 0


def test_evidence_points_at_the_lines(report):
    faulty = {r.id: r for r in unit(report, "train_flux.py").checks}
    assert any(":9:" in e and "pipeline.sync.Pipe" in e
               for e in faulty["PT_PIPE_REMOVED"].evidence)
    assert any("rank" in e for e in faulty["PT_OFFLOAD_ALL_RANKS"].evidence)
    assert any("lacks step/iter, gpu/world, data/version" in e
               for e in faulty["PT_CKPT_NAME"].evidence)


@pytest.mark.parametrize("code, fault", [
    ("import torch.distributed as d\nfrom torch.utils.data import DistributedSampler\n"
     "s = DistributedSampler(x)\n", True),
    ("from torch.utils.data import DistributedSampler\ns = DistributedSampler(x)\n"
     "s.set_epoch(1)\n", False),
])
def test_when_require_form(code, fault):
    uses, _ = scan(code, "t.py")
    verdict = judge_code(parse_pattern("code: when DistributedSampler require set_epoch"),
                         uses, "t.py")
    assert verdict.applies and verdict.fault is fault


def test_rank_branch_sees_statements_and_conditional_expressions():
    pattern = parse_pattern("code: rank-branch cpu_offload")
    for code in ("if rank == 0:\n    m = F(cpu_offload=c)\n",
                 "m = F(cpu_offload=c if local_rank < 2 else None)\n"):
        uses, _ = scan(code, "t.py")
        assert judge_code(pattern, uses, "t.py").fault
    uses, _ = scan("m = F(cpu_offload=c)\n", "t.py")
    assert not judge_code(pattern, uses, "t.py").fault


def test_a_script_that_does_not_parse_is_a_note(tmp_path):
    (tmp_path / "bad.py").write_text("import torch.distributed\ndef (:\n")
    report = api.audit(str(tmp_path))[0]
    assert any("bad.py:2" in n and "not valid Python" in n for n in report.units[0].notes)
