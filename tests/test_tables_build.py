"""The tables' build shortcuts (program/tables.py) against the general code they stand
for, on real queries: a combination of constant tables (no option) is the array the
broadcasting path builds, and masked() finds the same rules through rule_tables'
places by option as by testing every rule in order."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from kbsolve import api
from kbsolve.dsl import ir
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.program import kept
from kbsolve.program.query import Query, resolve
from kbsolve.program import tables as tables_module
from kbsolve.program.tables import Expr, Table, Tables, _and_into, masked, rule_tables
from kbsolve.solver.search import Search

QUERIES = [
    {"gpus": "8xA100", "model": "qwen3-8b"},
    {"gpus": "1x4090", "model": "llama3-70b"},
    {"gpus": "8xH100", "model": "flux1-dev"},
    {"gpus": "8xH100", "model": "qwen2.5-7b", "framework": "pytorch"},
]


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _roots(problem, tables: Tables) -> list:
    """Every rule and memory, speed and preference formula of the problem, tabled."""
    program = problem.program
    nodes = [r.constraint for r in problem.rules] + [t.expr for t in program.memory] + \
        [t.expr for t in program.speed] + [t.expr for t in program.preferences]
    return [tables.cell(n) for n in nodes]


def _cells(root) -> list:
    found = {id(root): root}
    if isinstance(root, Expr):
        root.tables(found)
    return list(found.values())


def _same(a, b) -> None:
    assert type(a) is type(b) and a.deps == b.deps and a.kind == b.kind and a.exact == b.exact
    if isinstance(a, Table):
        assert a.array.shape == b.array.shape and a.array.dtype == b.array.dtype
        assert a.array.ravel().tolist() == b.array.ravel().tolist() or \
            np.array_equal(a.array, b.array, equal_nan=True)
    else:
        assert a.op == b.op and len(a.args) == len(b.args)
        for x, y in zip(a.args, b.args):
            _same(x, y)


@pytest.mark.parametrize("fields", QUERIES, ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_constant_combinations_are_the_general_paths_arrays(kb, fields, monkeypatch):
    problem = resolve(kb, Query(**fields)).problem
    keys = sorted(problem.choices)
    fast = _roots(problem, Tables(problem, keys))
    constants = [0]
    general = Tables.combined

    def counted(self, op, args, kind, exact):
        constants[0] += all(isinstance(a, Table) and not a.deps for a in args)
        return general(self, op, args, kind, exact)

    monkeypatch.setattr(Tables, "combine", counted)
    kept(problem.kb, "tables").clear()  # built again, not taken from the first build
    slow = _roots(problem, Tables(problem, keys))
    assert constants[0] > 100  # the shortcut stood for many combinations here
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        _same(a, b)


@pytest.mark.parametrize("fields", QUERIES, ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_masked_finds_the_rules_a_scan_in_order_finds(kb, fields):
    search = Search(resolve(kb, Query(**fields)).problem)
    rules = [c for _, c in search.rules]
    indexed, plain = rule_tables(rules), list(rule_tables(rules))
    sizes = search.tables.sizes
    summands = [c for root in search.memory + [search.time] for c in _cells(root)
                if isinstance(c, Table) and c.kind == "num" and c.deps]
    folded = 0
    for limit in (64, 4096, 1 << 15):  # a small limit stops folding part way
        for cell in summands:
            a, b = masked(cell, indexed, sizes, limit), masked(cell, plain, sizes, limit)
            folded += a is not cell
            _same(a, b)
            assert a.array.size <= max(limit, cell.array.size)
    assert folded > 10



def _broadcast_and(ok, part, spans) -> None:
    """The plain path _and_into stands for: part broadcast over ok's axes."""
    np.logical_and(ok, part.reshape([n if s else 1 for n, s in zip(ok.shape, spans)]), out=ok)


