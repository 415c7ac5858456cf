"""A full assignment's value positions in Search.view (solver/search.py
`_positions`): one dict read a value, the position tuple.index finds (the
first of equal values), and the tuple's own index where a value is not
among its choices or cannot be hashed."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from plans import prepared_search

from kbsolve.solver.search import _positions


@pytest.mark.parametrize("values", [
    ("a", "b", "c"),
    (Fraction(1, 2), Fraction(1), 2, Fraction(4)),
    (False, True),
    (0, 1, 1.0, Fraction(1), True, 2),  # equal values: the first one's place
    (),
])
def test_a_values_position_is_tuple_index(values):
    found = _positions(values)
    for value in set(values) | {Fraction(1), 1, 1.0, True, 0, False}:
        if value in values:
            assert found[value] == values.index(value)
        else:
            assert value not in found


def test_unhashable_values_are_left_to_the_tuple():
    assert _positions(([1], [2])) == {}


@pytest.fixture(scope="module")
def search():
    return prepared_search()


def test_a_view_reads_the_positions_tuple_index_gives(search):
    rng = random.Random(17)
    choices = search.p.choices
    plan = search.run(first=True).chosen  # a feasible plan, and its neighbours
    assignments = [{**plan, key: value} for key in search.order for value in choices[key]]
    seen = set()
    for assignment in rng.sample(assignments, min(60, len(assignments))) + [plan]:
        fast = search.view(assignment)
        search._positions = {key: {} for key in choices}  # every read falls back
        plain = search.view(assignment)
        del search._positions
        assert fast == plain
        seen.add(fast is None or bool(fast.broken))
    assert seen == {True, False}  # broken and plans alike
    with pytest.raises(ValueError):  # not among its choices: tuple.index's error
        search.view({**{key: choices[key][0] for key in search.order},
                     search.order[0]: object()})
