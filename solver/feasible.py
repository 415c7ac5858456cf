"""Whether any plan fits: the branch and bound without the objective's tables.

A feasibility question (a hardware fix's candidate shape, a global batch fix)
asks whether some assignment meets every rule, `when` and budget; which plan
the search meets first does not matter, only whether there is one. Its search
reads the rules and the memory sums alone (a first-plan search orders its
children by their memory bound, never by time or preferences), so the time
and preference tables, about a quarter of a Search's tables (issue 25 item 8),
are not built: time is the constant 0 and there are no preference tiers. The
search order puts the open options the most memory terms read first, then
follows the memory tables' spreads, and the options with one value left come
last; an order changes how many nodes the search takes,
never whether a plan exists, and every plan it finds is confirmed by the exact
evaluator (program/metrics.measure), as any.
"""

from __future__ import annotations

from kbsolve.solver.search import Search


class FeasibilitySearch(Search):
    """A Search for `run(first=True)` only: its objective bound reads no time or
    preference (View and the optimisation would compare plans on nothing)."""

    def _time(self):
        return self.tables.constant(0, False)

    def _preferences(self) -> list:
        return []

    def _plan_order(self, allowed: list, by_reads: bool = False) -> list[int]:
        """The open options the most memory terms read first (the optimisation's
        order, `by_reads`), then the options with one value left: a candidate that
        fits nothing is refuted nearer the root. Over the 26 refusals of bench.warm's
        grids the hardware candidates took 6,161 nodes in the reads order against
        10,041 in the memory spreads' alone. The optimisation sets its single values
        first; here each was a node on the way to the first open option (16 of an
        infeasible shape's 27), and a node re-reads the cells at its place. The
        order changes the node count, never whether a plan exists."""
        order = super()._plan_order(allowed, by_reads=True)
        return sorted(order, key=lambda a: allowed[a].sum() <= 1)  # stable: open ones first
