"""Shared helpers for the audit tests."""

from __future__ import annotations

from pathlib import Path

from kbsolve.cli.main import main

PROJECTS = Path(__file__).parent / "fixtures" / "projects"


def unit(report, suffix: str):
    return next(u for u in report.units if u.path.endswith(suffix))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
