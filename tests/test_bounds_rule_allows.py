"""ValueBounds.rule_allows (solver/bounds.py) answers a table rule's value that arc
consistency kept from the allowed domains: the answer the rule's table gives over all
of its other options' values, for every value (kept or taken out)."""

from __future__ import annotations

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.program.tables import Table
from kbsolve.solver import bounds as bounds_module
from kbsolve.solver.bounds import ValueBounds
from kbsolve.solver.search import Search


@pytest.fixture(scope="module")
def search():
    kb = api.load_kb()
    found = Search(resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem)
    assert found.prepare()
    return found


def test_a_kept_value_is_allowed_as_its_table_allows_it(search, monkeypatch):
    tabled = []
    real = bounds_module._truth

    def counted(cell, sizes):
        tabled.append(cell)
        return real(cell, sizes)
    monkeypatch.setattr(bounds_module, "_truth", counted)
    bounds = ValueBounds(search)
    answers, kept_asked = set(), 0
    for name, cell in search.rules:
        if not isinstance(cell, Table) or cell.kind != "bool" or not cell.deps:
            continue
        truth = np.asarray(cell.array, dtype=bool)
        for i, axis in enumerate(cell.deps):
            key = search.keys[axis]
            others = [search.keys[a] for a in cell.deps if a != axis]
            rest = tuple(j for j in range(len(cell.deps)) if j != i)
            support = truth.any(axis=rest) if rest else truth
            for index, value in enumerate(search.p.choices[key]):
                found = bounds.rule_allows(name, key, value, others)
                assert found == bool(support[index]), (name, key, value)
                answers.add(found)
                kept_asked += bool(search.allowed[axis][index])
    assert answers == {True, False}  # some value no table row supports
    assert kept_asked
    assert len(tabled) < len({id(c) for _, c in search.rules if isinstance(c, Table)})
