"""A refusal's Z3 model, its core finder and its Z3 context, and the refused problem
with the search set-up it kept for its copies, are freed by reference counting when
the plan returns (plan/run.py `_let_go`, solver/fixes.py `release`), not left for
the cyclic collector: the MCP server's long-lived process holds no refusal's Z3 state
or tables between calls, whether or not a collection runs."""

from __future__ import annotations

import gc
import weakref

from kbsolve import api
from kbsolve.plan import run
from tests.plans import shipped_kb


def test_a_refusals_z3_model_context_and_problem_go_with_the_plan(monkeypatch):
    kept: list = []
    original = run.solve

    def recording(*args, **kwargs):
        outcome = original(*args, **kwargs)
        if outcome.model is not None:
            kept.append((weakref.ref(outcome.model), weakref.ref(outcome.model.c.ctx),
                         weakref.ref(args[0])))
        return outcome

    monkeypatch.setattr(run, "solve", recording)
    was = gc.isenabled()
    gc.disable()
    try:
        plan = api.solve({"gpus": "1x4090", "model": "llama3-70b", "top": 0}, shipped_kb())
        assert plan.status == "infeasible" and plan.core and plan.fixes
        # its first consent fix names the flag test_consent.py's fixed query allows
        allow = [f.allow for f in plan.fixes if f.kind == "allow"]
        assert allow and allow[0] == ["quantization"]
        assert len(kept) == 1
        model, context, problem = kept[0]
        assert model() is None and context() is None and problem() is None
    finally:
        if was:
            gc.enable()
