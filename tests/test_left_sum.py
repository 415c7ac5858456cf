"""Float ranges are added by program/operators.left_sum (Python 3.11's sum(): from 0,
left to right), never by the interpreter's sum(): Python 3.12's sum() compensates runs
of plain floats, and a plan's bounds, so its search and its printed explanations, must
not depend on the Python it runs on. Checked here by a stand-in sum() that adds floats
as 3.12 does (Neumaier) or refuses them."""

from __future__ import annotations

import builtins
import functools
import math
import operator

import pytest

from kbsolve import api
from kbsolve.program.operators import OPERATORS, interval, left_sum
from kbsolve.program.query import Query, resolve
from kbsolve.solver import search as search_module
from kbsolve.solver.search import Search

SPREAD = [1e16, 1.0, -1e16, 3.0]  # 3.11's sum(): 3.0; compensated: 4.0
REAL_SUM = builtins.sum


def _fold(values):
    return functools.reduce(operator.add, values, 0)


def _compensated(values, start=0):
    values = list(values)
    if values and all(type(v) is float for v in values) and type(start) is int:
        return math.fsum(values) + start
    return REAL_SUM(values, start)


def test_the_stand_in_differs_where_it_should():
    assert _fold(SPREAD) == 3.0 and _compensated(SPREAD) == 4.0


def test_the_sum_operator_adds_left_to_right(monkeypatch):
    monkeypatch.setattr(builtins, "sum", _compensated)
    assert left_sum(SPREAD) == 3.0
    assert OPERATORS["sum"].scalar(*SPREAD) == 3.0
    ranges = [(v, v + 1.0) for v in SPREAD]
    assert interval("sum", ranges, True) == (3.0, _fold(v + 1.0 for v in SPREAD))


def test_the_searchs_weighted_sums_add_left_to_right(monkeypatch):
    monkeypatch.setattr(builtins, "sum", _compensated)
    ranges = [(v, v) for v in SPREAD]
    assert search_module._weighted_low(ranges, [(1, i) for i in range(4)]) == 3.0


def _no_float_sums(values, start=0):
    values = list(values)
    assert not any(isinstance(v, float) for v in values), values
    return REAL_SUM(values, start)


def test_a_search_adds_no_floats_with_sum(monkeypatch):
    """A real search (its tables, expressions, linked code after LINK_AFTER reads, sums)
    with a sum() that refuses floats: the same plan and node count as without it."""
    kb = api.load_kb()
    problem = resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem
    expected = Search(problem).run(budget=3_000)
    problem = resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem
    search = Search(problem)
    monkeypatch.setattr(builtins, "sum", _no_float_sums)
    found = search.run(budget=3_000)
    monkeypatch.setattr(builtins, "sum", REAL_SUM)
    assert (found.status, found.chosen, found.nodes) == \
        (expected.status, expected.chosen, expected.nodes)
