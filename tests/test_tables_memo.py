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
