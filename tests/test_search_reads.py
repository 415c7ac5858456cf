"""A tracker group's indices over the places before k written out as one
compiled expression per group (solver/search.py `_indexer`, fourteenth round):
the same integers as the loop over its (place, stride) pairs, each text
compiled once per process; a node's ranges of the cells at place k read
by one call (`_reader_of`), the same ranges as the comprehension, and set
back by one unpacking (`_writer_of`, fifteenth round), as the loop sets them; a group's
tables read from its indices (`_tables`), each range the one Table.bound
reads; and a child's rule checks from its node's indices
(`_State._rules_hold`), each answer the rules' own bound's."""

from __future__ import annotations

import math
import random

import pytest
from plans import prepared_search

from kbsolve.program.tables import Table
from kbsolve.solver.search import (Search, _bases, _indexer, _reader_of, _State, _tables,
                                   _writer_of)


def _looped(befores, idx) -> list[int]:
    found = []
    for before in befores:
        at = 0
        for place, stride in before:
            at += idx[place] * stride
        found.append(at)
    return found


def test_an_indexer_sums_each_pairs_as_the_loop_does():
    rng = random.Random(11)
    for _ in range(200):
        n = rng.randint(1, 12)
        befores = tuple(tuple((place, rng.choice([1, 2, 3, 7, 24, 96]))
                              for place in sorted(rng.sample(range(n), rng.randint(0, n))))
                        for _ in range(rng.randint(0, 4)))
        idx = [rng.randrange(9) for _ in range(n)]
        assert _indexer(befores)(idx) == _looped(befores, idx)


def test_no_pairs_index_zero_and_nothing_indexes_nothing():
    assert _indexer(((),))([3, 4]) == [0]
    assert _indexer(())([3, 4]) == []


def test_a_text_is_compiled_once():
    befores = (((0, 6), (2, 1)), ((1, 3),))
    assert _indexer(befores) is _indexer(tuple(tuple(p) for p in befores))


@pytest.fixture(scope="module")
def search():
    return prepared_search()


def test_every_group_of_a_search_indexes_as_its_pairs_loop(search):
    tracker, rng = search.tracker, random.Random(5)
    n = len(search.order)
    groups = 0
    for k in range(n):
        for timed in (False, True):
            readers = tracker._time_readers(k) if timed else tracker._readers(k)
            for group in readers:
                for _ in range(5):
                    idx = [rng.randrange(len(search.p.choices[search.keys[a]]))
                           for a in search.axes]
                    assert _bases(group, idx) == _looped(group[2], idx)
                groups += bool(group[2])
    assert groups > 10


def test_a_places_ranges_are_read_as_the_comprehension_reads_them():
    ranges = [(float(i), float(i) + 0.5) for i in range(9)]
    for at in ([], [4], [0, 8], [2, 3, 7, 1]):
        assert _reader_of(at)(ranges) == tuple(ranges[i] for i in at)


def test_a_places_ranges_are_set_back_as_the_loop_sets_them():
    for at in ((), (4,), (0, 8), (2, 3, 7, 1)):
        values = tuple((-float(i), float(i)) for i in range(len(at)))
        written, looped = [(0.0, 0.0)] * 9, [(0.0, 0.0)] * 9
        _writer_of(at)(written, values)
        for i, value in zip(at, values):
            looped[i] = value
        assert written == looped
    assert _writer_of((2, 3)) is _writer_of((2, 3))  # a text compiled once


def test_a_node_restored_after_its_children_has_its_own_ranges(search):
    tracker, rng = search.tracker, random.Random(13)
    idx = [0] * len(search.order)
    ranges, totals = tracker.start(idx)
    for k in range(len(search.order)):
        before = list(ranges)
        kept = tracker.parent(ranges, totals, k, idx)
        for i in tracker.at[k]:  # what a child sets
            ranges[i] = (rng.random(), rng.random() + 1)
        taken = tracker.taken(ranges, totals, k)
        child = list(ranges)
        tracker.restore(ranges, totals, k, kept)
        assert ranges == before
        tracker.apply(ranges, totals, k, taken)
        assert ranges == child
        tracker.restore(ranges, totals, k, kept)
        assert ranges == before


def test_a_nodes_kept_ranges_are_its_cells_at_place_k(search):
    tracker = search.tracker
    idx = [0] * len(search.order)
    ranges, totals = tracker.start(idx)
    for k in range(len(search.order)):
        kept = tracker.parent(ranges, totals, k, idx)
        assert list(kept[0]) == [ranges[i] for i in tracker.at[k]]
        assert list(tracker.taken(ranges, totals, k)[0]) == [ranges[i] for i in tracker.at[k]]


def test_a_groups_tables_read_what_table_bound_reads(search):
    tracker, rng = search.tracker, random.Random(9)
    kinds = set()
    for k in range(len(search.order)):
        for group in tracker._readers(k) + tracker._time_readers(k):
            kinds.update(listed for *_, listed, _ in group[0])
            for _ in range(4):
                idx = [rng.randrange(len(search.p.choices[search.keys[a]])) for a in search.axes]
                ranges = [None] * len(tracker.cells)
                _tables(ranges, idx[k], group[0], _bases(group, idx))
                for i, *_ in group[0]:
                    cell = tracker.cells[i]
                    assert isinstance(cell, Table)
                    assert ranges[i] == cell.bound(k + 1, idx)
    assert kinds == {True, False}  # levels read as lists and as arrays


def test_a_childs_rules_hold_as_their_bounds_say(search):
    state = _State(search, [list(d) for d in search.base_domains], 10, False, math.inf)
    rng = random.Random(3)
    answers = set()
    for k in range(len(search.order)):
        for _ in range(12):
            state.idx[:] = [rng.randrange(len(search.p.choices[search.keys[a]]))
                            for a in search.axes]
            checks, index = search.rule_readers[k] or state._rule_checks(k)
            held = state._rules_hold(k, checks, index(state.idx))
            assert held == all(cell.bound(k + 1, state.idx)[1] for cell in search.rules_at[k])
            answers.add(held)
    assert answers == {True, False}
