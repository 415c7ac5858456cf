"""The audit report as JSON (the pydantic model, stable key order)."""

from __future__ import annotations

from kbsolve.audit.model import AuditReport


def as_json(report: AuditReport) -> str:
    return report.model_dump_json(indent=2) + "\n"
