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


def test_reads_first_is_the_problems_order_and_finds_the_same_optimum(kb, monkeypatch):
    problem = _problem(kb, PYTORCH)
    search = Search(problem)
    assert search._expression_share() >= search_module.READS_FIRST
    search.prepare()
    own = search.axes
    assert own == search._plan_order(search.allowed, by_reads=True)
    found = search.run()
    assert search.axes == own
    monkeypatch.setattr(search_module, "READS_FIRST", 2.0)  # never: the lifts' order
    lifts = Search(problem)
    lifts.prepare()
    assert lifts.axes != own
    plain = lifts.run()
    assert found.status == plain.status == "optimal"
    assert found.chosen == plain.chosen
    assert found.metrics == plain.metrics


def test_llamafactory_reads_first_and_diffusion_keeps_the_lifts_order(kb):
    llm = Search(_problem(kb, LLAMAFACTORY))
    assert llm._expression_share() >= search_module.READS_FIRST
    video = Search(_problem(kb, {"gpus": "8xA100", "model": "wan14b"}))
    assert video._expression_share() < search_module.READS_FIRST
    video.prepare()
    assert video.axes == video._plan_order(video.allowed)


def test_a_learned_order_is_given_back_to_the_searches_after_it(kb, monkeypatch):
    problem = _problem(kb, LLAMAFACTORY)
    search = Search(problem)
    search.prepare()
    own = search.axes
    reference = Search(problem).run()  # in one round
    monkeypatch.setattr(search_module, "ROUNDS", (40, 40_000, 150_000))  # the first spends its share
    orders = []
    learned = Search._learned_order

    def recorded(self, state):
        orders.append(learned(self, state))
        return orders[-1]
    monkeypatch.setattr(Search, "_learned_order", recorded)
    found = search.run()
    assert orders and orders[0] != own  # the second round ran in a learned order
    assert search.axes == own  # and the explanations' searches get the problem's back
    assert found.status == reference.status == "optimal"
    assert found.chosen == reference.chosen and found.metrics == reference.metrics


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
