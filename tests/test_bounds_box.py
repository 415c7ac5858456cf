"""The explanations' per-value table bounds (solver/bounds.py) read from the allowed
box equal the search's filled layout reduced with fmin/fmax (the former reading):
random tables with ties, nan, -0.0 and infinities, random masks (some empty)."""

import random
from fractions import Fraction

import numpy as np
import pytest

from kbsolve.program.tables import Table, allowed_mask
from kbsolve.solver.bounds import _masked, _per_value


def _filled(cell, axis, allowed):
    """The former reading: the whole table, left-out combinations filled."""
    low = cell.array.astype(np.int8) if cell.kind == "bool" else cell.array
    mask = allowed_mask(cell.sizes, [allowed[a] for a in cell.deps])
    if cell.kind == "num":
        low, high = np.where(mask, low, np.inf), np.where(mask, low, -np.inf)
    else:
        low, high = np.where(mask, low, 1), np.where(mask, low, 0)
    i = cell.deps.index(axis)
    rest = tuple(j for j in range(len(cell.deps)) if j != i)
    if rest:
        low, high = np.fmin.reduce(low, axis=rest), np.fmax.reduce(high, axis=rest)
    return np.asarray(low).tolist(), np.asarray(high).tolist()


def _same(a, b, signed: bool = True) -> bool:
    """Equal values of one type, nan as nan, zeros with their sign where `signed`
    (float fmin's choice between 0.0 and -0.0 is the platform's, as in the search's
    own levels; an object array's is the first met, which the box keeps)."""
    if a != a or b != b:
        return a != a and b != b
    return type(a) is type(b) and a == b and \
        (a != 0 or not signed or np.signbit(float(a)) == np.signbit(float(b)))


FLOATS = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1.5, 3.0]
FRACTIONS = [Fraction(0), Fraction(1, 3), Fraction(-2), Fraction(1, 3), Fraction(7, 2)]


def _table(rng, kind):
    count = rng.randint(1, 4)
    sizes = tuple(rng.randint(1, 4) for _ in range(count))
    deps = tuple(sorted(rng.sample(range(6), count)))
    cells = int(np.prod(sizes))
    if kind == "bool":
        array = np.array([rng.random() < 0.5 for _ in range(cells)]).reshape(sizes)
    elif kind == "float":
        array = np.array([rng.choice(FLOATS) for _ in range(cells)]).reshape(sizes)
    else:  # exact: Fractions, with float zeros and infinities among them
        pool = FRACTIONS + [-0.0, 0.0, np.inf, -np.inf]
        array = np.empty(cells, dtype=object)
        array[:] = [rng.choice(pool) for _ in range(cells)]
        array = array.reshape(sizes)
    table = Table(deps, sizes, array, "bool" if kind == "bool" else "num", kind == "exact")
    allowed = [np.ones(1, dtype=bool)] * 6
    for a, n in zip(deps, sizes):
        allowed[a] = np.array([rng.random() < 0.7 for _ in range(n)])
    return table, allowed


@pytest.mark.parametrize("kind", ["bool", "float", "exact"])
def test_the_box_reads_the_filled_tables_bounds(kind):
    rng = random.Random(kind)
    for _ in range(400):
        table, allowed = _table(rng, kind)
        box = _masked(table, allowed)
        for axis in table.deps:
            low, high = _per_value(table, axis, box)
            want_low, want_high = _filled(table, axis, allowed)
            assert len(low) == len(want_low) == table.sizes[table.deps.index(axis)]
            signed = [kind != "float"] * len(low)
            assert all(map(_same, low, want_low, signed)), (table.array, allowed, axis)
            assert all(map(_same, high, want_high, signed)), (table.array, allowed, axis)
