"""A found plan's garbage is freed by reference counting: the plan leaves no cycles for
Python's collector (issue 25). Two kinds did: the search's needs marks (a recursive
closure holding a set per table) and each newly compiled linked level's exec namespace
(the function's globals held the function)."""

from __future__ import annotations

import gc

import pytest

from kbsolve import api
from kbsolve.program import link as link_module


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _cycles_left(run) -> int:
    """The objects the collector finds unreachable after `run`, with the collector off."""
    gc.collect()
    gc.disable()
    try:
        result = run()
        return result, gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("fields", [{"gpus": "1x4090", "model": "qwen2.5-7b"},
                                    {"gpus": "8xA100", "model": "wan14b"}], ids=str)
def test_a_found_plan_leaves_no_cycles(kb, monkeypatch, fields):
    api.solve({"gpus": "1xA100", "model": "qwen3-8b", "top": 0}, kb)  # imports, the KB's reads
    # every linked level compiled afresh, as a new shape's first plan does
    monkeypatch.setattr(link_module, "_MADE", type(link_module._MADE)(4096))
    plan, cycles = _cycles_left(lambda: api.solve(fields, kb))
    assert plan.status == "optimal" and plan.explanation
    assert cycles == 0
