"""clash()'s arc consistency (solver/search.Search.domains) keeps each rule
table's step per Search (`_supports`): an explanation asks it again for value
after value, and most tables meet the same masks each time. The kept steps must
give the masks and the `why` (the rules a core names) that the step computed
afresh gives."""

from __future__ import annotations

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.program.tables import Table, allowed_mask
from kbsolve.solver import search as search_module
from kbsolve.solver.search import Search

QUERIES = [Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="1x4090", model="llama3-70b"),
           Query(gpus="4xL40S", model="flux1-dev")]


@pytest.fixture(scope="module")
def searches():
    kb = api.load_kb()
    out = []
    for query in QUERIES:
        search = Search(resolve(kb, query).problem)
        search.prepare()
        out.append(search)
    return out


def _domains_reference(search, fixed, why, steps=None):
    """Search.domains as written before its steps were kept: each table's
    supports computed afresh."""
    p = search.p
    allowed = []
    for key in search.keys:
        values = p.choices[key]
        wanted = [fixed[key]] if key in fixed else [p.pinned[key]] if key in p.pinned \
            else values
        allowed.append(np.array([v in wanted for v in values], dtype=bool))
    tables = [(name, c) for name, c in search.rules if isinstance(c, Table)]
    changed = True
    while changed:
        changed = False
        for name, cell in tables:
            if not cell.deps:
                if not cell.values[0]:
                    why["empty"] = name
                    return None
                continue
            masked_ = cell.array & allowed_mask(cell.sizes, [allowed[a] for a in cell.deps])
            if steps is not None:
                steps.append(1)
            for i, axis in enumerate(cell.deps):
                others = tuple(j for j in range(len(cell.deps)) if j != i)
                support = masked_.any(axis=others) if others else masked_
                lost = allowed[axis] & ~support
                if lost.any():
                    for value in np.flatnonzero(lost):
                        why.setdefault((axis, int(value)), name)
                    allowed[axis] = allowed[axis] & support
                    changed = True
                    if not allowed[axis].any():
                        why["empty"] = name
                        return None
    return allowed


def _questions(search):
    p = search.p
    for key in search.keys:
        if key not in p.pinned:
            for value in p.choices[key]:
                yield key, value


def test_kept_table_steps_give_the_masks_and_rules_of_fresh_ones(searches, monkeypatch):
    """Every value of every open option, asked in turn (so later questions read
    kept steps): the same masks, the same `why` in the same order, the same
    emptied domains; some question empties one (a core is named), and fewer
    than half the fresh steps' tables are and-ed."""
    built = []
    real = search_module.allowed_mask
    monkeypatch.setattr(search_module, "allowed_mask",
                        lambda sizes, masks: built.append(1) or real(sizes, masks))
    emptied, fresh_steps = 0, []
    for search in searches:
        for key, value in _questions(search):
            why, expected_why = {}, {}
            found = search.domains({key: value}, why)
            expected = _domains_reference(search, {key: value}, expected_why, fresh_steps)
            assert list(why.items()) == list(expected_why.items()), (key, value)
            if expected is None:
                assert found is None
                emptied += 1
                continue
            assert [m.tolist() for m in found] == [m.tolist() for m in expected], (key, value)
    assert emptied > 0
    assert 0 < len(built) < len(fresh_steps) / 2


def _step_reference(cell, masks):
    masked = cell.array & allowed_mask(cell.sizes, masks)
    out = []
    for i, axis in enumerate(cell.deps):
        others = tuple(j for j in range(len(cell.deps)) if j != i)
        support = masked.any(axis=others) if others else masked
        lost = masks[i] & ~support
        if lost.any():
            out.append((axis, (masks[i] & support).tolist(), np.flatnonzero(lost).tolist(),
                        not (masks[i] & support).any()))
    return out


def _plain(step):
    return [(axis, kept.tolist(), lost, emptied) for axis, kept, lost, emptied in step]


def test_a_step_kept_for_other_masks_is_not_read(searches):
    """The same table with other masks: its own step, not the kept one; asked
    again, the kept one, equal to a fresh step."""
    search = searches[0]

    def narrowed(cell, value):
        masks = [np.ones(size, dtype=bool) for size in cell.sizes]
        masks[0][:] = False
        masks[0][value] = True
        return masks

    cell, value = next((c, v) for _, c in search.rules
                       if isinstance(c, Table) and len(c.deps) >= 2
                       for v in range(c.sizes[0]) if _step_reference(c, narrowed(c, v)))
    every, narrowed = [np.ones(size, dtype=bool) for size in cell.sizes], narrowed(cell, value)
    for masks in (every, narrowed, every, narrowed):
        assert _plain(search._step(cell, masks)) == _step_reference(cell, masks)
    assert _step_reference(cell, every) != _step_reference(cell, narrowed)
    assert search._step(cell, every) is search._step(cell, [m.copy() for m in every])
