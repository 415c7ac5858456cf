"""A lazy measure (program/metrics.measure(lazy=True)) and what reads it: the fields
past memory are measured on first read and equal measure()'s; a feasibility search's
plan is measured lazily; an explanation's known plans are ranked on their float views
(plan/explain._least_known) and pick the plan min() over their exact keys picks.
measure() finds its rules and terms by Evaluator.remembering_each's each(), over a
layout found once a problem (program/metrics._Layout): the same Metrics as one run()
per node, the same first error, and a new layout where a copied problem's rules differ."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction

import pytest
from plans import defaults

from kbsolve import api
from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.plan import explain as ex
from kbsolve.program import metrics as mx
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.metrics import Metrics, measure, sort_key
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search

QUERIES = [Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="1x4090", model="qwen2.5-7b"),
           Query(gpus="4xL40S", model="flux1-dev")]
LATER = ("times", "factors", "step_time", "work", "time_per_work", "preferences", "warnings",
         "defaults_kept")


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


@pytest.fixture(scope="module")
def problems(kb):
    return [resolve(kb, query).problem for query in QUERIES]


def _assignments(problem, count: int = 12):
    """The defaults, then single changes of them (feasible and not)."""
    base = defaults(problem)
    yield base
    made = 0
    for key, values in problem.choices.items():
        for value in values:
            if value != base[key] and made < count:
                made += 1
                yield {**base, key: value}


def _fields(metrics: Metrics) -> dict:
    return {f.name: getattr(metrics, f.name) for f in dataclasses.fields(Metrics)}


def test_a_lazy_measure_waits_and_then_equals_the_whole_measure(problems):
    """Before any of its later fields is read none is measured; its feasibility is
    measure()'s; after a read every field equals measure()'s, to the Fraction."""
    for problem in problems:
        for assignment in _assignments(problem):
            whole = measure(problem, assignment)
            lazy = measure(problem, assignment, lazy=True)
            assert not set(LATER) & set(vars(lazy))
            assert lazy.feasible == whole.feasible and lazy.broken == whole.broken
            assert lazy.levels == whole.levels and lazy.host == whole.host
            assert lazy.time_per_work == whole.time_per_work
            assert set(LATER) <= set(vars(lazy)) and "_pending" not in vars(lazy)
            assert _fields(lazy) == _fields(whole)
            assert sort_key(lazy) == sort_key(whole)


def test_a_lazy_measure_answers_no_other_attribute(problems):
    """getattr(plan, "exact", plan) must see no `exact` on it, and reading it
    measures nothing."""
    problem = problems[0]
    lazy = measure(problem, next(_assignments(problem)), lazy=True)
    assert getattr(lazy, "exact", lazy) is lazy and getattr(lazy, "view", None) is None
    assert "_pending" in vars(lazy)


def test_a_feasibility_search_measures_its_plan_lazily(problems):
    """Its plan's metrics are lazy, and equal measure() of the plan once read."""
    for problem in problems:
        found = Search(problem).run(first=True)
        assert found.chosen is not None
        assert "_pending" in vars(found.metrics) and found.metrics.feasible
        assert _fields(found.metrics) == _fields(measure(problem, {**problem.fixed,
                                                                   **found.chosen}))


class _View:
    def __init__(self, first):
        self.key, self.feasible = (first,), True


def _metrics(time: Fraction, memory: Fraction, kept: int = 0) -> Metrics:
    return Metrics([], [], {}, {}, {"device": memory}, {}, {}, time, {}, time, {}, [], kept)


class _Unread:
    """A plan whose exact figures must not be read."""
    float_view = None

    @property
    def exact(self):
        raise AssertionError("measured a plan its view rules out")


def test_least_known_picks_what_min_over_exact_keys_picks():
    """The first of equals wins; a plan without a view is always weighed; one whose
    view is beyond the tolerance of the least view is never measured."""
    first = ex._Found(_metrics(Fraction(10), Fraction(5)), _View(10.0))
    equal = ex._Found(_metrics(Fraction(10), Fraction(5)), _View(10.0))
    unviewed = _metrics(Fraction(11), Fraction(1))
    far = _Unread()
    far.float_view = _View(10.5)
    known = [({"a": 1}, first), ({"a": 2}, far), ({"a": 3}, equal), ({"a": 4}, unviewed)]
    changes, rival = ex._least_known(known)
    assert changes == {"a": 1} and rival is first.exact
    smaller = ex._Found(_metrics(Fraction(10), Fraction(4)), _View(10.0 * (1 + 1e-6)))
    changes, rival = ex._least_known(known + [({"a": 5}, smaller)])
    assert changes == {"a": 5}  # within the tolerance: measured, and smaller in memory
    faster = _metrics(Fraction(9), Fraction(9))
    assert ex._least_known(known + [({"a": 6}, faster)])[0] == {"a": 6}


def test_found_keeps_only_a_feasible_view():
    broken = _View(1.0)
    broken.feasible = False
    found = ex._Found(_metrics(Fraction(1), Fraction(1)), broken)
    assert found.float_view is None and getattr(found, "view", None) is None
    assert mx._LATER == frozenset(LATER)


class _Counted:
    """A found plan that counts the reads of its exact figures."""

    def __init__(self, exact: Metrics, first: float):
        self._exact, self.float_view, self.reads = exact, _View(first), 0

    @property
    def exact(self):
        self.reads += 1
        return self._exact