@pytest.mark.parametrize("shape", [(7, 2, 4, 5, 3, 6, 2, 2), (2, 3, 70), (5,), (3, 2)])
def test_and_into_is_the_broadcast_and(shape):
    rng = np.random.default_rng(7)
    start = rng.random(shape) > 0.2
    for spans in itertools.product([False, True], repeat=len(shape)):
        part = rng.random([n for n, s in zip(shape, spans) if s]) > 0.3
        fast, plain = start.copy(), start.copy()
        _and_into(fast, part, list(spans))
        _broadcast_and(plain, part, list(spans))
        assert np.array_equal(fast, plain) and fast.flags.c_contiguous


@pytest.mark.parametrize("fields", QUERIES, ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_masked_tables_are_the_broadcast_ands(kb, fields, monkeypatch):
    search = Search(resolve(kb, Query(**fields)).problem)
    rules = [c for _, c in search.rules]
    sizes = search.tables.sizes
    summands = [c for root in search.memory + [search.time] for c in _cells(root)
                if isinstance(c, Table) and c.kind == "num" and c.deps]
    fast = [masked(cell, rule_tables(rules), sizes) for cell in summands]
    monkeypatch.setattr(tables_module, "_and_into", _broadcast_and)
    plain = [masked(cell, rule_tables(rules), sizes) for cell in summands]
    assert sum(a is not cell for a, cell in zip(fast, summands)) > 10
    for a, b in zip(fast, plain):
        _same(a, b)

def test_a_constants_table_is_built_once_per_kb_and_a_codes_table_per_query(kb):
    first, second = (resolve(kb, Query(**f)).problem for f in QUERIES[:2])
    a, b = Tables(first, sorted(first.choices)), Tables(second, sorted(second.choices))
    _roots(first, a)
    _roots(second, b)
    numbers = [n for n in _nodes(first) if isinstance(n, ir.Const)
               and not isinstance(n.value, str)]
    words = [n for n in _nodes(first) if isinstance(n, ir.Const) and isinstance(n.value, str)]
    assert numbers and words
    for node in numbers:
        for exact in (False, True):
            assert a.cell(node, exact) is b.cell(node, exact)
            assert a.cell(node, exact).values == [(Fraction if exact else float)(node.value)]
    for node in words:  # an enum's code: a table per query (numbered once per KB)
        assert a.cell(node) is not b.cell(node)
        assert a.cell(node).values == [a.codes[node.value]]


def _nodes(problem) -> list:
    roots = [r.constraint for r in problem.rules] + [t.expr for t in problem.program.memory]
    return [n for root in roots for n in ir.walk(root)]


@pytest.mark.parametrize("fields", QUERIES, ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_spread_is_each_values_least_over_the_allowed_cells(kb, fields):
    search = Search(resolve(kb, Query(**fields)).problem)
    assert search.prepare()
    allowed = search.allowed
    tables = [c for c in search.cells if isinstance(c, Table) and c.kind == "num" and c.deps]
    assert any(len(t.deps) > 2 for t in tables)
    for table in tables:
        array = table.floats().copy()
        for i, axis in enumerate(table.deps):  # a value not allowed hides its cells
            array[(slice(None),) * i + (~allowed[axis],)] = np.inf
        expected = {}
        for i, axis in enumerate(table.deps):
            others = tuple(j for j in range(len(table.deps)) if j != i)
            least = array.min(axis=others) if others else array
            least = least[allowed[axis]]
            least = least[np.isfinite(least)]
            if least.size:
                expected[axis] = float(least.max()) - float(array.min())
        assert table.spread(allowed) == expected


def test_shared_tables_are_the_tables_built_afresh(kb):
    """A table kept across queries (Tables._shared_build) is the table that query
    builds with nothing kept: queries of one framework on other GPUs and models
    (some of their formulas read the same inputs, some do not) built one after
    another, then each again with the others' tables kept."""
    grid = QUERIES + [{"gpus": "1xA100", "model": "qwen3-8b"},
                      {"gpus": "8xA100", "model": "llama3-70b"},
                      {"gpus": "8xA100", "model": "qwen3-8b", "task": "dpo"},
                      {"gpus": "8xH100", "model": "llama3-70b", "framework": "pytorch"}]
    problems = [resolve(kb, Query(**fields)).problem for fields in grid]
    kept(kb, "tables").clear()
    first = [_roots(p, Tables(p, sorted(p.choices))) for p in problems]
    again = [_roots(p, Tables(p, sorted(p.choices))) for p in problems]
    shared = 0
    for problem, a, b in zip(problems, first, again):
        kept(kb, "tables").clear()
        fresh = _roots(problem, Tables(problem, sorted(problem.choices)))
        assert len(a) == len(b) == len(fresh)
        for x, y, z in zip(a, b, fresh):
            _same(x, z)
            _same(y, z)
            # a new Table (its layouts are its search's: constants' aside) over the kept array
            assert y is not x or isinstance(x, Table) and not x.deps
            shared += isinstance(y, Table) and y is not x and y.array is x.array
    assert shared > 100


def test_remembering_is_the_evaluator_at_each_assignment(kb):
    """Evaluator.remembering (metrics.measure's reads) gives what a fresh run gives,
    formula by formula, at many assignments of one problem sharing one store."""
    problem = resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem
    nodes = [r.constraint for r in problem.rules] + \
        [t.expr for t in (*problem.program.memory, *problem.program.speed,
                          *problem.program.work, *problem.program.preferences)]
    keys = sorted(problem.choices)[:4]
    fresh = Evaluator(kb, problem.framework, problem.facts)
    checked = 0
    for values in itertools.islice(itertools.product(*[problem.choices[k] for k in keys]), 40):
        assignment = {**problem.fixed, **{k: problem.choices[k][0] for k in problem.choices},
                      **dict(zip(keys, values))}
        run = problem.evaluator.remembering(assignment)
        for node in nodes:
            try:
                expected = fresh.run(node, assignment)
            except Exception as error:  # the same failure either way
                with pytest.raises(type(error)):
                    run(node)
                continue
            assert run(node) == expected
            checked += 1
    assert checked > 1000


def _expected_range(table, places: list[int], masks: list, k: int, idx: list[int]):
    """A num table's (low, high) with the places before k set (idx by place):
    the least and greatest cell over the allowed completions, +inf and -inf
    where a set value is not allowed (its cells are hidden)."""
    array = table.floats()
    select = []
    for axis_place, mask in zip(places, masks):
        if axis_place < k:
            value = idx[axis_place]
            if not mask[value]:
                return np.inf, -np.inf
            select.append([value])
        else:
            select.append(np.flatnonzero(mask))
    cells = array[np.ix_(*select)]
    return float(np.fmin.reduce(cells, axis=None)), float(np.fmax.reduce(cells, axis=None))


def test_a_table_is_laid_out_when_first_read_with_the_ranges_of_its_masks(kb):
    """Table.prepare lays a table out (its order, its hidden values) only when a
    level is first built, and the levels it builds then are the least and
    greatest allowed cells, on the problem's masks and on narrowed ones."""
    from kbsolve.solver.search import why_masks
    search = Search(resolve(kb, Query(**QUERIES[0])).problem)
    assert search.prepare()
    key = next(k for a, k in enumerate(search.keys) if search.allowed[a].sum() > 2)
    value = search.p.choices[key][int(np.flatnonzero(search.allowed[search.keys.index(key)])[1])]
    narrowed = why_masks(search, key, value)
    rng = np.random.default_rng(7)
    read = 0
    for masks, axes in ((search.allowed, search.axes), (narrowed, list(reversed(search.axes)))):
        search.prepare(axes, masks)
        position = [0] * len(axes)
        for place, axis in enumerate(axes):
            position[axis] = place
        fresh = [c for c in search.cells if isinstance(c, Table) and c.kind == "num"
                 and c.deps and c._full[0] is None and c._full[3] is tables_module._MISS]
        assert fresh  # prepared, not laid out yet
        for table in fresh[:40]:
            places = [position[a] for a in table.deps]
            masks_ = [masks[a] for a in table.deps]
            for k in sorted({0, min(places) + 1, max(places) + 1}):
                idx = [int(rng.integers(len(m))) for m in (masks[a] for a in axes)]
                low, high = table.bound(k, idx)
                want = _expected_range(table, places, masks_, k, idx)
                if table.need in ("low", "both"):
                    assert low == want[0]
                if table.need in ("high", "both"):
                    assert high == want[1]
                read += 1
            # laid out whole, or as its allowed cells (tables.py _box)
            assert table._full[0] is not None or table._full[3] not in (None, tables_module._MISS)
    assert read > 40



def test_rule_masks_kept_across_searches_are_the_masks_made_afresh(kb, monkeypatch):
    from kbsolve.solver import search as search_module
    made = [0]
    and_rules = tables_module._and_rules

    def counted(*args):
        made[0] += 1
        return and_rules(*args)

    monkeypatch.setattr(tables_module, "_and_rules", counted)
    kept(kb, "rule_masks").clear()
    searches = []
    for fields in (QUERIES[0], QUERIES[1], QUERIES[0]):
        made[0] = 0
        searches.append((Search(resolve(kb, Query(**fields)).problem), made[0]))
    assert searches[0][1] > 10 and searches[2][1] < searches[0][1] // 2  # kept masks taken
    monkeypatch.setattr(search_module, "rule_tables", lambda rules, _kept: rule_tables(rules))
    for fields, (search, _) in zip((QUERIES[0], QUERIES[1], QUERIES[0]), searches):
        afresh = Search(resolve(kb, Query(**fields)).problem)
        assert len(afresh.tracked) == len(search.tracked)
        for a, b in zip(search.tracked, afresh.tracked):
            _same(a, b)


def test_a_build_warns_of_no_float_error(kb):
    """Tables.cell turns numpy's float warnings off once for a whole build (the
    combinations inside enter no errstate of their own): an overflow, over
    constants and over an option, warns of nothing and gives inf."""
    import warnings
    from kbsolve.dsl.types import NUM
    problem = resolve(kb, Query(**QUERIES[0])).problem
    key = next(k for k, values in sorted(problem.choices.items())
               if all(type(v) is not bool and isinstance(v, (int, Fraction)) for v in values)
               and max(values) > 1)
    huge = ir.Const(Fraction(10) ** 308, NUM)
    over_constants = ir.Op("*", (huge, huge), NUM)
    over_option = ir.Op("*", (huge, ir.OptionRef(key, NUM)), NUM)
    tables = Tables(problem, sorted(problem.choices))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        constant, varying = tables.cell(over_constants), tables.cell(over_option)
    assert constant.values == [float("inf")]
    assert float("inf") in varying.values and varying.deps == (tables.axis[key],)


def test_a_table_read_on_one_side_is_laid_out_once_as_both(kb):
    """A num table the search reads on one side only (`need` low or high) hides
    the values its masks leave out on that side alone and reads that array as
    both: on every allowed value its full level is the two-sided layout's, and a
    left-out value reads its side's hidden end."""
    search = Search(resolve(kb, Query(**QUERIES[0])).problem)
    assert search.prepare()
    one_sided = 0
    for table in search.cells:
        if not isinstance(table, Table) or table.kind != "num" or not table.deps:
            continue
        low, high = table._laid_out()
        masks = table._full[2]
        if table.need == "both" or all(m.all() for m in masks):
            continue
        one_sided += 1
        assert low is high
        need = table.need
        table.need = "both"
        table._full[0] = None
        both_low, both_high = table._laid_out()
        table.need = need
        table._full[0] = (low, high)
        allowed = np.ix_(*[np.flatnonzero(m) for m in masks])
        assert np.array_equal(low[allowed], both_low[allowed], equal_nan=True)
        assert np.array_equal(low[allowed], both_high[allowed], equal_nan=True)
        hidden = both_low if need == "low" else both_high
        assert np.array_equal(low, hidden, equal_nan=True)
    assert one_sided > 10
