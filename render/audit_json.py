"""The audit report as JSON (the pydantic model, stable key order)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsolve.results.audit import AuditReport


def as_json(report: AuditReport, lang: str = "en") -> str:
    """Both languages' texts are fields of the model, so `lang` changes nothing."""
    return report.model_dump_json(indent=2) + "\n"
