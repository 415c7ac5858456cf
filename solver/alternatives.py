"""The runner-up plans: the best feasible plans the explanations met.

Explaining a plan measures, for every deciding option (one whose value speed,
memory or a preference chose), each other value as a neighbour of the plan;
where a value needs other changes too, the search found a feasible plan with
it. Those plans are the candidates: no new evaluations are made here. Each was
checked against every rule; one whose time and memory differ from the plan's
by less than the output shows (0.05 %, 0.005 GiB) is not an alternative.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kbsolve.program.metrics import Metrics, sort_key

DECIDING_KINDS = ("speed", "memory", "preference", "optimum")


def runner_ups(best: Metrics, candidates: list[tuple[dict[str, Any], Any]],
               deciding: list[str], top: int) -> list[tuple[dict[str, Any], Metrics]]:
    """Up to `top` candidates, best first, as (changed options, metrics); no
    two share the same change set, and each changes a deciding option. A
    candidate is a Metrics or a neighbour with an `exact` Metrics."""
    if top <= 0:
        return []
    wanted = set(deciding)
    unique: dict[tuple, tuple[dict, Any]] = {}
    for changes, candidate in candidates:
        if wanted & set(changes):
            unique.setdefault(tuple(sorted(changes.items(), key=repr)), (changes, candidate))
    # rank on the float estimates, measure exactly from the best down until
    # `top` are taken (and every candidate within the tolerance of the last)
    order = sorted(unique.items(), key=lambda item: (_estimate(item[1][1]), repr(item[0])))
    found: list[tuple[dict, Metrics]] = []
    last = None
    for _, (changes, candidate) in order:
        estimate = _estimate(candidate)
        if len(found) >= top and last is not None and not _within(estimate, last):
            break
        metrics = getattr(candidate, "exact", candidate)
        if not metrics.feasible:
            continue
        if not _differs(metrics, best):
            continue
        found.append((changes, metrics))
        last = estimate
    found.sort(key=lambda pair: (sort_key(pair[1]), repr(sorted(pair[0].items(), key=repr))))
    return found[:top]


SHOWN_TIME = Fraction(1, 2000)  # 0.05 %: the table prints time deltas to 0.1 %
SHOWN_BYTES = Fraction(2**30, 200)  # 0.005 GiB: it prints memory deltas to 0.01 GiB


def _differs(metrics: Metrics, best: Metrics) -> bool:
    """An alternative must differ visibly in time or memory from the plan."""
    time = abs(metrics.time_per_work - best.time_per_work)
    if best.time_per_work and time >= SHOWN_TIME * best.time_per_work:
        return True
    return abs(metrics.levels["device"] - best.levels["device"]) >= SHOWN_BYTES


def _estimate(candidate) -> tuple:
    view = getattr(candidate, "view", None)
    if view is not None:
        return tuple(view.key)
    metrics = getattr(candidate, "exact", candidate)
    return tuple(float(x) for x in sort_key(metrics))


def _within(a: tuple, b: tuple) -> bool:
    return all(abs(x - y) <= 1e-6 * max(abs(x), abs(y)) for x, y in zip(a, b))
