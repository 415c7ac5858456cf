"""`divisible` over whole numbers and Fractions decides by their lowest terms (a/b whole
iff a.num * b.den is a multiple of a.den * b.num), as the Fraction remainder it stands
for: the same answer for every pair, signs, zero and other types included."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from kbsolve.program import operators

VALUES = [0, 1, -1, 2, -3, 6, 12, 1024, 2**70, -(2**65), True, False, Fraction(0),
          Fraction(3, 4), Fraction(-9, 2), Fraction(6, 1), Fraction(1, 3), Fraction(-2, 3),
          Fraction(12, 5), 0.0, 1.5, -4.0, 3.0, math.inf, -math.inf, math.nan,
          np.float64(2.0)]


def by_remainder(a, b) -> bool:
    if any(isinstance(v, float) and not math.isfinite(v) for v in (a, b)):
        return False
    return bool(b != 0 and Fraction(a) % Fraction(b) == 0)


def test_divisible_is_the_fraction_remainder_for_every_pair():
    for a in VALUES:
        for b in VALUES:
            assert bool(operators._divisible(a, b)) is by_remainder(a, b), (a, b)


def test_divisible_over_tables_of_fractions():
    """The vector view (object arrays of Fractions, as exact tables hold) agrees cell by cell."""
    tops = np.array([Fraction(n, d) for n in range(-12, 13) for d in (1, 2, 3, 4)], dtype=object)
    bottoms = np.array([Fraction(n, d) for n in (-6, -1, 0, 1, 2, 3) for d in (1, 2, 5)],
                       dtype=object)
    table = operators.OPERATORS["divisible"].vector(tops[:, None], bottoms[None, :])
    for i, a in enumerate(tops):
        for j, b in enumerate(bottoms):
            assert bool(table[i, j]) is by_remainder(a, b), (a, b)
