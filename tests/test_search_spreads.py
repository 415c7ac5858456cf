"""The search order's spreads read off the allowed values alone (solver/search.py
`_allowed_spread`): each the spread Table.spread finds over the whole table with the
left-out values hidden, on real searches' tables and on hand-made edge cases."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from plans import prepared_search

from kbsolve.program.tables import Table
from kbsolve.solver.search import _allowed_spread


def _same(found: dict, expected: dict) -> bool:
    return found.keys() == expected.keys() and all(
        found[a] == expected[a] or math.isnan(found[a]) and math.isnan(expected[a])
        for a in found)


def _check(table: Table, allowed: list) -> None:
    counts = [int(mask.sum()) for mask in allowed]
    firsts = [int(mask.argmax()) for mask in allowed]
    assert _same(_allowed_spread(table, allowed, counts, firsts), table.spread(allowed))


@pytest.mark.parametrize("gpus,model", [("8xA100", "qwen3-8b"), ("8xH100", "flux1-dev")])
def test_every_table_of_a_search_spreads_as_over_the_whole_table(gpus, model):
    search = prepared_search(gpus, model)
    tables = [c for c in search.cells if isinstance(c, Table) and c.kind == "num"]
    assert any(len(t.deps) > 2 for t in tables)
    rng = random.Random(3)
    narrower = [mask & np.array([rng.random() < 0.6 for _ in mask]) for mask in search.allowed]
    wider = [np.ones(len(mask), dtype=bool) for mask in search.allowed]
    for allowed in (search.allowed, narrower, wider):
        assert any(not mask.all() and mask.sum() > 1 for mask in allowed) or allowed is wider
        for table in tables:
            _check(table, allowed)


def test_edge_values_spread_as_over_the_whole_table():
    rng = random.Random(11)
    for trial in range(300):
        sizes = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 4)))
        deps = tuple(sorted(rng.sample(range(5), len(sizes))))
        array = np.array([rng.choice([0.0, -0.0, 1.5, -2.0, 7.0, math.inf, -math.inf, math.nan])
                          for _ in range(math.prod(sizes))]).reshape(sizes)
        allowed = [np.array([rng.random() < 0.7 for _ in range(4)]) for _ in range(5)]
        for axis, size in zip(deps, sizes):
            allowed[axis] = allowed[axis][:size]
        _check(Table(deps, sizes, array, "num", False), allowed)


def test_a_table_with_a_value_left_nowhere_has_no_spread():
    table = Table((0, 1), (2, 3), np.arange(6.0).reshape(2, 3), "num", False)
    _check(table, [np.array([True, False]), np.array([False, False, False])])
    assert _allowed_spread(table, [np.array([True, True]), np.zeros(3, dtype=bool)],
                           [2, 0], [0, 0]) == {}
    _check(table, [np.array([False, True]), np.array([True, False, True])])


def _lifts_over_whole_tables(search, allowed: list) -> list[float]:
    """Search._lifts as it read before: Table.spread and np.nanmin over whole tables."""
    score = [0.0] * len(search.keys)
    for cell in search.cells:
        if isinstance(cell, Table) and cell.kind == "num":
            lifts = cell.spread(allowed)
            if lifts:
                scale = max(abs(float(np.nanmin(cell.floats()))), 1e-30)
            for axis, lift in lifts.items():
                score[axis] = max(score[axis], lift / scale)
    for cell in search.memory:
        if isinstance(cell, Table):
            for axis, lift in cell.spread(allowed).items():
                score[axis] += lift / max(search.budget, 1.0)
    return score


@pytest.mark.parametrize("gpus,model", [("1xA100", "qwen3-8b"), ("8xA100", "wan14b")])
def test_the_search_orders_lifts_are_those_over_whole_tables(gpus, model):
    search = prepared_search(gpus, model)
    assert search._lifts(search.allowed) == _lifts_over_whole_tables(search, search.allowed)
    assert any(search._lifts(search.allowed))
