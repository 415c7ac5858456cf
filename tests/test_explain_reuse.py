"""What an explanation reads more than once is read once (plan/explain._Views): the
search's float views, remembered per assignment, and the options _settled may reset.
Each must answer as the question it replaces, and the explanations must not move."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.plan import explain as ex
from kbsolve.program.metrics import sort_key
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search

QUERIES = [Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="1x4090", model="qwen2.5-7b"),
           Query(gpus="4xL40S", model="flux1-dev")]


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


@pytest.fixture(scope="module")
def solved(kb):
    out = []
    for query in QUERIES:
        problem = resolve(kb, query).problem
        search = Search(problem)
        found = search.run()
        assert found.status == "optimal", query
        out.append((problem, search, {**problem.fixed, **found.chosen}, found.metrics))
    return out


def _settled_reference(problem, assignment):
    """_settled as it was written before (every option of the problem looked at)."""
    settled = dict(assignment)
    for other in problem.options:
        if other.when is not None and other.key in problem.choices \
                and other.key not in problem.pinned and settled[other.key] != other.default \
                and not problem.evaluator.remembered(other.when, settled):
            settled[other.key] = other.default
    return settled


def _neighbours(problem, plan):
    """Every single-option change of the plan (what _decided measures)."""
    for key, values in problem.choices.items():
        for value in values:
            if value != plan[key]:
                yield {**plan, key: value}


def test_settled_with_the_conditional_options_found_once_answers_as_before(solved):
    """On every neighbour of three plans (LLM and DiT) the reset options are the
    same; some neighbour does reset one (the grid reaches a `when`)."""
    resets = 0
    for problem, _, plan, _ in solved:
        conditional = ex._conditional(problem)
        assert conditional and all(o.when is not None for o in conditional)
        for neighbour in _neighbours(problem, plan):
            reference = _settled_reference(problem, neighbour)
            assert ex._settled(problem, neighbour, conditional) == reference
            assert ex._settled(problem, neighbour) == reference
            resets += reference != neighbour
    assert resets > 0


def test_remembered_views_are_the_views_the_search_reads(solved):
    """Each view, asked twice, is the one search.view returns for the same
    assignment, and the second ask reads no table; after the search is prepared
    again (a narrowed question's order, then its own back) the views are read
    afresh and still agree."""
    for problem, search, plan, _ in solved:
        views = ex._Views(problem, search)
        calls = []
        real = search.view

        def counted(assignment, real=real):
            calls.append(1)
            return real(assignment)

        search.view = counted
        try:
            grid = [ex._settled(problem, n, views.conditional) for n in
                    _neighbours(problem, plan)][:60] + [plan]
            first = [views(a) for a in grid]
            asked = len(calls)
            again = [views(a) for a in grid]
            assert len(calls) == asked and all(x is y for x, y in zip(first, again))
            assert asked == len({tuple(a[k] for k in search.order) for a in grid})
            axes = search.axes
            search.prepare(list(reversed(axes)))
            search.prepare(axes)
            fresh = [views(a) for a in grid]
            assert len(calls) == 2 * asked
        finally:
            del search.view
        assert [_plain(v) for v in fresh] == [_plain(real(a)) for a in grid] == \
            [_plain(v) for v in first]
        assert any(v is not None and v.feasible for v in first)
        assert any(v is not None and not v.feasible for v in first)


def _plain(view):
    return None if view is None else (view.broken, view.fits, view.time_per_work, view.key,
                                      view.device)


def test_explanations_with_remembered_reads_equal_those_without(solved, monkeypatch):
    """The explanation (every Choice, every reason) and the plans it met are the
    same with the views remembered as with each view read from the tables."""
    for problem, search, plan, metrics in solved:
        met_a: list = []
        remembered = ex.explain(problem, None, plan, metrics, search, met_a)
        with monkeypatch.context() as m:
            m.setattr(ex._Views, "__call__", lambda self, a: None if self.search is None
                      else self.search.view(a))
            met_b: list = []
            plain = ex.explain(problem, None, plan, metrics, search, met_b)
        assert [c.model_dump() for c in remembered] == [c.model_dump() for c in plain]
        assert [changes for changes, _ in met_a] == [changes for changes, _ in met_b]
        assert any(c.kind not in ("default", "pinned", "n/a", "fact", "recipe")
                   for c in remembered)


def test_a_neighbour_the_floats_show_no_trade_off_is_none_exactly(solved):
    """plan/alternatives._surely_no_trade, asked of every neighbour the explanation
    met: each one it skips fails _trades_off on its exact figures (and its float
    time and memory are the exact ones to far better than the tolerance); some
    are skipped; the runner-ups are those found with every candidate measured."""
    from kbsolve.plan import alternatives as alt
    skipped = 0
    for problem, search, plan, metrics in solved:
        met: list = []
        choices = ex.explain(problem, None, plan, metrics, search, met)
        for _, candidate in met:
            view = getattr(candidate, "view", None)
            if view is None:
                continue
            exact = candidate.exact
            assert abs(view.time_per_work - float(exact.time_per_work)) <= \
                1e-9 * abs(float(exact.time_per_work))
            assert abs(view.device - float(exact.levels["device"])) <= \
                1e-9 * float(exact.levels["device"])
            if alt._surely_no_trade(candidate, metrics):
                skipped += 1
                assert not alt._trades_off(exact, metrics)
        deciding = [o.key for o, c in zip(problem.options, choices)
                    if c.kind in alt.DECIDING_KINDS]
        shown = alt.runner_ups(metrics, met, deciding, 3)
        reference = _runner_ups_measuring_all(alt, metrics, met, deciding, 3)
        assert [(c, sort_key(m)) for c, m in shown] == [(c, sort_key(m)) for c, m in reference]
    assert skipped > 0


def _runner_ups_measuring_all(alt, best, met, deciding, top):
    real = alt._surely_no_trade
    alt._surely_no_trade = lambda candidate, plan: False
    try:
        return alt.runner_ups(best, met, deciding, top)
    finally:
        alt._surely_no_trade = real


def test_a_neighbours_broken_rules_without_measuring_are_the_measured_ones(solved, monkeypatch):
    """_Neighbour.broken (what a coupled value's reason names) read by the rules alone
    is measure()'s `broken` on every neighbour of three plans, some of which break a
    rule; it measures nothing (no memory or time terms evaluated)."""
    from kbsolve.program.metrics import measure
    broke = 0
    for problem, search, plan, metrics in solved:
        views = ex._Views(problem, search)
        plan_view = views(plan)
        cases = [ex._settled(problem, n, views.conditional) for n in _neighbours(problem, plan)]
        expected = [measure(problem, a).broken for a in cases]
        with monkeypatch.context() as m:
            m.setattr(ex, "measure", lambda *a: pytest.fail("measured"))
            got = [ex._Neighbour(problem, a, search, metrics, sort_key(metrics), plan_view,
                                 views).broken for a in cases]
        assert got == expected
        broke += sum(1 for b in got if b)
    assert broke > 0


def test_an_explanation_leaves_the_collector_as_it_found_it(solved):
    """The cyclic collector is paused while an explanation runs and set back after it:
    on when it was on, off when it was off, and on again after an explanation the
    --timeout guard stops (Unexplained)."""
    import gc
    problem, search, plan, metrics = solved[0]
    assert gc.isenabled()
    seen = []
    real = ex._decided

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    ex._decided = watched
    try:
        ex.explain(problem, None, plan, metrics, search, [])
        assert seen and not any(seen) and gc.isenabled()
        gc.disable()
        try:
            ex.explain(problem, None, plan, metrics, search, [])
            assert not gc.isenabled()
        finally:
            gc.enable()
        with pytest.raises(ex.Unexplained):
            ex.explain(problem, None, plan, metrics, search, [], deadline=0.0)
        assert gc.isenabled()
    finally:
        ex._decided = real


def test_a_broken_view_names_the_measured_rules_and_reads_no_cost(solved, monkeypatch):
    """search.view of an assignment that breaks a rule reads the rules only: its
    cost fields are None and no tracked cell (memory, time) is read; measure()
    finds it no plan, breaking the same rules. Some neighbours of three plans are
    broken, and the feasible views still carry their cost."""
    from kbsolve.program.metrics import measure
    from kbsolve.solver import search as search_module
    broken = 0
    for problem, search, plan, _ in solved:
        assert search.prepare()
        search.view(plan)  # the readers found once per preparation
        tracked = search.view_readers[1]
        real = search_module.read_bounds
        reads: list = []

        def counted(readers, k, idx, real=real):
            reads.append(readers is tracked)
            return real(readers, k, idx)

        monkeypatch.setattr(search_module, "read_bounds", counted)
        for neighbour in list(_neighbours(problem, plan))[:80]:
            reads.clear()
            view = search.view(neighbour)
            if view is None:
                continue
            if view.broken:
                broken += 1
                assert (view.fits, view.time_per_work, view.key, view.device) == \
                    (None, None, None, None) and not view.feasible
                assert reads == [False]
                exact = measure(problem, neighbour)
                assert not exact.feasible
                assert sorted(exact.broken) == sorted(p.partition(":")[2]
                                                      for p in view.broken)
            else:
                assert reads == [False, True] and view.key is not None
        monkeypatch.undo()
    assert broken > 0


def test_changed_options_are_those_the_comparison_finds(solved):
    """changed() (the same object is the same value, no comparison) lists what the
    plain comparison lists, on every neighbour of three plans, and settles an equal
    Fraction that is another object by comparing it."""
    from fractions import Fraction
    for problem, _, plan, _ in solved:
        for neighbour in _neighbours(problem, plan):
            settled = ex._settled(problem, neighbour)
            assert ex.changed(plan, settled) == \
                {k: v for k, v in settled.items() if plan.get(k) != v}
    plan = {"a": Fraction(1, 3), "b": 2, "c": None}
    other = {"a": Fraction(2, 6), "b": 3, "c": None, "d": None, "e": 0}
    assert ex.changed(plan, other) == {"b": 3, "e": 0}


def test_a_view_is_remembered_by_value_not_by_object(solved):
    """A Fraction keys the views by its numerator and denominator: another object of
    the same value reads the remembered view; an int of a Fraction's value is its own
    key, read afresh to the same answer."""
    from fractions import Fraction
    checked = 0
    for problem, search, plan, _ in solved:
        views = ex._Views(problem, search)
        first = views(plan)
        for key in search.order:
            value = plan[key]
            if type(value) is not Fraction:
                continue
            same = {**plan, key: Fraction(value.numerator, value.denominator)}
            assert same[key] is not value and views(same) is first
            if value.denominator == 1:
                assert _plain(views({**plan, key: int(value)})) == _plain(first)
            checked += 1
    assert checked
