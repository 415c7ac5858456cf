"""A short terminal view: one block per config, the score, the problems."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsolve.render.audit_markdown import fit_line, message, tip_line, yaml_text
from kbsolve.render.audit_words import title, words

if TYPE_CHECKING:
    from kbsolve.results.audit import AuditReport


def terminal(report: AuditReport, lang: str = "en") -> str:
    w = words(lang)
    lines = [f"{w['project']}: {report.path} ({report.files} {w['files']}; "
             f"{w['hardware']}: {report.hardware})"]
    if report.frameworks:
        lines.append(f"{w['frameworks']}: {', '.join(sorted(report.frameworks))}")
    for unit in report.units:
        lines.append("")
        lines.append(f"{unit.path} [{unit.framework}] {w['score']} {unit.score}/{unit.points}  "
                     f"errors {len(unit.errors)}  silent {len(unit.silent)}")
        for cat in unit.categories:
            bar = "#" * cat.score + "." * (cat.points - cat.score)
            lines.append(f"  {cat.id:>4} {title(cat, lang)[:28]:<28} {cat.score:>2}/{cat.points:<2} {bar}")
        for f in unit.errors:
            lines.append(f"  error  {f.location}: {message(f, lang)}")
        for f in unit.silent:
            lines.append(f"  silent {f.location}: {message(f, lang)}")
        if unit.fit is not None and unit.fit.status != "undecided":
            lines.append(f"  {w['fit']}: {fit_line(unit, w)}")
        todo = [r for p in ("P0", "P1", "P2") for r in unit.recommendations.get(p, [])]
        for r in todo[:5]:
            gain = f"  ({r.effect})" if r.effect else ""
            lines.append(f"  {r.priority} {title(r, lang)}: "
                         + ", ".join(f"{k}: {yaml_text(v)}" for k, v in r.changes.items())
                         + gain)
        lines += tip_line(unit, w, lang, "  ")[1:]
    return "\n".join(lines) + "\n"
