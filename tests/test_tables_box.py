"""A table's levels from its allowed cells alone (program/tables.py `_box`): on
real searches, every level built from the box reads, to the bit and the type,
the cells reduced from the whole hidden layout as before; a NaN or a
-0.0 among the allowed cells keeps the whole-layout path."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program import tables as T
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search, why_masks

QUERIES = [
    {"gpus": "8xA100", "model": "qwen3-8b"},
    {"gpus": "8xH100", "model": "flux1-dev"},
]


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _whole_layout(table) -> tuple:
    """The layout as _hidden makes it from the whole table (the path the box stands for)."""
    _, perm, masks, _ = table._full
    low = table.array.astype(np.int8) if table.kind == "bool" else table.array
    low = np.transpose(low, perm) if perm != sorted(perm) else low
    left_out = T._left_out(masks)
    if not left_out:
        return low, low
    if table.kind == "num" and table.need != "both":
        low = T._hidden(low, left_out, np.inf if table.need == "low" else -np.inf)
        return low, low
    if table.kind == "num":
        return T._hidden(low, left_out, np.inf), T._hidden(low, left_out, -np.inf)
    return T._hidden(low, left_out, 1), T._hidden(low, left_out, 0)


def _whole_level(table, j: int) -> tuple:
    """Level j as _level reduced it from the whole layout, flat (_flat)."""
    low, high = _whole_layout(table)
    if j < low.ndim:
        if table.need == "low":
            low = high = T._reduced(np.fmin, low, j)
        elif table.need == "high":
            low = high = T._reduced(np.fmax, high, j)
        else:
            low, high = T._reduced(np.fmin, low, j), T._reduced(np.fmax, high, j)
        low, high = T._array(low), (T._array(high) if high is not low else None)
        high = low if high is None else high
    flat = T._flat(low)
    return low.size, flat, (flat if high is low else T._flat(high))


def _cells(flat, size: int) -> list:
    """Each cell a level reads, with its type and bits (a float's IEEE bytes:
    -0.0 is not 0.0)."""
    values = flat.tolist() if isinstance(flat, np.ndarray) else [flat[at] for at in range(size)]
    types = list(map(type, values))
    if set(types) <= {float, bool}:  # each cell's bits at once (float64 holds a bool exactly)
        return types, np.array(values, dtype=np.float64).tobytes()
    return [(t, struct.pack("d", v) if t is float else v) for t, v in zip(types, values)]


def _same(a, b) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("fields", QUERIES)
def test_levels_from_the_box_read_the_whole_layouts(kb, fields):
    search = Search(resolve(kb, Query(**fields)).problem)
    assert search.prepare()
    key = next(k for a, k in enumerate(search.keys) if search.allowed[a].sum() > 2)
    value = search.p.choices[key][int(np.flatnonzero(search.allowed[search.keys.index(key)])[1])]
    boxed = 0
    for masks, axes in ((search.allowed, search.axes),
                        (why_masks(search, key, value), list(reversed(search.axes)))):
        search.prepare(axes, masks)
        for table in search.cells:
            if not isinstance(table, T.Table) or not table.deps or table.kind == "code":
                continue
            for j in range(len(table._search_deps) + 1):
                table._levels[j] = None
                pairs, low, high, _, listed = table._level(j)
                size, want_low, want_high = _whole_level(table, j)
                assert _cells(low, size) == _cells(want_low, size)
                assert _cells(high, size) == _cells(want_high, size)
                assert (low is high) == (want_low is want_high)
                assert listed == (not isinstance(low, np.ndarray))
            boxed += table._boxed() is not None
    assert boxed > 20  # the box is the path most tables take


@pytest.mark.parametrize("poison", [np.nan, -0.0])
def test_a_nan_or_a_negative_zero_keeps_the_whole_layout(poison):
    array = np.arange(24, dtype=float).reshape(2, 3, 4) + 1
    masks = [np.array([True, False]), np.array([True, False, False]),
             np.array([True, True, False, False])]
    assert T._box(array, "num", [0, 1, 2], masks) is not None
    array[0, 0, 1] = poison
    assert T._box(array, "num", [0, 1, 2], masks) is None
    array[1, 2, 3] = poison  # a left-out cell: the box never reads it
    array[0, 0, 1] = 5.0
    assert T._box(array, "num", [0, 1, 2], masks) is not None


def test_a_box_in_another_order_holds_the_transposed_cells():
    array = np.arange(60, dtype=float).reshape(3, 4, 5)
    perm = [2, 0, 1]  # search order: axis 2, then 0, then 1
    masks = [np.array([False, True, False, False, True]), np.array([True, False, False]),
             np.array([False, False, True, False])]
    kept, box, _, sizes = T._box(array, "num", perm, masks)
    assert sizes == (5, 3, 4)
    assert box.tolist() == [[[array[0, 2, 1]]], [[array[0, 2, 4]]]]
    whole = T._hidden(np.transpose(array, perm), T._left_out(masks), np.inf)
    unboxed, _ = T._unboxed((kept, box, [np.zeros(1, dtype=np.intp)], sizes), 3,
                            (np.inf, np.inf))
    _same(unboxed, whole)


@pytest.mark.parametrize("boxed", [True, False])
def test_a_groups_tables_read_what_table_bound_reads_boxed_or_not(kb, boxed, monkeypatch):
    """The tracker's reads (solver/search.py `_tables`) of levels as lists and
    arrays, built from the box or not: each range Table.bound's."""
    import random

    from kbsolve.solver.search import _bases, _tables
    if not boxed:
        monkeypatch.setattr(T, "_box", lambda *args: None)
    search = Search(resolve(kb, Query(**QUERIES[0])).problem)
    assert search.prepare()
    tracker, rng = search.tracker, random.Random(9)
    kinds = set()
    for k in range(len(search.order)):
        for group in tracker._readers(k) + tracker._time_readers(k):
            kinds.update(type(low) for _, _, low, *_ in group[0])
            for _ in range(4):
                idx = [rng.randrange(len(search.p.choices[search.keys[a]])) for a in search.axes]
                ranges = [None] * len(tracker.cells)
                _tables(ranges, idx[k], group[0], _bases(group, idx))
                for i, *_ in group[0]:
                    assert ranges[i] == tracker.cells[i].bound(k + 1, idx)
    assert kinds == {list, memoryview}  # large levels as the tracker reads them (_indexable)
