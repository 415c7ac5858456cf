"""A neighbour whose changed value arc consistency took out (plan/explain
_Views.taken_out) is judged without its float view, and its clash question
tries no repair: no plan has such a value. The answers must be the ones the
view and the repair gave, and the explanations must not move."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.plan import explain as ex
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search

QUERIES = [Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="4xL40S", model="flux1-dev")]


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _solved(kb, query):
    problem = resolve(kb, query).problem
    search = Search(problem)
    found = search.run()
    assert found.status == "optimal", query
    return problem, search, {**problem.fixed, **found.chosen}, found.metrics


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.gpus} {q.model}")
def test_taken_out_values_are_outside_and_break_a_rule(kb, query):
    """Every value taken_out names makes the settled neighbour `outside` (what the
    view-first path asked) and its exact measure breaks a rule; the values it does
    not name keep the neighbour inside unless a reset option is out; some value of
    each plan is named (the check is reached)."""
    problem, search, plan, _ = _solved(kb, query)
    views = ex._Views(problem, search)
    assert views(plan) is not None
    named = 0
    for key, values in problem.choices.items():
        if key in problem.pinned:
            continue
        taken = views.taken_out(key, plan)
        for index, value in enumerate(values):
            if value == plan[key]:
                continue
            neighbour = ex._settled(problem, {**plan, key: value}, views.conditional)
            if index in taken and neighbour[key] is value:  # as _decided asks it
                named += 1
                assert search.outside(neighbour), (key, value)
                assert ex.measure(problem, neighbour).broken, (key, value)
            elif search.outside(neighbour):
                assert any(neighbour[k] is not plan[k] and neighbour[k] != plan[k]
                           for k in problem.choices if k != key), (key, value)
    assert named > 0, query


def test_taken_out_is_empty_where_the_plan_breaks_a_pin(kb):
    """search.outside is False for an assignment that does not keep the pins, so
    nothing is named for such a plan."""
    problem = resolve(kb, Query(gpus="8xA100", model="qwen3-8b",
                                set=["per_device_train_batch_size=2"])).problem
    search = Search(problem)
    found = search.run()
    plan = {**problem.fixed, **found.chosen}
    views = ex._Views(problem, search)
    assert views(plan) is not None
    key = next(iter(problem.pinned))
    other = next(v for v in problem.choices[key] if v != plan[key]) \
        if len(problem.choices[key]) > 1 else object()
    broken_pin = {**plan, key: other}
    some = next(k for k in problem.choices if k not in problem.pinned
                and views.taken_out(k, plan))
    assert views.taken_out(some, broken_pin) == frozenset()


def _explained(kb, query, view_first: bool):
    problem, search, plan, metrics = _solved(kb, query)
    met: list = []
    views_read = []
    real_view = search.view

    def counted(assignment):
        views_read.append(1)
        return real_view(assignment)
    search.view = counted
    real = ex._Views.taken_out
    if view_first:  # the path before: every neighbour's view read, every repair tried
        ex._Views.taken_out = lambda self, key, plan: frozenset()
    try:
        choices = ex.explain(problem, None, plan, metrics, search, met)
    finally:
        ex._Views.taken_out = real
    return ([c.model_dump() for c in choices],
            [sorted(map(repr, changes.items())) for changes, _ in met], len(views_read))


@pytest.mark.ci  # explains a plan twice (~2.5 s CPU); by default the per-value test above backs it
def test_explanations_and_met_plans_as_with_every_view_read(kb):
    """The choices (every reason's text) and the plans met, in order, equal the
    view-first path's, with fewer views read (a DiT plan: the cheaper to explain
    twice; the LLM plan's values are checked one by one above)."""
    query = QUERIES[1]
    before, met_before, views_before = _explained(kb, query, view_first=True)
    after, met_after, views_after = _explained(kb, query, view_first=False)
    assert after == before
    assert met_after == met_before
    assert views_after < views_before
