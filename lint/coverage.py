"""`kb test --coverage`: which hard rules, warnings and checklist items a DSL
test exercises. Rules and warnings count when a test names them
(lint/kbtest.py); a checklist item also counts when a test pins every
setting it recommends and expects a plan (its advice is shown to be followable)."""

from __future__ import annotations

from dataclasses import dataclass

from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.lint.kbtest import coverage as named_coverage


@dataclass
class Coverage:
    kind: str  # hard rules | warnings | checklist items
    total: int
    untested: list[tuple[str, str]]  # (key, location)

    @property
    def short(self) -> str:
        return {"hard rules": "rules", "checklist items": "checks"}.get(self.kind, self.kind)

    @property
    def percent(self) -> float:
        return 100.0 if not self.total else 100.0 * (self.total - len(self.untested)) / self.total


def coverage(kb: KnowledgeBase) -> list[Coverage]:
    missing = named_coverage(kb)
    followed = {key for key, check in kb.checks.items() if check.recommend and any(
        t.framework == check.framework and set(check.recommend) <= set(t.pins)
        and any(e.kind == "feasible" for e in t.expectations) for t in kb.tests.values())}
    rows = [("hard rules", kb.rules, missing["rules"]),
            ("warnings", kb.warnings, missing["warnings"]),
            ("checklist items", kb.checks, [k for k in missing["checks"] if k not in followed])]
    return [Coverage(kind, len(table), [(k, str(table[k].meta.span)) for k in untested])
            for kind, table, untested in rows]
