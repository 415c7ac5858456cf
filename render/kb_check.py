"""`kbsolve kb check [--deep]`: the KB's size, then the deep check's findings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsolve.diagnostics import SourceCache

if TYPE_CHECKING:
    from kbsolve.results.lint import DeepReport


def summary(counts: dict[str, int]) -> str:
    return "kb check: ok — " + ", ".join(f"{n} {what}" for what, n in counts.items())


def deep(report: DeepReport, verbose: bool = False) -> str:
    sources = SourceCache()
    lines = [diagnostic.render(sources) for diagnostic in report.diagnostics]
    lines += [f"note: {note}" for note in (report.notes if verbose else report.notes[:0])]
    errors, total = len(report.errors), len(report.diagnostics)
    shapes = ", ".join(f"{fw} {n}" for fw, n in report.situations.items())
    lines.append(f"kb check --deep: {errors} error(s), {total - errors} warning(s) in "
                 f"{report.seconds:.1f} s; distinct GPU x model x query situations: {shapes}; "
                 f"{report.forbidden_values} value(s) forbidden outright by a rule; "
                 f"{_silenced(report.silenced)}"
                 f"{len(report.notes)} note(s){'' if verbose else ' (-v lists them)'}")
    return "\n".join(lines)


def _silenced(count: int) -> str:
    return f"{count} warning(s) silenced by a pack; " if count else ""
