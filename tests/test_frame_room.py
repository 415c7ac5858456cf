"""The command and api.solve run in one large frame chunk (api.py with_room): a call depth
that swings across a 16 KiB chunk's end maps no fresh chunk each time."""

import resource
import sys

import pytest

from kbsolve import api
from kbsolve.api import FRAME_ROOM, with_room

DEPTH = 300  # frames of _down, ~30 kB: past a 16 KiB chunk's end from any starting depth
SWINGS = 400


def _down(n: int) -> int:
    return 0 if n == 0 else _down(n - 1) + 1


def _swings() -> int:
    """Page faults of SWINGS calls DEPTH frames deep."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(SWINGS):
        assert _down(DEPTH) == DEPTH
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_with_room_returns_the_function_s_value_and_raises_its_errors():
    assert with_room(lambda: 7) == 7
    assert api._ROOMY.__code__.co_stacksize >= FRAME_ROOM

    def fails():
        raise LookupError("inner")
    with pytest.raises(LookupError, match="inner"):
        with_room(fails)


def test_deep_calls_under_with_room_take_no_fresh_frame_chunk_each_time():
    plain = _swings()
    if plain < SWINGS // 2:
        pytest.skip(f"this interpreter keeps its frame chunks ({plain} faults)")
    assert with_room(_swings) < SWINGS // 10


def _in_room() -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is api._ROOMY.__code__:
            return True
        frame = frame.f_back
    return False


def test_api_solve_plans_in_a_roomy_frame(monkeypatch):
    import kbsolve.plan.run
    seen = []
    kb = object()

    def plan(knowledge, query, solver):
        seen.append((knowledge is kb, query.gpus, solver, _in_room()))
        return "planned"
    monkeypatch.setattr(kbsolve.plan.run, "plan", plan)
    assert not _in_room()
    assert api.solve({"gpus": "8xA100", "model": "wan14b"}, kb, solver="enumerate") == "planned"
    assert seen == [(True, "8xA100", "enumerate", True)]
