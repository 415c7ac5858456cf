"""A search's ranges before any place is set (solver/search.py `Tracker.start`,
seventeenth round): a level over no set option holds numpy floats, whose scalar
arithmetic costs about twice a Python float's in time_low; the start makes the
finite ones Python floats of the same values, except in the summed cells (sum()
may add floats and numpy floats apart) and for inf and nan (numpy's warnings
with them kept). The same values, so the same search: node counts, pruning and
incumbents equal the numpy start's on a real query."""

from __future__ import annotations

import math

import numpy as np
import pytest
from plans import prepared_search

from kbsolve.solver import search as search_module
from kbsolve.solver.search import _plain_range

EDGES = [0.0, -0.0, 1.5, -2.5, 1e300, 5e-324, math.inf, -math.inf, math.nan]


def _same_bits(a, b) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def test_a_ranges_finite_numpy_floats_become_the_same_python_floats():
    for low in EDGES:
        for high in EDGES:
            bounds = (np.float64(low), np.float64(high))
            plain = _plain_range(bounds)
            for given, made in zip(bounds, plain):
                assert _same_bits(given, made)
                assert type(made) is (float if math.isfinite(given) else np.float64)
                if not math.isfinite(given):
                    assert made is given
    for kept in [(1.0, 2.0), (0, 3), (None, None), (np.float32(1.0), np.int64(2))]:
        assert _plain_range(kept) is kept


@pytest.fixture(scope="module")
def search():
    return prepared_search()


def test_the_start_holds_the_bounds_values_as_python_floats_but_in_the_sums(search):
    tracker = search.tracker
    tracker._started = None  # read afresh
    idx = [0] * len(search.order)
    ranges, totals = tracker.start(idx)
    read = [c.bound(0, idx) for c in tracker.cells]
    made = 0
    for i, (given, got) in enumerate(zip(read, ranges)):
        assert all(_same_bits(a, b) for a, b in zip(given, got))
        if i in tracker.summed:
            assert [type(a) for a in got] == [type(a) for a in given]
            continue
        for value in got:
            assert not (type(value) is np.float64 and math.isfinite(value))
        made += any(type(a) is np.float64 for a in given)
    assert made  # the query's start had numpy floats outside the sums
    assert totals == [tracker._total(read, t) for t in range(len(totals))]


def _searched(search, budget: int) -> tuple:
    search.tracker._started = None
    found, state = search._round(None, None, budget, False, math.inf)
    return (found.status, found.chosen, found.nodes, state.tried, state.pruned,
            state.best_float, state.best_key)


def test_a_search_from_the_plain_start_is_the_numpy_starts(search, monkeypatch):
    plain = _searched(search, 700)
    monkeypatch.setattr(search_module, "_plain_range", lambda bounds: bounds)
    assert _searched(search, 700) == plain
    assert plain[2] > 100 and plain[1] is not None
