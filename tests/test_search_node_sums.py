"""A child's sums in Tracker.update_sums: the node's total plus the change of
its terms at place k, added up afresh where the change is not finite or the
node's total is infinite; a nan total goes on as a nan, as before. Compared
with the math.isinf form on edge values, also as numpy scalars (which warn on
inf - inf: the check must not, a user would see it), and the memory check
(_State._fits) with the budgets' caps."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from kbsolve.solver.search import (TOLERANCE, Search, Tracker, _indexer, _State,
                                   _weighted_low)

EDGES = [0.0, -0.0, 1.0, -2.5, 1e300, math.inf, -math.inf, math.nan]


def _tracker(terms: list) -> Tracker:
    tracker = Tracker.__new__(Tracker)  # the sums alone: no cell is read at place 0
    tracker.sums = [terms]
    tracker.terms_at = [[[(i, n, w, 0 if w > 0 else 1) for n, (w, i) in enumerate(terms)]]]
    return tracker


def _expected(ranges, before, terms, total) -> float:
    delta = 0.0
    for n, (w, i) in enumerate(terms):
        side = 0 if w > 0 else 1
        delta += w * (ranges[i][side] - before[n][side])
    if delta != delta or math.isinf(total) or math.isinf(delta):
        return _weighted_low(ranges, terms)
    return total + delta if delta else total


def _same(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def test_a_childs_sum_is_the_isinf_forms_on_edge_values():
    terms = [(2.0, 0), (-1.0, 1)]
    group = ([], [], [], _indexer(()))  # no table, no expression
    afresh = 0
    for low, high, total in itertools.product(EDGES, EDGES[:6], EDGES):
        ranges = [(low, low), (high, high)]
        before = ((1.0, 1.0), (0.5, 0.5))
        totals = [None]
        _tracker(terms).update_sums(ranges, totals, 0, [0], (before, [total], [[]], [group], 0))
        expected = _expected(ranges, before, terms, total)
        assert _same(totals[0], expected), (low, high, total)
        afresh += expected == _weighted_low(ranges, terms) and not math.isfinite(total)
    assert afresh > 10


def test_numpy_scalars_give_the_same_sums_and_no_warning():
    terms = [(2.0, 0), (-1.0, 1)]
    group = ([], [], [], _indexer(()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for low, total in itertools.product(EDGES, EDGES):
            ranges = [(np.float64(low),) * 2, (np.float64(0.5),) * 2]
            before = ((1.0, 1.0), (0.5, 0.5))
            totals = [None]
            _tracker(terms).update_sums(ranges, totals, 0, [0],
                                        (before, [np.float64(total)], [[]], [group], 0))
            assert _same(totals[0], _expected(ranges, before, terms, total)), (low, total)


def test_a_child_fits_as_the_budgets_say():
    search = Search.__new__(Search)
    state = _State.__new__(_State)
    state.s = search
    for host in (False, True):
        search.budget, search.host_budget = 100.0, 50.0
        search.host_terms = [(1.0, 1)] if host else []
        state.memory_cap = search.budget * (1 + TOLERANCE)
        state.host_cap = search.host_budget * (1 + TOLERANCE) if host else None
        for memory, ram in itertools.product([99.0, 100.0, 100.0 + 1e-8, 101.0, math.nan],
                                             [49.0, 50.0 + 1e-9, 51.0, math.nan]):
            state.totals = [memory, ram]
            fits = not memory > 100.0 * (1 + TOLERANCE) and \
                (not host or ram <= 50.0 * (1 + TOLERANCE))
            assert state._fits() == fits
