"""The runner-up plans: the best feasible neighbours of the optimum.

A neighbour changes one deciding option (one whose value speed, memory or a
preference chose); when that change alone breaks a rule or overflows, one more
deciding option may change to repair it. Neighbours are measured by the
reference evaluator, so this costs no solver calls; the optimum itself is
still proven by Z3, and every neighbour is checked against every rule.
"""

from __future__ import annotations

from typing import Any

from kbsolve.solver.metrics import Metrics, measure, sort_key
from kbsolve.solver.problem import Problem

DECIDING_KINDS = ("speed", "memory", "preference", "optimum")


def runner_ups(problem: Problem, assignment: dict[str, Any], deciding: list[str],
               top: int) -> list[tuple[dict[str, Any], Metrics]]:
    """Up to `top` feasible plans near `assignment`, best first, as
    (changed options, metrics); no two share the same change set."""
    if top <= 0:
        return []
    keys = [k for k in deciding if k in problem.choices and k not in problem.pinned]
    found: dict[tuple, tuple[dict, Metrics]] = {}
    for key in keys:
        for value in problem.choices[key]:
            if value == assignment[key]:
                continue
            change = {key: value}
            metrics = measure(problem, {**assignment, **change})
            if not metrics.feasible:
                change, metrics = _repaired(problem, assignment, change, keys)
            if metrics is not None:
                found.setdefault(tuple(sorted(change.items(), key=repr)), (change, metrics))
    ranked = sorted(found.values(), key=lambda pair: (sort_key(pair[1]), repr(sorted(
        pair[0].items(), key=repr))))
    return ranked[:top]


def _repaired(problem: Problem, assignment: dict, change: dict, keys: list[str]):
    """The best feasible plan that adds one more change to `change`, if any."""
    best: tuple[dict, Metrics] | None = None
    for other in keys:
        if other in change:
            continue
        for value in problem.choices[other]:
            if value == assignment[other]:
                continue
            trial = {**change, other: value}
            metrics = measure(problem, {**assignment, **trial})
            if metrics.feasible and (best is None or sort_key(metrics) < sort_key(best[1])):
                best = (trial, metrics)
    return best if best is not None else (change, None)
