"""The command runs in one large frame chunk (cli/__init__.py with_room): a call depth that
swings across a 16 KiB chunk's end maps no fresh chunk each time."""

import resource

import pytest

from kbsolve.cli import with_room

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

    def fails():
        raise LookupError("inner")
    with pytest.raises(LookupError, match="inner"):
        with_room(fails)


def test_deep_calls_under_with_room_take_no_fresh_frame_chunk_each_time():
    plain = _swings()
    if plain < SWINGS // 2:
        pytest.skip(f"this interpreter keeps its frame chunks ({plain} faults)")
    assert with_room(_swings) < SWINGS // 10
