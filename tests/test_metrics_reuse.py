"""What measure() keeps or skips between assignments (program/metrics): the memory
terms sorted innermost first once per program, and a value compared with a default
only when it is another object. The Metrics must be those the plain code gives."""

from __future__ import annotations

from fractions import Fraction

import pytest
from plans import defaults

from kbsolve import api
from kbsolve.program import metrics as mx
from kbsolve.program.query import Query, resolve

QUERIES = [Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="4xL40S", model="flux1-dev"),
           Query(gpus="8xH100", model="qwen2.5-7b", framework="pytorch")]


@pytest.fixture(scope="module")
def problems():
    kb = api.load_kb()
    return [resolve(kb, query).problem for query in QUERIES]


def _defaults_and_changes(problem, count: int = 6):
    base = defaults(problem)
    yield base
    for key, values in list(problem.choices.items())[:count]:
        for value in values:
            if value != base[key]:
                yield {**base, key: value}


def _reference(problem, assignment):
    """The memory keys in the plain sorted order, the options set outside their
    `when`, and the defaults kept, by plain == and != comparisons."""
    order = mx.memory_levels(problem.kb)
    terms = sorted(problem.program.memory, key=lambda t: order.index(t.level))
    gpu = [f"{t.framework}.{t.name}" for t in terms if t.location != "host"]
    host = [f"{t.framework}.{t.name}" for t in terms if t.location == "host"]
    run = problem.evaluator.remembering(assignment)
    irrelevant = [o.key for o in problem.options
                  if o.when is not None and o.key in problem.choices
                  and assignment[o.key] != o.default and not run(o.when)]
    kept = sum(1 for key in problem.choices
               if assignment[key] == problem.kb.options[key].default)
    return gpu, host, irrelevant, kept


def test_measures_of_programs_in_turn_keep_each_programs_term_order(problems):
    """Three programs (LLM, DiT, plain PyTorch) measured in turn, twice over: each
    measure lists its own program's terms in the plain order, not the last one's."""
    seen = set()
    for _ in range(2):
        for problem in problems:
            for assignment in _defaults_and_changes(problem):
                m = mx.measure(problem, assignment)
                gpu, host, irrelevant, kept = _reference(problem, assignment)
                assert (list(m.memory), list(m.host)) == (gpu, host)
                assert m.irrelevant_changed == irrelevant
                assert m.defaults_kept == kept
                seen.add(tuple(gpu))
    assert len(seen) == len(problems)  # the programs' terms differ


def test_same_is_equality_with_identity_first():
    third = Fraction(1, 3)
    assert mx._same(third, third) and mx._same(third, Fraction(2, 6))
    assert not mx._same(third, Fraction(1, 2)) and not mx._same(1, 2)
    assert mx._same(2, Fraction(2)) and mx._same(None, None) and not mx._same(None, 0)
