"""`kbsolve fix`: the suggestions that cure a symptom, as text or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsolve.audit.fix_config import FixResult


def as_json(result: FixResult) -> str:
    return result.model_dump_json(indent=2)


def text(result: FixResult) -> str:
    before = result.before
    lines = [f"{result.config} [{result.framework}]: {before.device_gib} GiB of "
             f"{before.budget_gib} GiB per GPU ({before.status})"]
    if not result.suggestions:
        lines.append(f"no change found for --symptom {result.symptom}")
        return "\n".join(lines)
    for i, s in enumerate(result.suggestions, 1):
        settings = ", ".join(f"{k}: {v}" for k, v in s.changes.items())
        lines.append(f"{i}. {settings}  -> {s.device_gib} GiB, speed {s.speed_delta_pct:+}%")
        for reason in s.reasons:
            lines.append(f"   {reason}")
    if result.written:
        after = result.after
        lines.append(f"wrote {result.config} ({', '.join(result.written)}); the original is "
                     f"{result.config}.bak; now {after.status}: {after.device_gib} GiB")
    return "\n".join(lines)
