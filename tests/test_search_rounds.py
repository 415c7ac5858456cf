"""The optimisation's rounds (solver/search.py Search._rounds): a round after the
first prunes against the best plan found so far from its first node, and reaches
the plan it reaches with no incumbent (the first optimal leaf in its order) in no
more nodes; where it reaches no leaf of its own, the earlier plan is kept."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.solver import search as search_module
from kbsolve.solver.search import Search

QUERY = {"gpus": "8xA100", "model": "qwen3-8b"}  # ~340 nodes in one round


@pytest.fixture(scope="module")
def problem():
    return resolve(api.load_kb(), Query(**QUERY)).problem


def _rounds(problem, monkeypatch, ceiling: bool, budget: int = search_module.NODE_BUDGET):
    monkeypatch.setattr(search_module, "ROUNDS", (300, 40_000, 150_000))  # the first stops
    search = Search(problem)
    inner, rounds = search._round, []

    def kept(start, fixed, share, first, deadline, ceiling_=None):
        found, state = inner(start, fixed, share, first, deadline,
                             ceiling_ if ceiling else None)
        rounds.append((found, ceiling_))
        return found, state

    search._round = kept
    return search.run(budget=budget), rounds


def test_a_later_round_prunes_from_the_earlier_plan_and_meets_the_same_one(problem,
                                                                          monkeypatch):
    plain, plain_rounds = _rounds(problem, monkeypatch, ceiling=False)
    seeded, seeded_rounds = _rounds(problem, monkeypatch, ceiling=True)
    assert [f.status for f, _ in seeded_rounds] == ["budget", "optimal"]
    assert seeded_rounds[0][1] is None and seeded_rounds[1][1] is not None
    assert (seeded.status, seeded.chosen) == (plain.status, plain.chosen) == \
        ("optimal", plain_rounds[1][0].chosen)
    assert seeded.metrics.time_per_work == plain.metrics.time_per_work
    assert seeded_rounds[1][0].nodes < plain_rounds[1][0].nodes


def test_a_round_stopped_before_its_first_leaf_keeps_the_earlier_plan(problem, monkeypatch):
    found, rounds = _rounds(problem, monkeypatch, ceiling=True, budget=303)
    first, last = rounds[0][0], rounds[-1][0]
    assert first.status == "budget" and first.chosen is not None
    assert last.status == "budget" and last.chosen is None  # no leaf in its two nodes
    assert (found.status, found.chosen, found.nodes) == \
        ("budget", first.chosen, first.nodes + last.nodes)


KEYS = ["llamafactory.per_device_train_batch_size", "llamafactory.deepspeed",
        "llamafactory.disable_gradient_checkpointing"]


@pytest.mark.parametrize("key", KEYS)
def test_a_fixed_value_searched_under_a_known_plans_ceiling_finds_the_best_with_it(problem, key):
    """plan/explain.py's decisive comparison: pruned against a known plan with the
    value from its first node, a search that ends proven ("optimal", or "infeasible":
    none better) leaves the best plan with the value as the better of the two."""
    from kbsolve.program.metrics import sort_key
    search = Search(problem)
    best = search.run()
    checked = 0
    for value in problem.choices[key]:
        if value == best.chosen[key]:
            continue
        truth = search.run(fixed={key: value})  # the whole budget, no ceiling
        known = search.run(fixed={key: value}, first=True)  # any plan with it
        if truth.status != "optimal" or known.chosen is None:
            continue
        ceiling = tuple(float(x) for x in sort_key(known.metrics))
        found = search.run(fixed={key: value}, ceiling=ceiling)
        assert found.status in ("optimal", "infeasible")
        assert found.nodes <= truth.nodes
        winner = known.metrics if found.chosen is None or \
            sort_key(known.metrics) < sort_key(found.metrics) else found.metrics
        assert sort_key(winner) == sort_key(truth.metrics)
        exact = tuple(float(x) for x in sort_key(truth.metrics))  # a ceiling just above it
        above = search.run(fixed={key: value}, ceiling=(exact[0] * (1 + 1e-6),) + exact[1:])
        assert above.status == "optimal" and sort_key(above.metrics) == sort_key(truth.metrics)
        checked += 1
    assert checked


def test_a_search_among_some_values_finds_the_best_of_their_own_optima(problem):
    """plan/explain.py's decisive comparison over every rival value at once: the
    best plan among them is the least of the best plans with each."""
    from kbsolve.program.metrics import sort_key
    key = "llamafactory.per_device_train_batch_size"
    search = Search(problem)
    best = search.run()
    rivals = [v for v in problem.choices[key] if v != best.chosen[key]]
    each = [search.run(fixed={key: v}) for v in rivals]
    each = [f for f in each if f.status == "optimal" and f.chosen is not None]
    assert len(each) >= 2
    truth = min(each, key=lambda f: sort_key(f.metrics))
    found = search.run(among={key: rivals})
    assert found.status == "optimal" and found.chosen[key] in rivals
    assert sort_key(found.metrics) == sort_key(truth.metrics)
    worst = max(each, key=lambda f: sort_key(f.metrics))  # a known plan as the ceiling
    seeded = search.run(among={key: rivals},
                        ceiling=tuple(float(x) for x in sort_key(worst.metrics)))
    assert seeded.status == "optimal" and sort_key(seeded.metrics) == sort_key(truth.metrics)
    assert seeded.nodes <= found.nodes
