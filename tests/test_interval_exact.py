"""The interval operators written out for speed return what the plain forms
returned: the same values, types and signs of zero (the search's ranges, and so
its trees and plans, depend on them to the bit)."""

import itertools
import math
from fractions import Fraction

from kbsolve.program import operators as ops

EDGES = [0, 1, -2, 0.0, -0.0, 1.5, -3.25, math.inf, -math.inf, math.nan, Fraction(1, 3)]


def _mul_reference(a, b):
    products = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    products = [0 if p != p else p for p in products]
    return min(products), max(products)


def _same(x, y) -> bool:
    if isinstance(x, tuple):
        return isinstance(y, tuple) and len(x) == len(y) and all(map(_same, x, y))
    if x is None or y is None:  # UNKNOWN
        return x is y
    if x != x:
        return y != y
    return type(x) is type(y) and x == y and math.copysign(1, x) == math.copysign(1, y)


def test_mul_and_division_match_the_plain_forms():
    pairs = [p for p in itertools.product(EDGES, repeat=2) if not p[0] > p[1]]  # ranges
    for a, b in itertools.product(pairs, pairs[::3]):
        assert _same(ops._mul(a, b), _mul_reference(a, b)), (a, b)
        if b[0] <= 0 <= b[1] or not ops._finite(b[0], b[1]):
            expected = (-math.inf, math.inf)
        else:
            expected = _mul_reference(a, (1 / b[1], 1 / b[0]))
        assert _same(ops._divr(a, b), expected), (a, b)


def test_nary_ranges_and_unknown_match_the_plain_forms():
    ranges = [(0, 1.5), (-0.0, 0.0), (Fraction(1, 3), math.inf), (-2, 7)]
    assert _same(ops.interval("sum", ranges, True),
                 (sum(r[0] for r in ranges), sum(r[1] for r in ranges)))
    assert _same(ops.interval("min", ranges, True), (-2, 0.0))
    assert _same(ops.interval("max", ranges, True), (Fraction(1, 3), math.inf))
    assert ops.interval("+", [(1, 2), ops.UNKNOWN], True) is ops.UNKNOWN
    assert ops.interval("and", [(1, 1), ops.UNKNOWN], True) == (0, 1)
    assert _same(ops.interval("*", [(-0.0, 2), (3, math.inf)], True), (-0.0, math.inf))


def _if_reference(c, a, b):
    if c is ops.UNKNOWN:
        return ops.UNKNOWN
    if c[0]:
        return a
    if not c[1]:
        return b
    if a is ops.UNKNOWN or b is ops.UNKNOWN:
        return ops.UNKNOWN
    return min(a[0], b[0]), max(a[1], b[1])


def test_if_range_matches_the_plain_form():
    pairs = [p for p in itertools.product(EDGES, repeat=2) if not p[0] > p[1]]
    tests = [(0, 1), (1, 1), (0, 0), ops.UNKNOWN]
    for c, a, b in itertools.product(tests, pairs[::2], pairs[::2] + [ops.UNKNOWN]):
        assert _same(ops._if_range(c, a, b), _if_reference(c, a, b)), (c, a, b)


def test_time_low_matches_sum_times_factors():
    """Search.time_low (the parts' sum times the factors, _mul written out)
    equals summing the ranges and multiplying them with the plain product."""
    from types import SimpleNamespace

    from kbsolve.solver.search import Search
    pairs = [p for p in itertools.product(EDGES, repeat=2) if not p[0] > p[1]]
    for parts in itertools.product(pairs[::7], repeat=2):
        for factors in itertools.product(pairs[::9], repeat=2):
            ranges = list(parts) + list(factors)
            search = SimpleNamespace(time_parts=[0, 1], time_factors=[2, 3])
            total = (0.0 + parts[0][0] + parts[1][0], 0.0 + parts[0][1] + parts[1][1])
            for factor in factors:
                total = _mul_reference(total, factor)
            assert _same(Search.time_low(search, ranges), total[0]), (parts, factors)


def test_time_low_from_a_start_is_the_same_float():
    """A node's children go on from time_start's first n steps: every n gives
    the float time_low gives from the beginning, to the bit."""
    from functools import partial
    from types import SimpleNamespace

    from kbsolve.solver.search import Search
    pairs = [p for p in itertools.product(EDGES, repeat=2) if not p[0] > p[1]]
    search = SimpleNamespace(time_parts=[0, 1, 2], time_factors=[3, 4])
    search.time_low = partial(Search.time_low, search)
    grids = (pairs[::13], pairs[::23], pairs[::11], pairs[::19], pairs[::29])
    for ranges in itertools.product(*grids):
        whole = Search.time_low(search, list(ranges))
        for n in range(6):
            start = Search.time_start(search, list(ranges), n)
            assert _same(Search.time_low(search, list(ranges), start), whole), (ranges, n)
