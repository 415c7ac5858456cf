"""`kbsolve fix --symptom`: the seeds' decision trees, done by search over the
KB's options with the solver's reference evaluator.

oom       the fewest changes that make the config fit, least speed lost first
slow      single changes that raise predicted speed and still fit
unstable  single changes that satisfy more of the KB's preferences, still fitting
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from typing import Any

from kbsolve.audit.assess import Context
from kbsolve.program.metrics import Metrics, measure
from kbsolve.program.problem import build_problem
from kbsolve.solver.report import gib

MAX_VALUES = 64
PAIR_POOL = 16


@dataclass
class Suggestion:
    changes: dict[str, Any]  # option key -> value
    device_gib: float
    budget_gib: float
    speed_delta_pct: float  # + is faster
    reasons: list[str] = field(default_factory=list)


def suggest(ctx: Context, symptom: str, top: int = 5) -> tuple[Metrics, list[Suggestion]]:
    problem = build_problem(ctx.kb, ctx.framework, ctx.facts, {})
    base = measure(problem, ctx.assignment)
    singles = []
    for key, values in sorted(problem.choices.items()):
        for value in values[:MAX_VALUES]:
            if value != ctx.assignment.get(key):
                singles.append(({key: value}, measure(problem, ctx.with_changes({key: value}))))
    valid = [(c, m) for c, m in singles if not m.broken and not m.irrelevant_changed]
    if symptom == "oom":
        found = [(c, m) for c, m in valid if m.fits]
        if not found:
            pool = sorted(valid, key=lambda cm: cm[1].levels["device"])[:PAIR_POOL]
            for (a, _), (b, _) in combinations(pool, 2):
                if a.keys() & b.keys():
                    continue
                both = {**a, **b}
                metrics = measure(problem, ctx.with_changes(both))
                if metrics.fits and not metrics.broken and not metrics.irrelevant_changed:
                    found.append((both, metrics))
        found.sort(key=lambda cm: (len(cm[0]), cm[1].time_per_work, cm[1].levels["device"]))
    elif symptom == "slow":
        found = sorted(((c, m) for c, m in valid if m.fits and
                        m.time_per_work < base.time_per_work),
                       key=lambda cm: cm[1].time_per_work)
    else:
        score = _tier_score(base)
        found = sorted(((c, m) for c, m in valid if (m.fits or not base.fits)
                        and _tier_score(m) > score), key=lambda cm: _neg(_tier_score(cm[1])))
    return base, [_suggestion(ctx, base, c, m, symptom) for c, m in found[:top]]


def _tier_score(m: Metrics) -> tuple:
    return tuple(m.preferences[t] for t in sorted(m.preferences))


def _neg(scores: tuple) -> tuple:
    return tuple(-s for s in scores)


def _suggestion(ctx: Context, base: Metrics, changes: dict, m: Metrics,
                symptom: str) -> Suggestion:
    speed = float((base.time_per_work / m.time_per_work - 1) * 100) if m.time_per_work else 0.0
    return Suggestion(changes, gib(m.levels["device"]), gib(m.budget), round(speed, 1),
                      _reasons(ctx, base, m, symptom, changes))


def _reasons(ctx: Context, base: Metrics, m: Metrics, symptom: str,
             changes: dict) -> list[str]:
    kb = ctx.kb
    if symptom == "oom":
        drops = sorted(((base.memory[k] - v, k) for k, v in m.memory.items()
                        if base.memory.get(k, 0) > v), reverse=True)
        return [f"memory term {k.split('.', 1)[1]} drops by {gib(d)} GiB: "
                f"{kb.memory[k].meta.because}" for d, k in drops[:2]]
    if symptom == "slow":
        gains = sorted(((base.times.get(k, Fraction(0)) - v, k) for k, v in m.times.items()),
                       reverse=True)
        return [f"speed term {k.split('.', 1)[1]}: {kb.speed[k].meta.because}"
                for d, k in gains[:2] if d > 0] or ["a faster step by the KB's speed model"]
    after = ctx.with_changes(changes)
    gained = [p for p in kb.of(kb.preferences, ctx.framework)
              if ctx.run(p.expr, after) != ctx.run(p.expr)]
    return [f"preference {p.id}: {p.meta.because}" for p in gained[:3]] or \
        ["more of the KB's preferences hold"]
