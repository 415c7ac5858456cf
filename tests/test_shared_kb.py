"""One KB load per test run, shared read-only (issue 25 item 9): tests that read the
shipped KB get the one object tests/conftest.py built, and a change to it is caught."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from kbsolve import api
from plans import fingerprint, shipped_kb


def test_every_load_of_the_shipped_kb_is_the_one_shared_object():
    first = api.load_kb()
    assert api.load_kb() is first
    assert shipped_kb() is first


def test_the_shared_kb_cannot_be_rebound():
    kb = shipped_kb()
    with pytest.raises(dataclasses.FrozenInstanceError):
        kb.options = {}
    option = next(iter(kb.options.values()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        option.default = "changed"


def test_the_fingerprint_sees_a_change_inside_the_kb():
    """What conftest compares at the end of the run: a change deep inside (a catalog
    entry's field, a dict entry) changes it. Made on a copy, never the shared KB."""
    copy = pickle.loads(pickle.dumps(shipped_kb()))
    before = fingerprint(copy)
    assert fingerprint(copy) == before
    gpu = copy.catalog.gpu("A100")
    gpu.memory_gib = gpu.memory_gib + 1
    changed = fingerprint(copy)
    assert changed != before
    copy.options.pop(next(iter(copy.options)))
    assert fingerprint(copy) != changed
