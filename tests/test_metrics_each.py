"""measure() finds its rules and terms by Evaluator.remembering_each's each(), over a
layout found once a problem (program/metrics._Layout): the same Metrics as one run()
per node, the same first error, and a new layout where a copied problem's rules differ."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
from plans import defaults

from kbsolve import api
from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.program import metrics as mx
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.metrics import measure
from kbsolve.program.query import Query, resolve

QUERIES = [Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="4xL40S", model="flux1-dev")]


@pytest.fixture(scope="module")
def problems():
    kb = api.load_kb()
    return [resolve(kb, query).problem for query in QUERIES]


def _assignments(problem, count: int = 6):
    """The defaults, then single changes of them (feasible and not)."""
    base = defaults(problem)
    yield base
    made = 0
    for key, values in problem.choices.items():
        for value in values:
            if value != base[key] and made < count:
                made += 1
                yield {**base, key: value}


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
    for problem in problems:
        for assignment in _assignments(problem):
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
