"""A refusal's Z3 model, its core finder and its Z3 context are freed by reference
counting when the plan returns (solver/fixes.py `release`), not left for the cyclic
collector: the MCP server's long-lived process holds no refusal's Z3 state between
calls, whether or not a collection runs."""

from __future__ import annotations

import gc
import weakref

from kbsolve import api
from kbsolve.plan import run
from tests.plans import shipped_kb


def test_a_refusals_z3_model_and_context_go_with_the_plan(monkeypatch):
    kept: list = []
    original = run.solve

    def recording(*args, **kwargs):
        outcome = original(*args, **kwargs)
        if outcome.model is not None:
            kept.append((weakref.ref(outcome.model), weakref.ref(outcome.model.c.ctx)))
        return outcome

    monkeypatch.setattr(run, "solve", recording)
    was = gc.isenabled()
    gc.disable()
    try:
        plan = api.solve({"gpus": "1x4090", "model": "llama3-70b", "top": 0}, shipped_kb())
        assert plan.status == "infeasible" and plan.core and plan.fixes
        assert len(kept) == 1
        model, context = kept[0]
        assert model() is None and context() is None
    finally:
        if was:
            gc.enable()
