"""Category scores: the points of enabled and not-applicable items, capped at
the category's points (the seeds' x/58 and x/49 tables)."""

from __future__ import annotations

from kbsolve.results.audit import CategoryScore, CheckResult
from kbsolve.dsl.kb import KnowledgeBase

SCORED = ("enabled", "not_applicable")
PRIORITIES = ("P0", "P1", "P2")


def score(kb: KnowledgeBase, framework: str, results: list[CheckResult],
          other_checks: set[str] = frozenset()) -> tuple[list[CategoryScore], int, int]:
    """The table over every category of the framework except those that hold
    only `other_checks` (code checks in a config audit, and the reverse)."""
    judged = {r.id for r in results}
    table = []
    for category in sorted(kb.of(kb.categories, framework), key=lambda c: c.id):
        members = {c.id for c in kb.of(kb.checks, framework) if c.category == category.id}
        if members and members <= set(other_checks) - judged:
            continue
        mine = [r for r in results if r.category == category.id]
        got = sum(r.points for r in mine if r.status in SCORED)
        table.append(CategoryScore(
            id=category.id, title_en=category.title_en, title_zh=category.title_zh,
            points=category.points, score=min(got, category.points),
            enabled=[r.id for r in mine if r.status == "enabled"],
            recommended=[r.id for r in mine if r.status == "recommended" and not r.tip]))
    return table, sum(c.score for c in table), sum(c.points for c in table)


def by_priority(results: list[CheckResult]) -> dict[str, list[CheckResult]]:
    """Recommended items by priority, the most points first (tips apart)."""
    return {p: sorted((r for r in results if r.status == "recommended" and r.priority == p
                       and not r.tip),
                      key=lambda r: (-r.points, r.id)) for p in PRIORITIES}
