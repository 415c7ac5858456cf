"""Solve a Problem: the best feasible assignment, or a minimal core.

Objectives, in order (program/metrics.sort_key): time per unit of work, soft
preferences tier by tier, device memory, options kept at their defaults (with
--objective memory, memory comes first). The exact branch and bound of
solver/search.py answers first; when its node budget runs out, Z3 proves the
optimum by successive tightening from the search's best plan. Both budgets are
counted (nodes, Z3 rlimit), so the answer does not depend on the machine's
load; the wall-clock time-out is only an outer guard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kbsolve.program.metrics import Metrics
from kbsolve.program.problem import Problem
from kbsolve.solver.search import NODE_BUDGET, Search


@dataclass
class Outcome:
    """What a solve found: its status, assignment, metrics, core and the search used."""
    status: str  # optimal | feasible | infeasible | unknown
    chosen: dict[str, Any] = field(default_factory=dict)
    metrics: Metrics | None = None
    core: list[str] = field(default_factory=list)
    model: Any = None  # solver/prove.Model: the Z3 encoding, where Z3 was asked
    search: Search | None = None  # the tables, for explanations without Z3
    nodes: int = 0
    timed_out: bool = False  # the wall-clock guard, not the counted budgets, ended it


def solve(problem: Problem, until: float = math.inf, avoid: list | None = None,
          node_budget: int = NODE_BUDGET) -> Outcome:
    """The exact optimum: branch and bound first, Z3 when its budget runs out;
    `until`: the --timeout guard's deadline (solver/guard.py), inf when none."""
    start = None
    nodes = 0
    if avoid is None and node_budget > 0:
        search = Search(problem)
        found = search.run(budget=node_budget, deadline=until)
        nodes = found.nodes
        if found.status == "timeout":
            return Outcome("feasible" if found.chosen else "unknown", found.chosen or {},
                           found.metrics, search=search, nodes=nodes, timed_out=True)
        if found.status == "optimal":
            return Outcome("optimal", found.chosen, found.metrics, search=search, nodes=nodes)
        if found.status == "infeasible":
            search.offer_setup()  # for the refusal's copies (plan/run.py)
            from kbsolve.solver.prove import Model, minimal_core
            model = Model(problem)
            return Outcome("infeasible", core=minimal_core(model), model=model,
                           nodes=nodes)
        start = found.chosen
    from kbsolve.solver.prove import solve_z3
    outcome = solve_z3(problem, until, avoid, start)
    outcome.nodes = nodes
    return outcome
