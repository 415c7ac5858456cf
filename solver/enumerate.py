"""The reference enumerator: brute force over the same problem, for tests and
`--solver enumerate`. Exponential; use it on small spaces only."""

from __future__ import annotations

import itertools
import math

from kbsolve.program.metrics import full_assignment, measure, sort_key
from kbsolve.solver.optimize import Outcome
from kbsolve.program.problem import Problem


def space_size(problem: Problem) -> int:
    return math.prod(len(v) for v in problem.choices.values())


def enumerate_best(problem: Problem, limit: int = 2_000_000) -> Outcome:
    keys = sorted(problem.choices)
    domains = [problem.choices[k] for k in keys]
    if problem.pinned:
        domains = [(problem.pinned[k],) if k in problem.pinned else d
                   for k, d in zip(keys, domains)]
    if math.prod(len(d) for d in domains) > limit:
        raise ValueError("space too large to enumerate")
    best, best_key = None, None
    for values in itertools.product(*domains):
        chosen = dict(zip(keys, values))
        metrics = measure(problem, full_assignment(problem, chosen))
        if not metrics.feasible:
            continue
        key = sort_key(metrics)
        if best_key is None or key < best_key:
            best, best_key = (chosen, metrics), key
    if best is None:
        return Outcome("infeasible")
    return Outcome("optimal", best[0], best[1])
