"""Arc consistency's steps over rule tables kept per KB (solver/search.py `Search._step`):
a table over a kept read-only array answers a later query's step from the first one's,
only for that array object, and the domains are those found afresh."""

from __future__ import annotations

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program.program import kept
from kbsolve.program.query import Query, resolve
from kbsolve.program.tables import Table
from kbsolve.solver import search as search_module
from kbsolve.solver.search import Search


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _domains(kb, gpus: str, model: str):
    search = Search(resolve(kb, Query(gpus=gpus, model=model)).problem)
    why: dict = {}
    return search, search.domains(why=why), why


def test_a_later_query_takes_kept_steps_and_finds_the_same_domains(kb, monkeypatch):
    kept(kb, "rule_steps").clear()
    _domains(kb, "8xA100", "qwen3-8b")
    calls = []
    real = search_module.allowed_mask
    monkeypatch.setattr(search_module, "allowed_mask",
                        lambda *a: calls.append(1) or real(*a))
    _, taken, taken_why = _domains(kb, "8xH100", "qwen3-8b")
    with_kept = len(calls)
    kept(kb, "rule_steps").clear()
    calls.clear()
    _, fresh, fresh_why = _domains(kb, "8xH100", "qwen3-8b")
    assert with_kept < len(calls) / 2
    assert [m.tolist() for m in taken] == [m.tolist() for m in fresh]
    assert taken_why == fresh_why


def test_a_kept_step_answers_only_for_its_own_array(kb):
    search, _, _ = _domains(kb, "8xA100", "qwen3-8b")
    array = np.array([[True, False], [False, False]])
    array.flags.writeable = False
    table = Table((0, 1), (2, 2), array, "bool", False)
    masks = [np.ones(2, dtype=bool), np.ones(2, dtype=bool)]
    key = (id(array), table.deps, table.sizes, b"".join(m.tobytes() for m in masks))
    kept(kb, "rule_steps")[key] = (array.copy(), "another array's steps")
    found = search._step(table, masks)
    assert found != "another array's steps"
    assert [(axis, kept_.tolist(), lost) for axis, kept_, lost, _ in found] == \
        [(0, [True, False], [1]), (1, [True, False], [1])]
    assert search._step(table, masks) is found  # kept now for this array
