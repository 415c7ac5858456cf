"""A search's set-up read once (solver/search.py, twelfth round): the places
that may still take their default (`_free_defaults`, a suffix count) and the
tracker's ranges before any place is set (`Tracker.start`, read once per
preparation), each the same as it was found before."""

from __future__ import annotations

import math
import random

import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search, _free_defaults


def test_free_defaults_is_the_count_of_defaults_left_from_each_place():
    rng = random.Random(7)
    for n in range(0, 12):
        domains = [rng.sample(range(6), rng.randint(1, 6)) for _ in range(n)]
        defaults = [rng.choice([-1, 0, 1, 2, 3, 4, 5]) for _ in range(n)]
        summed = [sum(1 for a in range(k, n) if defaults[a] in domains[a])
                  for k in range(n + 1)]
        assert _free_defaults(defaults, domains) == summed


@pytest.fixture(scope="module")
def search():
    kb = api.load_kb()
    found = Search(resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem)
    assert found.prepare()
    return found


def test_every_search_of_a_preparation_starts_from_fresh_copies_of_the_same_ranges(search):
    tracker = search.tracker
    idx = [0] * len(search.order)
    ranges, totals = tracker.start(idx)
    read = [c.bound(0, idx) for c in tracker.cells]
    assert ranges == read and totals == [tracker._total(read, t) for t in range(len(totals))]
    ranges[0], totals[0] = (math.inf, math.inf), math.inf  # a search sets its own
    again, again_totals = tracker.start([1] * len(search.order))
    assert again == read and again[0] != (math.inf, math.inf)
    assert again_totals[0] != math.inf and again is not ranges


def test_a_new_preparation_reads_its_own_start(search):
    before = search.tracker
    search.prepare(list(reversed(search.axes)))
    try:
        assert search.tracker is not before
        idx = [0] * len(search.order)
        assert search.tracker.start(idx)[0] == [c.bound(0, idx) for c in search.tracker.cells]
    finally:
        search.prepare(list(reversed(search.axes)))


def test_searches_of_one_preparation_find_what_separate_searches_find():
    kb = api.load_kb()
    problem = resolve(kb, Query(gpus="1x4090", model="qwen3-0.6b")).problem
    shared = Search(problem)
    first = shared.run(budget=300, first=True)
    second = shared.run(budget=300, first=True)
    alone = Search(resolve(kb, Query(gpus="1x4090", model="qwen3-0.6b")).problem).run(
        budget=300, first=True)
    assert (first.chosen, first.nodes) == (second.chosen, second.nodes) == \
        (alone.chosen, alone.nodes)
    assert first.chosen is not None
