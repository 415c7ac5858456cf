"""A child's sort key (solver/search.py `_sortable`): its bound with each nan
read as -inf, then its value; the bound itself where it holds no nan. The
keys, and so the children's order, are the rebuilt tuple's."""

from __future__ import annotations

import math
import random

from kbsolve.solver.search import _sortable


def _rebuilt(child) -> tuple:
    bound, value = child[0], child[1]
    return tuple(x if x == x else -float("inf") for x in bound) + (value,)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        (x != x and y != y) or (x == y and math.copysign(1, x) == math.copysign(1, y)
                                if isinstance(x, float) else x == y and type(x) is type(y))
        for x, y in zip(a, b))


def test_a_key_is_the_rebuilt_tuple_for_edge_components():
    edges = [0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan, 3, 0]
    rng = random.Random(7)
    nans = 0
    for _ in range(2000):
        bound = tuple(rng.choice(edges) for _ in range(rng.randint(1, 5)))
        child = (bound, rng.randrange(6), 0, ())
        key = _sortable(child)
        assert _same(key, _rebuilt(child))
        assert not any(x != x for x in key)
        nans += any(x != x for x in bound)
    assert nans > 100


def test_children_sort_as_with_the_rebuilt_keys():
    rng = random.Random(3)
    values = [0.5, 1.0, 2.0, math.nan, math.inf, -0.0, 0.0]
    for _ in range(300):
        children = [(tuple(rng.choice(values) for _ in range(3)), v, 0, ())
                    for v in rng.sample(range(12), rng.randint(2, 8))]
        assert [c[1] for c in sorted(children, key=_sortable)] == \
            [c[1] for c in sorted(children, key=_rebuilt)]


def test_a_key_without_nan_is_the_bound_then_the_value():
    bound = (1.0, -3.0, 2.0)
    key = _sortable((bound, 4, 0, ()))
    assert key == (1.0, -3.0, 2.0, 4)