def test_ranked_alternatives_come_in_the_order_of_their_exact_estimates():
    """plan/alternatives._ranked gives what sorted() by (_estimate, repr) gave, on
    plain plans, neighbours' views and found plans whose views are off by up to the
    tolerance (ties included); a found plan well behind the first few is not measured
    when only those are taken."""
    import random

    from kbsolve.plan import alternatives as alt
    rng = random.Random(7)
    for _ in range(200):
        unique = {}
        for i in range(rng.randint(1, 9)):
            time = Fraction(rng.choice([10, 10, 11, 12, 30]))
            metrics = _metrics(time, Fraction(rng.randint(1, 3)), rng.randint(0, 2))
            kind = rng.randint(0, 2)
            noisy = float(time) * (1 + rng.uniform(-1e-6, 1e-6))
            if kind == 0:
                candidate = metrics
            elif kind == 1:
                candidate = _Counted(metrics, noisy)
            else:
                candidate = ex._Found(metrics, None)
            unique[(("k", i),)] = ({"k": i}, candidate)
        expected = sorted(unique.items(), key=lambda item: (alt._estimate(item[1][1]),
                                                            repr(item[0])))
        assert list(alt._ranked(unique)) == expected
    late = _Counted(_metrics(Fraction(30), Fraction(1)), 30.0)
    unique = {(("k", 0),): ({"k": 0}, _metrics(Fraction(10), Fraction(1))),
              (("k", 1),): ({"k": 1}, late)}
    order = alt._ranked(unique)
    assert next(order)[1][0] == {"k": 0} and late.reads == 0
    assert next(order)[1][1] is late and late.reads == 1


def test_a_neighbour_measures_past_memory_only_when_read(problems):
    """A neighbour without a float view answers feasible from rules and memory; its
    time is measured when `slower` reads it, and equals measure()'s."""
    problem = problems[0]
    for assignment in list(_assignments(problem))[1:4]:
        plan = measure(problem, next(_assignments(problem)))
        neighbour = ex._Neighbour(problem, assignment, None, plan, sort_key(plan), None,
                                  ex._Views(problem, None))
        whole = measure(problem, assignment)
        assert neighbour.feasible == whole.feasible and neighbour.fits == whole.fits
        assert "_pending" in vars(neighbour.exact)
        assert neighbour.slower == (whole.time_per_work > plan.time_per_work)
        assert _fields(neighbour.exact) == _fields(whole)


# ---- measure() by each() (program/metrics._Layout, _Nodes)

def _one_by_one(problem, assignment) -> dict:
    """measure()'s fields as it found them before: one run() per node, each term's
    key formatted from the term, on an evaluator of its own (nothing remembered)."""
    run = Evaluator(problem.kb, problem.framework, problem.facts).remembering(assignment)
    memory, host, times, factors = {}, {}, {}, {}
    for term in problem.memory_inner_first:
        value = mx._fraction(run(term.expr))
        (host if term.location == "host" else memory)[f"{term.framework}.{term.name}"] = value
    for term in problem.program.speed:
        value = mx._fraction(run(term.expr))
        (times if term.kind == "time" else factors)[f"{term.framework}.{term.name}"] = value
    return dict(
        broken=[r.framework + "." + r.id for r in problem.rules if not run(r.constraint)],
        irrelevant_changed=[o.key for o in problem.options
                            if o.when is not None and o.key in problem.choices
                            and assignment[o.key] != o.default and not run(o.when)],
        memory=memory, host=host, times=times, factors=factors,
        work={f"{t.framework}.{t.name}": mx._fraction(run(t.expr)) for t in problem.program.work},
        warnings=[f"{w.framework}.{w.id}" for w in problem.program.warnings
                  if mx._fires(run, w.expr)])


def test_measure_equals_one_run_per_node(problems):
    """Every field the nodes give, to the Fraction and in order, as one run() per node
    finds it; a lazy measure's later fields too."""
    for problem in problems[::2]:
        for assignment in _assignments(problem, 4):
            expected = _one_by_one(problem, assignment)
            for lazy in (False, True):
                found = measure(problem, assignment, lazy=lazy)
                got = {name: getattr(found, name) for name in expected}
                assert got == expected
                assert [list(got[k]) for k in ("memory", "times")] == \
                    [list(expected[k]) for k in ("memory", "times")]  # the same order


def test_each_finds_what_run_finds(problems):
    problem = problems[0]
    nodes = [r.constraint for r in problem.rules] + [t.expr for t in problem.program.speed]
    for assignment in _assignments(problem, 4):
        run, each = problem.evaluator.remembering_each(assignment)
        fresh = Evaluator(problem.kb, problem.framework, problem.facts).remembering(assignment)
        assert each(problem.evaluator.entries(nodes)) == [fresh(n) for n in nodes]


def test_a_raising_node_raises_the_first_error_one_run_at_a_time_would():
    """A term whose value is no Fraction (nan) before a term that raises: one run() per
    node turns the first into a Fraction (ValueError) before the second is found."""
    nodes = mx._Nodes.__new__(mx._Nodes)
    nodes.nodes, nodes.entries = ["nan", "missing"], ()
    values = {"nan": float("nan")}

    def run(node):
        if node not in values:
            raise KbError(Diagnostic("no such fact", code="missing-fact"))
        return values[node]

    def each(entries):
        return [run(node) for node in nodes.nodes]  # the batch meets the KbError first

    with pytest.raises(ValueError):
        nodes.fractions(run, each)
    values.update(nan=Fraction(1, 2), missing=3)  # no error: each()'s values, as Fractions
    assert nodes.fractions(run, lambda entries: [Fraction(1, 2), 3]) == [Fraction(1, 2), 3]


def test_a_copied_problem_with_other_consent_rules_gets_its_own_layout(problems):
    problem = problems[0]
    assignment = next(_assignments(problem))
    measure(problem, assignment)
    other = copy.copy(problem)
    other.consent = ()
    assert mx._layout(other) is not mx._layout(problem)
    assert [key for key, _ in mx._layout(other).rules] == \
        [r.framework + "." + r.id for r in other.rules]
