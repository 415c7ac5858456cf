"""The runner-up plans: the best feasible plans the explanations met.

Explaining a plan measures, for every deciding option (one whose value speed,
memory or a preference chose), each other value as a neighbour of the plan;
where a value needs other changes too, the search found a feasible plan with
it. Those plans are the candidates: no new evaluations are made here. Each was
checked against every rule; one that is neither faster, smaller nor slower or
larger than the plan (the same time and memory) is not an alternative.
"""

from __future__ import annotations

from typing import Any

from kbsolve.program.metrics import Metrics, sort_key

DECIDING_KINDS = ("speed", "memory", "preference", "optimum")


def runner_ups(best: Metrics, candidates: list[tuple[dict[str, Any], Metrics]],
               deciding: list[str], top: int) -> list[tuple[dict[str, Any], Metrics]]:
    """Up to `top` candidates, best first, as (changed options, metrics); no
    two share the same change set, and each changes a deciding option."""
    if top <= 0:
        return []
    wanted = set(deciding)
    found: dict[tuple, tuple[dict, Metrics]] = {}
    for changes, metrics in candidates:
        if not metrics.feasible or not wanted & set(changes):
            continue
        if metrics.time_per_work == best.time_per_work and \
                metrics.levels["device"] == best.levels["device"]:
            continue
        found.setdefault(tuple(sorted(changes.items(), key=repr)), (changes, metrics))
    ranked = sorted(found.values(), key=lambda pair: (sort_key(pair[1]), repr(sorted(
        pair[0].items(), key=repr))))
    return ranked[:top]
