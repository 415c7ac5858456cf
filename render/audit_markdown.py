"""The audit report as Markdown, in the seeds' layout plus kbsolve's sections."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kbsolve.render.audit_words import advice, title, words

if TYPE_CHECKING:
    from kbsolve.results.audit import AuditReport, Change, Finding, UnitReport


def markdown(report: AuditReport, lang: str = "en") -> str:
    w = words(lang)
    lines = [f"# {w['project']}: {report.path}", ""]
    lines.append(f"- {w['frameworks']}: " + ("; ".join(
        f"{fw} ({', '.join(signs[:4])})" for fw, signs in sorted(report.frameworks.items()))
        or w["none"]))
    hardware = f"{report.hardware} ({report.hardware_source})" if report.hardware_source \
        else w["per_config"]
    lines.append(f"- {w['hardware']}: {hardware}")
    if report.allow:
        lines.append(f"- {w['allowed']}: {', '.join(report.allow)}")
    lines.append(f"- {report.files} {w['files']}; {w['units'].format(n=len(report.units))}")
    lines += _list(w["notes"], report.notes, level=2)
    for unit in report.units:
        lines += [""] + _unit(unit, lang)
    return "\n".join(lines).rstrip() + "\n"


def _unit(unit: UnitReport, lang: str) -> list[str]:
    w = words(lang)
    lines = [f"## {w['title'].format(fw=unit.framework)}: {unit.path}", ""]
    if unit.kind == "keys":  # a kind not audited: only the keys its parser refuses
        lines += _findings(w["errors"], unit.errors, w, lang)
        return lines + _list(w["notes"], unit.notes)
    lines.append(f"### {w['basic']}")
    for key, value in unit.basic.items():
        lines.append(f"- {w.get(key, key)}: {value}")
    lines += ["", f"### {w['overview']}", "",
              f"| {w['category']} | {w['score']} | {w['enabled']} | {w['recommended']} |",
              "|------|------|--------|----------|"]
    names = {r.id: title(r, lang) for r in unit.checks}
    for cat in unit.categories:
        lines.append(f"| {cat.id}. {title(cat, lang)} | {cat.score}/{cat.points} | "
                     f"{', '.join(names.get(i, i) for i in cat.enabled) or '-'} | "
                     f"{', '.join(names.get(i, i) for i in cat.recommended) or '-'} |")
    lines.append(f"| **{w['total']}** | **{unit.score}/{unit.points}** | | |")
    lines += _findings(w["errors"], unit.errors, w, lang)
    lines += _findings(w["silent"], unit.silent, w, lang)
    if unit.fit is not None:
        lines += ["", f"### {w['fit']}", "", "- " + fit_line(unit, w)]
        if unit.fit.band_because:
            lines.append(f"  - {w['band']}: {unit.fit.band_because}")
        for term in unit.fit.breakdown[:8]:
            lines.append(f"  - {term.term}: {term.gib} GiB")
    lines += ["", f"### {w['priorities']}"]
    for level in ("P0", "P1", "P2"):
        lines += ["", f"#### {w[level]}"]
        items = unit.recommendations.get(level, [])
        if not items:
            lines.append(f"- {w['none']}")
        for i, r in enumerate(items, 1):
            lines += _item(i, r, w, lang)
    lines += tip_line(unit, w, lang, "- ")
    if unit.needs_allow:
        lines += ["", f"#### {w['needs_allow']}"]
        for i, r in enumerate(unit.needs_allow, 1):
            lines += _item(i, r, w, lang)
    if unit.kind == "config":
        lines += ["", f"### {w['changes']}", ""]
        lines += diff_lines(unit.changes) if unit.changes else [f"- {w['none']}"]
    if unit.changes_proven:
        fit = w["proven_fit"] if unit.fit and unit.fit.status == "fits" else ""
        lines += ["", w["proven"].format(fit=fit)]
    if unit.plan is not None:
        lines += ["", f"### {w['plan']}", ""] + plan_lines(unit, w)
    lines += _list(w["undecided"], unit.undecided)
    lines += _list(w["unknown_keys"], [", ".join(f"`{k}`" for k in unit.unknown_keys)]
                   if unit.unknown_keys else [])
    lines += _list(w["notes"], unit.notes)
    return lines


def tip_line(unit: UnitReport, w: dict[str, str], lang: str, lead: str) -> list[str]:
    """The KB's recommendations that no estimate backs here, in one line."""
    tips = [f"{title(r, lang)} ({r.id})" for r in unit.checks
            if r.status == "recommended" and r.tip] + unit.tips  # and audit.yaml advice_tips
    if not tips:
        return []
    return ["", f"{lead}{w['tips']}: " + ", ".join(tips)]


