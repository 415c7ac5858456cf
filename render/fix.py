"""`kbsolve fix`: the suggestions that cure a symptom, as text or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsolve.results.fix import FixResult


def as_json(result: FixResult) -> str:
    return result.model_dump_json(indent=2)


def text(result: FixResult) -> str:
    before = result.before
    band = "" if before.predicted_gib is None else \
        f" at the model's error band's upper end (predicted {before.predicted_gib} GiB, band " \
        f"+{before.band_share:.1%})"
    lines = [f"{result.config} [{result.framework}]: {before.device_gib} GiB of "
             f"{before.budget_gib} GiB per GPU ({before.status}){band}"]
    if not result.suggestions:
        lines.append(f"no change found for --symptom {result.symptom}")
    for i, s in enumerate(result.suggestions, 1):
        settings = ", ".join(f"{k}: {_shown(v)}" for k, v in s.changes.items())
        short = "" if s.fits or before.status != "oom" else \
            f"  [does not cure the OOM: still {round(s.device_gib - s.budget_gib, 3)} GiB over]"
        lines.append(f"{i}. {settings}  -> {s.device_gib} GiB ({-s.saved_gib + 0.0:+} GiB), "
                     f"speed {s.speed_delta_pct:+}%{short}")
        for reason in s.reasons:
            lines.append(f"   {reason}")
    if result.needs_allow:
        lines.append("not offered without --allow (they change the recipe, the numerics or "
                     "a library):")
        for held in result.needs_allow:
            settings = ", ".join(f"{k}: {_shown(v)}" for k, v in held.changes.items())
            lines.append(f"   {settings}  ({held.effect}; --allow {held.allow})")
    if not result.suggestions:
        return "\n".join(lines)
    if result.written:
        after = result.after
        folder = result.config.rsplit("/", 1)[0] + "/" if "/" in result.config else ""
        lines.append(f"wrote {result.config} ({', '.join(result.written)}); the original is "
                     f"{folder}{result.backup}; now {after.status}: {after.device_gib} GiB"
                     + "".join(f"; new file {folder}{name}" for name in result.created))
    for item in result.manual:
        lines.append(f"also set {item}")
    return "\n".join(lines)


def _shown(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
