"""The runner-up plans: the best feasible plans the explanations met.

Explaining a plan measures, for every deciding option (one whose value speed,
memory or a preference chose), each other value as a neighbour of the plan;
where a value needs other changes too, the search found a feasible plan with
it. Those plans are the candidates: no new evaluations are made here. Each was
checked against every rule. An alternative is a trade-off: it beats the plan
visibly (by what the output shows: 0.05 %, 0.005 GiB) in time or in memory, and
no alternative shown beats it in both; one identical to the plan, or no better
in either, is not an alternative.
"""

from __future__ import annotations

import heapq
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
    order = _ranked(unique)
    found: list[tuple[dict, Metrics]] = []
    last = None
    for _, (changes, candidate) in order:
        estimate = _estimate(candidate)
        if len(found) >= top and last is not None and not _within(estimate, last):
            break
        if _surely_no_trade(candidate, best):  # no exact figures for a plan never shown
            continue
        metrics = getattr(candidate, "exact", candidate)
        if not metrics.feasible:
            continue
        if not _trades_off(metrics, best) or any(_dominates(m, metrics) for _, m in found):
            continue
        found = [(c, m) for c, m in found if not _dominates(metrics, m)]
        found.append((changes, metrics))
        last = estimate
    found.sort(key=lambda pair: (sort_key(pair[1]), repr(sorted(pair[0].items(), key=repr))))
    return found[:top]


SHOWN_TIME = Fraction(1, 2000)  # 0.05 %: the table prints time deltas to 0.1 %
SHOWN_BYTES = Fraction(2**30, 200)  # 0.005 GiB: it prints memory deltas to 0.01 GiB


def _better(a: Metrics, b: Metrics) -> tuple[bool, bool]:
    """Whether `a` is visibly faster than `b`, and visibly smaller."""
    faster = bool(b.time_per_work) and \
        b.time_per_work - a.time_per_work >= SHOWN_TIME * b.time_per_work
    return faster, b.levels["device"] - a.levels["device"] >= SHOWN_BYTES


def _trades_off(metrics: Metrics, best: Metrics) -> bool:
    """Visibly faster or visibly smaller than the plan (not identical, not worse)."""
    return any(_better(metrics, best))


FLOAT_TOLERANCE = 1e-6  # a float view's relative distance from the exact figure, at most
VIEW_SLACK = 4 * FLOAT_TOLERANCE  # the room a comparison of views leaves on each side


def view_first(plan) -> float | None:
    """sort_key's first part as a found plan's float view reads it (`float_view`,
    plan/explain._Found), or None for a plan without one."""
    view = getattr(plan, "float_view", None)
    return view.key[0] if view is not None else None


def _surely_no_trade(candidate, best: Metrics) -> bool:
    """Whether a neighbour's float view shows it neither visibly faster nor visibly
    smaller than the plan, each by more than the floats' tolerance: then its exact
    figures (program/metrics.measure) would fail _trades_off too. False for a plan
    without a view (measured already) or where the floats are too close to say."""
    view = getattr(candidate, "view", None)
    if view is None:
        return False
    time, plan_time = view.time_per_work, float(best.time_per_work)
    device, plan_device = view.device, float(best.levels["device"])
    slack = VIEW_SLACK * max(abs(time), abs(plan_time))
    faster = plan_time and plan_time - time >= float(SHOWN_TIME) * plan_time - slack
    slack = VIEW_SLACK * max(abs(device), abs(plan_device))
    smaller = plan_device - device >= float(SHOWN_BYTES) - slack
    return not faster and not smaller


def _dominates(a: Metrics, b: Metrics) -> bool:
    """`a` is no worse than `b` in time and memory, and visibly better in one."""
    return a.time_per_work <= b.time_per_work and \
        a.levels["device"] <= b.levels["device"] and any(_better(a, b))


def _ranked(unique: dict):
    """unique's items in the order sorted() gives them by (_estimate, repr of the
    change set), the first of equals first; a candidate with a float view of its
    own (`float_view`: a plan a search found, measured lazily) is measured only once
    it could come next: its view's first part, less four times the tolerance, is
    below its exact first estimate, so while it is above the next one's, it is after."""
    ready: list = []
    waiting = []
    for index, item in enumerate(unique.items()):
        first = view_first(item[1][1])
        if first is None:
            heapq.heappush(ready, (_estimate(item[1][1]), repr(item[0]), index, item))
        else:
            waiting.append((first - abs(first) * VIEW_SLACK, index, item))
    waiting.sort(key=lambda entry: entry[0])
    while ready or waiting:
        if waiting and (not ready or waiting[0][0] <= ready[0][0][0]):
            _, index, item = waiting.pop(0)
            heapq.heappush(ready, (_estimate(item[1][1]), repr(item[0]), index, item))
            continue
        yield heapq.heappop(ready)[-1]


def _estimate(candidate) -> tuple:
    view = getattr(candidate, "view", None)
    if view is not None:
        return tuple(view.key)
    metrics = getattr(candidate, "exact", candidate)
    return tuple(float(x) for x in sort_key(metrics))


def _within(a: tuple, b: tuple) -> bool:
    return all(abs(x - y) <= 1e-6 * max(abs(x), abs(y)) for x, y in zip(a, b))
