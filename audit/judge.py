"""Rate each checklist item: enabled, not enabled, recommended, not applicable
or undecided (a fact such as the GPU is unknown)."""

from __future__ import annotations

from kbsolve.audit.assess import Context, Undecided
from kbsolve.audit.code_patterns import Uses, judge_code, parse_pattern
from kbsolve.audit.audit_data import config_value
from kbsolve.audit.mapping import plain
from kbsolve.results.audit import CheckResult
from kbsolve.dsl.kb import Check, KnowledgeBase


def shown_change(kb: KnowledgeBase, option, value) -> tuple[str, object]:
    """(the framework's key, the value as written there) for one option value."""
    for emit in sorted(option.emits, key=lambda e: e.target != option_key_target(kb, option)):
        written = config_value(kb, option, emit.target, value)
        return (emit.key, written[1]) if written else (emit.key, None)
    return option.name, plain(value)


def option_key_target(kb: KnowledgeBase, option) -> str:
    files = kb.frameworks[option.framework].files
    return files[0].name if files else ""


def config_checks(kb: KnowledgeBase, framework: str) -> list[Check]:
    return [c for c in kb.of(kb.checks, framework) if parse_pattern(c.needs_code) is None]


def code_checks(kb: KnowledgeBase, framework: str) -> list[Check]:
    return [c for c in kb.of(kb.checks, framework) if parse_pattern(c.needs_code) is not None]


def _result(kb: KnowledgeBase, check: Check, status: str, reason: str = "",
            evidence: list[str] | None = None) -> CheckResult:
    changes = dict(shown_change(kb, kb.options[f"{check.framework}.{name}"], value)
                   for name, value in check.recommend)
    return CheckResult(id=check.id, category=check.category, title_en=check.title_en,
                       title_zh=check.title_zh, points=check.points, priority=check.priority,
                       status=status, reason=reason, advice_en=check.advice_en,
                       advice_zh=check.advice_zh, changes=changes, evidence=evidence or [],
                       source=check.meta.source)


def judge_config(ctx: Context) -> list[CheckResult]:
    kb = ctx.kb
    checks = config_checks(kb, ctx.framework)
    enabled_groups: dict[str, str] = {}
    first: dict[str, tuple[str, str]] = {}
    for check in checks:
        try:
            if not ctx.holds(check.applies):
                first[check.id] = ("not_applicable", "its condition does not hold here")
                continue
            if ctx.holds(check.enabled):
                first[check.id] = ("enabled", "")
                if check.group:
                    enabled_groups.setdefault(check.group, check.id)
                continue
            first[check.id] = ("open", "")
        except Undecided as missing:
            first[check.id] = ("undecided", f"needs {missing}")
    results = []
    for check in checks:
        status, reason = first[check.id]
        if status == "open":
            other = enabled_groups.get(check.group) if check.group else None
            if other:
                status, reason = "not_applicable", f"the alternative {other} is in use"
            else:
                status, reason = _recommendable(ctx, check)
        results.append(_result(kb, check, status, reason))
    return results


def _recommendable(ctx: Context, check: Check) -> tuple[str, str]:
    """Recommended when its values break no hard rule; else not enabled, and why."""
    if not check.recommend:
        return "not_enabled", "the KB gives no value that turns it on"
    changes = {f"{check.framework}.{name}": value for name, value in check.recommend}
    before = {r.id for r in ctx.broken_after({})}
    for rule in ctx.broken_after(changes):
        if rule.id not in before:
            return "not_enabled", f"turning it on breaks rule {rule.id}: {rule.meta.because}"
    return "recommended", ""


def judge_code_unit(kb: KnowledgeBase, framework: str, uses: Uses, rel: str) -> list[CheckResult]:
    results = []
    for check in code_checks(kb, framework):
        verdict = judge_code(parse_pattern(check.needs_code), uses, rel)
        if not verdict.applies:
            results.append(_result(kb, check, "not_applicable", "the code does not use it"))
        elif verdict.fault:
            results.append(_result(kb, check, "recommended", "found in the code",
                                   verdict.evidence))
        else:
            results.append(_result(kb, check, "enabled"))
    return results
