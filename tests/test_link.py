"""The linked expressions (program/link.py) against the tree walk they replace:
every range the search reads from an expression, on real queries of three
frameworks, is the walk's to the bit (value and type), and the search's tree
is the one the walk gives (the same node count)."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program import link as link_module
from kbsolve.program import tables
from kbsolve.program.link import link
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search

QUERIES = [
    # LlamaFactory's widest search of bench.warm in the reads-first order (~870 nodes;
    # 8xA100 qwen3-8b now takes ~340, too few reads to cover the linked levels)
    ({"gpus": "1x4090", "model": "qwen2.5-7b"}, 50_000),
    pytest.param({"gpus": "8xH100", "model": "llama3-8b", "framework": "pytorch"}, 3_000,
                 marks=pytest.mark.ci),  # ~4.7 s; the two other queries stay by default
    ({"gpus": "8x8xA100", "model": "flux1-dev", "framework": "torchtitan"}, 3_000),
]


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(type(x) is type(y) and (x == y or x != x and y != y) for x, y in zip(a, b))


@pytest.mark.parametrize("fields,budget", QUERIES, ids=lambda f: str(f))
def test_linked_ranges_are_the_walks(kb, monkeypatch, fields, budget):
    linked = tables.Expr._range
    seen = {"calls": 0, "linked": 0, "differ": []}

    def check(expr, j, k, idx, found):
        walked = expr._walked(j, k, idx)
        seen["calls"] += 1
        if not _same(found, walked):
            seen["differ"].append((expr.op, j, k, found, walked))

    def checked(self, j, k, idx):
        found = linked(self, j, k, idx)
        check(self, j, k, idx, found)
        return found

    real_link = link_module.link

    def checked_link(expr, k):  # a memo miss calls its linked level directly
        fn, j = real_link(expr, k), bisect.bisect_left(expr._places, k)

        def run(k, idx):
            found = fn(k, idx)
            seen["linked"] += 1
            check(expr, j, k, idx, found)
            return found
        return run

    problem = resolve(kb, Query(**fields)).problem
    monkeypatch.setattr(tables.Expr, "_range", checked)
    monkeypatch.setattr(link_module, "link", checked_link)
    with_check = Search(problem).run(budget=budget)
    monkeypatch.undo()
    plain = Search(problem).run(budget=budget)
    assert seen["calls"] > 100 and seen["linked"] > 100
    assert seen["differ"] == []
    assert (with_check.status, with_check.nodes, with_check.chosen) == \
        (plain.status, plain.nodes, plain.chosen)


def test_walk_and_link_agree_on_unknown_and_settled_cells():
    """An `if` whose test reads an unset enum takes both branches, both ways;
    a sum whose tables are all settled is one constant."""
    code = tables.Table((0,), (2,), np.array([0, 1]), "code", False)
    num = tables.Table((1,), (3,), np.array([1.0, 2.0, 4.0]), "num", False)
    two = tables.Table((), (), np.array(2.0), "num", False)
    test = tables.Expr("==", [code, tables.Table((), (), np.array(1), "code",
                                                 False)], "bool", True)
    root = tables.Expr("if", [test, tables.Expr("sum", [num, two], "num", False), num],
                       "num", False)
    cells = {}
    root.tables(cells)
    for cell in [root, *cells.values()]:
        cell.prepare([0, 1], [np.ones(2, bool), np.ones(3, bool)])
    for k in range(3):
        for idx in ([0, 0], [1, 2], [1, 0]):
            j = bisect.bisect_left(root._places, k)
            walked = root._walked(j, k, idx)
            assert _same(link(root, k)(k, idx), walked), (k, idx)
            assert _same(root._range(j, k, idx), walked), (k, idx)
    assert link(root, 2)(2, [1, 2]) == (6.0, 6.0)
    assert link(root, 2)(2, [0, 2]) == (4.0, 4.0)
    assert link(root, 0)(0, [0, 0]) == (1.0, 6.0)  # the test unknown: both branches


def test_hoisted_parts_are_kept_per_prefix_and_read_back_exactly():
    """At the level where all three options are set, the parts that do not read
    the last one (place 2) are found once per value of places 0 and 1 and kept;
    the search's pattern (place 2 set to each value in turn, then another
    prefix, then the first one again) reads the walk's ranges every time."""
    a = tables.Table((0,), (3,), np.array([1.0, 2.0, 4.0]), "num", False)
    b = tables.Table((1,), (2,), np.array([0.5, 8.0]), "num", False)
    ab = tables.Table((0, 1), (3, 2), np.array([[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]]), "num",
                      False)
    c = tables.Table((2,), (4,), np.array([1.0, -2.0, 0.25, 3.0]), "num", False)
    root = tables.Expr("*", [tables.Expr("sum", [a, ab, c], "num", False),
                             tables.Expr("sum", [b, a], "num", False)], "num", False)
    cells = {}
    root.tables(cells)
    for cell in [root, *cells.values()]:
        cell.prepare([0, 1, 2], [np.ones(3, bool), np.ones(2, bool), np.ones(4, bool)])
    from kbsolve.program import link as link_module
    writer = link_module._Writer(3, root, hoist=True)
    writer.emit(root, 2)
    assert writer.last == 2 and writer.prefix == (0, 1)
    assert writer.hoisted_reads >= link_module.HOIST_MIN and writer.exported
    fn = link(root, 3)
    j = bisect.bisect_left(root._places, 3)
    for prefix in ([0, 0], [2, 1], [0, 0], [1, 1]):
        for last in range(4):
            idx = prefix + [last]
            assert _same(fn(3, idx), root._walked(j, 3, idx)), idx


def test_a_level_with_too_little_to_hoist_is_linked_plainly(monkeypatch):
    """Its hoisted code runs first on every call: written once, nothing kept."""
    a = tables.Table((0,), (2,), np.array([1.0, 2.0]), "num", False)
    c = tables.Table((1,), (2,), np.array([3.0, 5.0]), "num", False)
    root = tables.Expr("*", [a, c], "num", False)
    cells = {}
    root.tables(cells)
    for cell in [root, *cells.values()]:
        cell.prepare([0, 1], [np.ones(2, bool), np.ones(2, bool)])
    writer = link_module._Writer(2, root, hoist=True)
    writer.emit(root, 2)
    assert writer.hoisted_reads < link_module.HOIST_MIN  # one table read: not worth a store
    assert writer.pre and writer.exported
    writers = []

    class Counted(link_module._Writer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            writers.append(self)
    monkeypatch.setattr(link_module, "_Writer", Counted)
    fn = link(root, 2)
    assert len(writers) == 1 and not writers[0].exported and not writers[0].pre
    assert "_kept" not in fn.__globals__
    for idx in ([0, 0], [0, 1], [1, 0], [1, 1]):
        assert _same(fn(2, idx), root._walked(2, 2, idx))
