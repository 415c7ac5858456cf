"""An expression's reads before its level is linked (Expr._stepped): a memo
miss steps straight into them (Expr._fill), each equal to the walk
(Expr._walked), and an `if` finds a branch's reader only when its test picks
that branch, so a branch never picked builds no table level."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program import tables as T
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(type(x) is type(y) and (x == y or x != x and y != y) for x, y in zip(a, b))


def _if_over_tables():
    test = T.Table((0,), (2,), np.array([False, True]), "bool", True)
    then = T.Table((1,), (3,), np.array([1.0, 2.0, 4.0]), "num", False)
    other = T.Table((1,), (3,), np.array([8.0, 16.0, 32.0]), "num", False)
    root = T.Expr("if", [test, then, other], "num", False)
    for cell in (test, then, other, root):
        cell.prepare([0, 1], [np.ones(2, bool), np.ones(3, bool)])
    return root, test, then, other


def test_a_branch_its_test_never_picks_builds_no_level():
    root, _, then, other = _if_over_tables()
    for value in range(3):
        assert root.bound(2, [1, value]) == ((1.0, 2.0, 4.0)[value],) * 2
    assert any(level is not None for level in then._levels)
    assert all(level is None for level in other._levels)
    assert root.bound(2, [0, 2]) == (32.0, 32.0)
    assert any(level is not None for level in other._levels)


def test_an_undecided_test_reads_both_branches():
    root, *_ = _if_over_tables()
    assert root.bound(1, [1, 0]) == (1.0, 4.0)  # the test's option set, not the branches'
    assert root.bound(1, [0, 0]) == (8.0, 32.0)
    assert root.bound(0, [0, 0]) == (1.0, 32.0)
    j = bisect.bisect_left(root._places, 0)
    assert _same(root.bound(0, [0, 0]), root._walked(j, 0, [0, 0]))


def test_a_miss_steps_until_the_level_is_linked(monkeypatch):
    root, *_ = _if_over_tables()
    linked = []
    monkeypatch.setattr(T.Expr, "_range", lambda *a: linked.append(a) or (0.0, 0.0))
    for n in range(T.LINK_AFTER):
        root._memo.clear()
        assert root.bound(2, [1, n % 3]) == ((1.0, 2.0, 4.0)[n % 3],) * 2
    assert linked == [] and root._linked[-1] == T.LINK_AFTER
    root._memo.clear()
    root.bound(2, [1, 0])  # the next miss links (through _range)
    assert len(linked) == 1


@pytest.mark.parametrize("fields", [{"gpus": "8xA100", "model": "qwen3-8b"},
                                    {"gpus": "1xH100", "model": "llama3-8b"}],
                         ids=lambda f: f"{f['gpus']} {f['model']}")
def test_stepped_reads_are_the_walks(monkeypatch, fields):
    stepped = T.Expr._stepped
    seen = {"calls": 0, "differ": []}

    def checked(self, j, k, idx):
        found = stepped(self, j, k, idx)
        seen["calls"] += 1
        walked = self._walked(j, k, idx)
        if not _same(found, walked):
            seen["differ"].append((self.op, j, k, found, walked))
        return found

    problem = resolve(api.load_kb(), Query(**fields)).problem
    monkeypatch.setattr(T.Expr, "_stepped", checked)
    with_check = Search(problem).run(budget=300)
    monkeypatch.undo()
    plain = Search(problem).run(budget=300)
    assert seen["calls"] > 100
    assert seen["differ"] == []
    assert (with_check.status, with_check.nodes, with_check.chosen) == \
        (plain.status, plain.nodes, plain.chosen)