def _item(i: int, r, w: dict[str, str], lang: str) -> list[str]:
    """One recommendation: title, advice, the setting, its effect here and why its
    priority differs from the KB's (or why it needs --allow)."""
    setting = ", ".join(f"`{k}: {yaml_text(v)}`" for k, v in r.changes.items())
    text = f"{i}. **{title(r, lang)}** ({r.id}, {r.points}): {advice(r, lang)}"
    lines = [text + (f" {setting}" if setting else "")]
    if r.effect:
        lines.append(f"   - {w['effect']}: {r.effect}")
    why = r.note or (r.reason if r.status != "recommended" else "")
    if why:
        lines.append(f"   - {w['why']}: {why}")
    lines += [f"   - {w['evidence']}: {e}" for e in r.evidence[:5]]
    return lines


def plan_lines(unit: UnitReport, w: dict[str, str]) -> list[str]:
    plan = unit.plan
    if plan.status not in ("optimal", "feasible"):
        return [f"- {plan.status}: {plan.reason}"]
    if not plan.changes:
        return [f"- {w['plan_same']}"]
    lines = [f"- {w['speedup'].format(x=plan.speedup)}" if plan.speedup else "", "```diff"]
    for change in plan.changes:
        if change.old is not None:
            lines.append(f"- {change.key}: {yaml_text(change.old)}")
        lines.append(f"+ {change.key}: {yaml_text(change.new)}  # {change.reason}"
                     if change.new is not None else f"  (remove {change.key})  # {change.reason}")
    return [line for line in lines if line] + ["```"]


def fit_line(unit: UnitReport, w: dict[str, str]) -> str:
    fit = unit.fit
    figures = dict(over=fit.over_gib, device=fit.device_gib, budget=fit.budget_gib,
                   term=fit.largest_term, predicted=fit.predicted_gib,
                   share=f"{fit.band_share:.1%}" if fit.band_share is not None else "")
    banded = fit.predicted_gib is not None
    host = "" if fit.host_budget_gib is None else "; " + w[
        "host_fits" if fit.host_gib is None or fit.host_gib <= fit.host_budget_gib
        else "host_oom"].format(host=fit.host_gib or 0, host_budget=fit.host_budget_gib)
    whatever = f" ({fit.reason})" if fit.unknowns and fit.reason else ""
    if fit.status == "fits" or (fit.status == "oom" and fit.over_gib is None):
        return w["fits_band" if banded else "fits"].format(**figures) + host + whatever
    if fit.status == "oom":
        only = banded and fit.predicted_gib <= fit.budget_gib
        return w["oom_band_only" if only else "oom_band" if banded else "oom"].format(
            **figures) + host + whatever
    return w["fit_undecided"].format(reason=fit.reason)


def _findings(heading: str, items: list[Finding], w: dict[str, str], lang: str) -> list[str]:
    if not items:
        return []
    lines = ["", f"### {heading}", ""]
    for i, f in enumerate(items, 1):
        where = f"`{f.location}`: " if f.location else ""
        lines.append(f"{i}. {where}{message(f, lang)}")
        if f.because and f.because != f.message:
            lines.append(f"   - {w['because']}: {f.because}")
        if f.source:
            lines.append(f"   - {w['source']}: {f.source}")
    return lines


def message(finding: Finding, lang: str) -> str:
    return finding.message_zh or finding.message if lang == "zh" else finding.message


def _list(heading: str, items: list[str], level: int = 3) -> list[str]:
    if not items:
        return []
    return ["", f"{'#' * level} {heading}", ""] + [f"- {item}" for item in items]


def diff_lines(changes: list[Change]) -> list[str]:
    lines = ["```diff"]
    for change in changes:
        comment = f"  # {change.reason}" if change.reason else ""
        if change.old is not None:
            lines.append(f"- {change.key}: {yaml_text(change.old)}")
        if not change.removed:
            lines.append(f"+ {change.key}: {yaml_text(change.new)}{comment}")
        elif comment:
            lines[-1] += comment
    return lines + ["```"]


def yaml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
