"""The sides a search reads each table on (solver/search.py `Search._mark_needs`): an
expression met again is not walked again, and every table's side is the one the walk
of every path finds (the definition, kept here)."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.program.tables import Table
from kbsolve.solver.feasible import FeasibilitySearch
from kbsolve.solver.search import Search


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _sides_of_every_path(search) -> dict[int, set]:
    """Each table's sides, every path from every root walked."""
    needs: dict[int, set] = {}

    def mark(cell, side):
        if isinstance(cell, Table):
            needs.setdefault(id(cell), set()).add(side)
        else:
            for arg in cell.args:
                mark(arg, "both")

    for _, cell in search.rules:
        mark(cell, "high")
    for terms in (search.memory_terms, search.host_terms):
        for weight, i in terms:
            mark(search.tracked[i], "low" if weight > 0 else "high")
    for i in search.time_parts + search.time_factors:
        mark(search.tracked[i], "both")
    for i in search.tier_slots:
        mark(search.tracked[i], "high")
    return needs


@pytest.mark.parametrize("cls, gpus, model", [(Search, "8xH100", "llama3-70b"),
                                              (FeasibilitySearch, "2x4090", "qwen3-32b")])
def test_every_table_reads_the_sides_of_every_path(kb, cls, gpus, model):
    search = cls(resolve(kb, Query(gpus=gpus, model=model)).problem)
    needs = _sides_of_every_path(search)
    tables = {id(c): c for c in search.cells if isinstance(c, Table)}
    assert set(needs) == set(tables)
    for key, sides in needs.items():
        assert tables[key].need == ("both" if len(sides) > 1 else next(iter(sides)))
    parents: dict[int, int] = {}  # expressions read by more than one: walked once now
    for cell in search.cells:
        if not isinstance(cell, Table):
            for arg in cell.args:
                if not isinstance(arg, Table):
                    parents[id(arg)] = parents.get(id(arg), 0) + 1
    assert max(parents.values()) > 1


def test_a_table_met_again_on_another_side_reads_both():
    import types

    import numpy as np

    from kbsolve.program.tables import Expr

    def table():
        return Table((0,), (2,), np.array([1.0, 2.0]), "num", False)

    ruled, summed, inner = table(), table(), table()
    shared = Expr("+", [inner, table()], "num", False)  # read by two expressions
    stub = types.SimpleNamespace(
        rules=[("rule:r", ruled)], tracked=[ruled, summed, Expr("*", [shared, summed], "num",
                                                                False), shared],
        memory_terms=[(1.0, 0), (1.0, 1)], host_terms=[], time_parts=[2], time_factors=[],
        tier_slots=[3])
    Search._mark_needs(stub)
    assert (ruled.need, summed.need, inner.need) == ("both", "both", "both")
    alone = table()
    stub.rules, stub.tracked, stub.memory_terms = [], [alone], [(-1.0, 0)]
    stub.time_parts, stub.tier_slots = [], []
    Search._mark_needs(stub)
    assert alone.need == "high"
