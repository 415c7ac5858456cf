"""A hardware candidate after one that fits is first tried with that shape's plan
(solver/fixes.py `_witnessed`): where the plan, or it with one option changed,
measures feasible, the first-plan search would have found a plan too, so the
fixes are the ones every candidate's search gives."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.plan.run import _bigger
from kbsolve.program.query import Query, resolve
from kbsolve.solver import fixes


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def test_a_fitting_shapes_plan_decides_the_next_shape(kb, monkeypatch):
    candidates = _bigger(kb, resolve(kb, Query(gpus="2x4090", model="qwen3-30b-a3b",
                                               task="dpo")))
    decided = []
    witnessed = fixes._witnessed

    def recorded(problem, plan):
        fits = witnessed(problem, plan)
        decided.append(fits)
        if fits:  # the search agrees: some plan fits this shape
            assert fixes._first_plan(problem)[0]
        return fits

    monkeypatch.setattr(fixes, "_witnessed", recorded)
    found = fixes.hardware(candidates)
    assert decided == [True]  # the second fitting shape took no search
    monkeypatch.setattr(fixes, "_witnessed", lambda problem, plan: False)
    assert found == fixes.hardware(candidates)  # every candidate searched
    assert [f.gpus for f in found] == ["8xRTX-4090", "2x8xRTX-4090"]


def test_a_plan_that_does_not_fit_says_nothing(kb):
    (_, build), = _bigger(kb, resolve(kb, Query(gpus="1x4090", model="llama3.1-405b",
                                                task="sft")))[:1]
    problem = build()
    plan = {**problem.fixed, **{key: values[0] for key, values in problem.choices.items()}}
    assert not fixes._witnessed(problem, plan)  # the shape fits nothing
    assert not fixes._witnessed(problem, {})  # a plan without the shape's options
    assert not fixes._first_plan(problem)[0]
