"""A plan runs with the cyclic collector paused throughout (plan/run.py `plan`), and
leaves it as it found it."""

from __future__ import annotations

import gc

from kbsolve import api
from kbsolve.plan import run
from tests.plans import shipped_kb


def _spy_on(monkeypatch, name: str) -> list[bool]:
    seen: list[bool] = []
    original = getattr(run, name)

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(run, name, spy)
    return seen


def test_the_collector_is_paused_from_the_search_to_the_explanation(monkeypatch):
    searched, explained = _spy_on(monkeypatch, "solve"), _spy_on(monkeypatch, "explain")
    assert gc.isenabled()
    plan = api.solve({"gpus": "1xA100", "model": "qwen3-8b", "top": 0}, shipped_kb())
    assert plan.status == "optimal"
    assert searched == [False] and explained == [False]
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled(monkeypatch):
    gc.disable()
    try:
        api.solve({"gpus": "1xA100", "model": "qwen3-8b", "top": 0}, shipped_kb())
        assert not gc.isenabled()
    finally:
        gc.enable()
