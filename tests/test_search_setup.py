"""A search's set-up read once (solver/search.py, twelfth round): the places
that may still take their default (`_free_defaults`, a suffix count) and the
tracker's ranges before any place is set (`Tracker.start`, read once per
preparation), each the same as it was found before."""

from __future__ import annotations

import copy
import math
import random
from fractions import Fraction

import pytest
from plans import prepared_search

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
    return prepared_search()


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


def _refused():
    return resolve(api.load_kb(), Query(gpus="1x4090", model="llama3-70b")).problem


def _least_memory(problem):
    unlimited = copy.copy(problem)  # as plan/explain.py's refused_on_memory asks it
    unlimited.budget_bytes, unlimited.objective = Fraction(2) ** 80, "memory"
    return unlimited


def _no_host_limit(problem):
    unlimited = copy.copy(problem)  # as plan/run.py's _host_ram_fix asks it
    unlimited.host_budget_bytes = None
    return unlimited


def _answer(found):
    return found.status, found.chosen, found.nodes, found.metrics and found.metrics.levels


def test_a_refusals_copies_take_its_set_up_and_find_what_a_fresh_search_finds():
    problem = _refused()
    refused = Search(problem)
    assert refused.run().status == "infeasible"
    refused.offer_setup()  # as solver/optimize.py solve does for a refused search
    tables, rules = refused.tables, refused.rules
    del refused  # gone: its set-up may be taken
    least = Search(_least_memory(problem))
    assert least.tables is tables and least.rules is rules and least.host_terms
    fresh = Search(_least_memory(_refused()))
    assert fresh.tables is not tables
    assert _answer(least.run()) == _answer(fresh.run())
    assert least.objective == "memory" and least.budget == float(Fraction(2) ** 80)
    del least, fresh
    host = Search(_no_host_limit(problem))
    assert host.tables is tables and host.host_terms == [] and host.host == []
    found = host.run()
    assert found.status == "optimal"
    assert _answer(found) == _answer(Search(_no_host_limit(_refused())).run())


def test_a_set_up_is_kept_only_where_a_refused_search_offers_it():
    problem = _refused()
    first = Search(problem)
    assert first.prepare() is True
    tables = first.tables
    del first  # not offered: nothing of it stays in the problem
    assert "_search_setups" not in problem.__dict__
    assert Search(_least_memory(problem)).tables is not tables


def test_solve_offers_a_refused_searchs_set_up_to_its_copies():
    from kbsolve.solver.optimize import solve
    problem = _refused()
    assert solve(problem).status == "infeasible"
    [entry] = problem.__dict__["_search_setups"]
    assert Search(_least_memory(problem)).tables is entry[3]["tables"]


def test_a_live_search_keeps_its_set_up_to_itself():
    problem = _refused()
    first = Search(problem)
    assert first.prepare() is True
    second = Search(_least_memory(problem))
    assert second.tables is not first.tables and second.cells is not first.cells


def test_a_problem_with_other_pins_builds_its_own_set_up():
    problem = _refused()
    tables = Search(problem).tables
    other = copy.copy(problem)
    other.pinned = {**problem.pinned, next(iter(problem.choices)): None}
    assert Search(other).tables is not tables
    changed = copy.copy(problem)
    changed.pinned[next(iter(problem.choices))] = None  # the same dict, changed in place
    assert Search(changed).tables is not tables


def test_masks_a_search_without_host_terms_took_never_go_back_to_one_with_them():
    problem = _refused()
    full = Search(problem)
    assert full.prepare() and full.host_terms
    full.offer_setup()
    masks = full.allowed
    del full
    least = Search(_least_memory(problem))
    assert least.prepare() and least.allowed is masks  # the same sides: the same masks
    del least
    host = Search(_no_host_limit(problem))
    assert host.prepare() and host.allowed is masks  # fewer sides: it may read them
    del host
    again = Search(_least_memory(problem))
    assert again.prepare() and again.allowed is not masks
    assert [list(m) for m in again.allowed] == [list(m) for m in masks]
