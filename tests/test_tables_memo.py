"""An expression's memo is keyed by the values of its set places alone (no
level number in the key, twelfth round): (), one value, or a tuple of j values,
so the keys of two levels are never equal, and every remembered read is the
walk's range for its own level."""

from __future__ import annotations

import bisect
import itertools
import random

from kbsolve import api
from kbsolve.program import tables as T
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search


def _prepared(fields):
    search = Search(resolve(api.load_kb(), Query(**fields)).problem)
    assert search.prepare()
    return search


def test_no_two_levels_of_a_memo_share_a_key():
    search = _prepared({"gpus": "8xA100", "model": "qwen3-8b"})
    sizes = [len(d) for d in search.base_domains]
    exprs = [c for c in search.cells if isinstance(c, T.Expr) and len(c._places) >= 2]
    assert exprs
    rng = random.Random(3)
    for expr in exprs:
        keys = {}
        for _ in range(20):
            idx = [rng.randrange(size) for size in sizes]
            for j, getter in enumerate(expr._keys):
                keys.setdefault(getter(idx), set()).add(j)
        assert all(len(levels) == 1 for levels in keys.values())


def test_remembered_reads_are_each_levels_own_range():
    search = _prepared({"gpus": "1x4090", "model": "qwen3-0.6b"})
    domains = search.base_domains
    exprs = [c for c in search.cells if isinstance(c, T.Expr) and c._memo is not None]
    assert exprs
    rng = random.Random(5)
    n = len(domains)
    for _ in range(6):
        idx = [rng.choice(d) for d in domains]
        for k, expr in itertools.product(range(n + 1), exprs):
            j = bisect.bisect_left(expr._places, k)
            found = expr.bound(k, idx)  # through the memo, shared by every level
            assert found == expr._walked(j, k, idx), (k, idx)
        assert any(expr._hits for expr in exprs)


def test_an_order_that_moves_only_other_options_shares_the_memo():
    """Options 0-2 read, option 3 not: moving option 3 to the front shifts their
    places but keeps their order, so the memo filled before serves (the same
    object) and every read from it is the walk's range in the new order; an order
    that swaps two options it reads starts a memo of its own."""
    import numpy as np
    a = T.Table((0, 1), (2, 3), np.array([[1.0, 2.0, 4.0], [0.5, 3.0, 9.0]]), "num", False)
    b = T.Table((2,), (2,), np.array([2.0, -1.0]), "num", False)
    root = T.Expr("*", [T.Expr("sum", [a, b], "num", False), b], "num", False)
    cells = {}
    root.tables(cells)
    masks = [np.ones(2, bool), np.array([True, False, True]), np.ones(2, bool),
             np.ones(3, bool)]

    def prepared(axes):
        position = [0] * len(axes)
        for place, axis in enumerate(axes):
            position[axis] = place
        in_order = [masks[axis] for axis in axes]
        for cell in [root, *cells.values()]:
            cell.prepare(position, in_order)
        return position

    def reads(position):
        found = []
        for values in itertools.product(range(2), (0, 2), range(2), range(3)):
            idx = [0] * 4
            for axis, value in enumerate(values):
                idx[position[axis]] = value
            for k in range(5):
                found.append((root.bound(k, idx), root._walked(
                    bisect.bisect_left(root._places, k), k, idx)))
        return found

    first = prepared([0, 1, 2, 3])
    assert all(got == walked for got, walked in reads(first))
    memo = root._memo
    assert memo
    shifted = prepared([3, 0, 1, 2])
    assert root._memo is memo and root._places == (1, 2, 3)
    assert all(got == walked for got, walked in reads(shifted))
    swapped = prepared([1, 0, 2, 3])
    assert root._memo is not memo
    assert all(got == walked for got, walked in reads(swapped))
