"""The optimisation's own order (solver/search.py READS_FIRST) and the tables'
kept layouts (program/tables.py Table._reuse, Expr.prepare): the order changes
the tree, never the optimum, and the searches after it run in the problem's
order; a layout taken back reads the ranges a fresh one gives."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.program.tables import Expr, Table
from kbsolve.solver import search as search_module
from kbsolve.solver.search import Search

PYTORCH = {"gpus": "1x4090", "model": "qwen3-8b", "framework": "pytorch"}
LLAMAFACTORY = {"gpus": "8xA100", "model": "qwen3-8b"}


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _problem(kb, fields):
    return resolve(kb, Query(**fields)).problem


def test_reads_first_finds_the_problem_orders_optimum_and_gives_its_order_back(kb, monkeypatch):
    problem = _problem(kb, PYTORCH)
    search = Search(problem)
    assert search._expression_share() >= search_module.READS_FIRST  # it takes its own order
    search.prepare()
    own = search.axes
    assert search._plan_order(search.allowed, by_reads=True) != own
    found = search.run()
    assert search.axes == own  # the explanations' searches run in the problem's order
    monkeypatch.setattr(search_module, "READS_FIRST", 2.0)  # never: the problem's order
    plain = Search(problem).run()
    assert found.status == plain.status == "optimal"
    assert found.chosen == plain.chosen
    assert found.metrics == plain.metrics


def test_llamafactory_keeps_the_problems_order(kb):
    search = Search(_problem(kb, LLAMAFACTORY))
    assert search._expression_share() < search_module.READS_FIRST
    search.prepare()
    own = search.axes
    search.run()
    assert search.axes == own


def _ranges(search, idx):
    """What the search reads at every level: its tracked cells and its rules (the
    roots; `search.cells` also lists their parts, deduplicated by identity, and a
    second Search on the same KB shares other tables as objects, so that list's
    length and order are not comparable across searches)."""
    n = len(search.order)
    roots = search.tracked + [cell for _, cell in search.rules]
    return [[cell.bound(k, idx) for k in range(n + 1)] for cell in roots]


def test_a_layout_taken_back_reads_what_a_fresh_one_reads(kb):
    problem = _problem(kb, PYTORCH)
    search = Search(problem)
    search.prepare()
    own = search.axes
    idx = [d[len(d) // 2] for d in search.base_domains]
    first = _ranges(search, idx)
    tables = [c for c in search.cells if isinstance(c, Table)]
    levels = [t._levels for t in tables]
    search.prepare(list(reversed(own)))  # another order, then the first one back
    _ranges(search, [d[0] for d in search.base_domains])
    search.prepare(own)
    assert all(t._levels is kept for t, kept in zip(tables, levels))  # nothing rebuilt
    again = _ranges(search, idx)
    fresh = Search(problem)
    fresh.prepare(own)
    assert again == first == _ranges(fresh, idx)
    assert any(isinstance(c, Expr) for c in search.cells)
