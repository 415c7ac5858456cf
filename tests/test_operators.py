"""The operator table (program/operators.py) is the only one, and its views agree.

Every operator the language accepts (the parser's operators, the resolver's IR,
the shipped KB's formulas) has a signature in dsl/operators.py and every view in
program/operators.py; the places that used to keep their own tables (the exact
evaluator, the tables, the linker, the Z3 compiler, the value bounds, the
resolver's builtins) read theirs from it. On sampled or exhaustive operands the
views agree: exact against scalar within float rounding, vector elementwise
equal to scalar, interval containing every scalar result over its ranges, and
the Z3 term's model value equal to the exact value."""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbsolve.dsl import ir
from kbsolve.dsl import operators as signatures
from kbsolve.dsl import resolve
from kbsolve.dsl.types import BOOL, NUM
from kbsolve.program import evaluate, link, tables
from kbsolve.program import operators as O

ROOT = Path(__file__).resolve().parents[1]
VIEWS = ("exact", "scalar", "vector", "interval", "z3")
NUMERIC = [n for n, o in O.OPERATORS.items() if o.result == "num"]
WHOLE = {"%", "divisible"}  # the resolver takes whole numbers only
BOOLEAN_ARGS = {"not", "and", "or", "implies", "at_most_one", "exactly_one"}


# ---- one table, every view -------------------------------------------------------------

def test_every_signature_has_every_view_and_nothing_else():
    assert set(O.OPERATORS) == set(signatures.SIGNATURES) | {"sum"}
    for name, op in O.OPERATORS.items():
        assert op.name == name
        for view in VIEWS:
            assert callable(getattr(op, view)), (name, view)
        if op.result == "num":
            assert callable(op.z3_value), name
        least, most = op.arity
        assert least >= 1 and (most is None or most >= least)


def test_the_resolver_takes_its_operators_from_the_one_list():
    assert list(resolve.BUILTINS) == list(signatures.CALLS)
    assert set(resolve.TYPING) == set(signatures.CALLS)
    assert resolve._BOOL_OPS == signatures.CONNECTIVES == {"and", "or", "implies"}
    # every operator name the resolver writes into the IR, and every one the parser makes
    text = (ROOT / "dsl" / "resolve.py").read_text()
    written = set(re.findall(r'ir\.Op\("([^"]+)"', text))
    parsed = set(re.findall(r'_binary\("([^"]+)"\)', (ROOT / "dsl" / "parse.py").read_text()))
    compared = set(re.findall(r'"(==|!=|<=|>=|<|>)"', (ROOT / "grammar.lark").read_text()))
    assert written and parsed and compared
    assert written | parsed | compared <= set(signatures.SIGNATURES)


def test_the_shipped_kb_uses_only_operators_of_the_table():
    from kbsolve import api
    kb = api.load_kb()
    roots = [let.expr for let in kb.lets.values()] + [t.expr for t in kb.memory.values()]
    used = {node.op for root in roots for node in ir.walk(root) if isinstance(node, ir.Op)}
    assert len(used) >= 10
    assert used <= set(signatures.SIGNATURES)


def test_the_places_that_read_views_read_the_tables_views():
    assert tables._VECTOR is O.VECTOR and tables._SCALAR is O.SCALAR
    assert tables.FRAGILE is O.FRAGILE and tables.interval is O.interval
    assert link.INLINE == {n for n, o in O.OPERATORS.items() if o.inline}
    assert set(link._WRITERS) == link.INLINE
    assert O.FRAGILE == {"<", "<=", ">", ">=", "==", "!=", "ceil", "floor", "%", "divisible"}
    assert O.COMPARISONS == {"<", "<=", ">", ">=", "==", "!="}
    # the exact evaluator builds each operator's closure from its exact view
    x = ir.Const(Fraction(7, 2), NUM)
    kb = SimpleNamespace()
    for name, expected in (("+", Fraction(7)), ("min", Fraction(7, 2)), ("<", False)):
        node = ir.Op(name, (x, x), BOOL if name == "<" else NUM)
        assert evaluate.closure(kb, node)((None, {}, {}, {})) == expected


def test_division_by_zero_is_the_evaluators_diagnostic():
    from kbsolve.diagnostics import KbError
    node = ir.Op("/", (ir.Const(1, NUM), ir.Const(0, NUM)), NUM)
    with pytest.raises(KbError, match="division by zero"):
        evaluate.closure(SimpleNamespace(), node)((None, {}, {}, {}))


# ---- the views agree --------------------------------------------------------------------

FRACTIONS = st.fractions(min_value=-50, max_value=50, max_denominator=8)
WHOLES = st.integers(min_value=-40, max_value=40).map(Fraction)


def _operands(name: str, count: int):
    if name in BOOLEAN_ARGS:
        return st.lists(st.booleans(), min_size=count, max_size=count)
    if name == "if":
        return st.tuples(st.booleans(), FRACTIONS, FRACTIONS).map(list)
    return st.lists(WHOLES if name in WHOLE else FRACTIONS, min_size=count, max_size=count)


def _count(op) -> int:
    least, most = op.arity
    return least if most == least else least + 1


def _cases():
    return st.sampled_from(sorted(O.OPERATORS)).flatmap(
        lambda name: st.tuples(st.just(name), _operands(name, _count(O.OPERATORS[name]))))


def _floats(values):
    return [v if isinstance(v, bool) else float(v) for v in values]


def _close(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_cases())
def test_exact_and_scalar_agree_within_float_rounding(case):
    name, values = case
    if name == "/" and values[1] == 0:
        with pytest.raises(ZeroDivisionError):
            O.exact_value(name, *values)
        assert math.isnan(O.SCALAR[name](*_floats(values)))
        return
    exact = O.exact_value(name, *values)
    assert _close(O.SCALAR[name](*values), exact)  # on Fractions: the same value
    assert _close(O.SCALAR[name](*_floats(values)), exact)  # on floats: within rounding


def _same(a, b) -> bool:
    return a == b or a != a and b != b  # nan: undefined in both


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(O.OPERATORS)), st.data())
def test_vector_is_scalar_elementwise(name, data):
    op = O.OPERATORS[name]
    rows = data.draw(st.lists(_operands(name, _count(op)), min_size=1, max_size=6))
    for exact in (False, True):
        columns = list(zip(*rows))
        arrays = []
        for column in columns:
            if isinstance(column[0], bool):
                arrays.append(np.array(column, dtype=bool))
            elif exact:
                array = np.empty(len(column), dtype=object)
                array[:] = list(column)
                arrays.append(array)
            else:
                arrays.append(np.array([float(v) for v in column]))
        with np.errstate(all="ignore"):
            out = np.broadcast_to(np.asarray(op.vector(*arrays)), (len(rows),)).tolist()
        for row, got in zip(rows, out):
            operands = list(row) if exact else _floats(row)
            assert _same(got, op.scalar(*operands)), (name, row, exact, got)


def _kinds(name: str, count: int) -> list[str]:
    if name in BOOLEAN_ARGS:
        return ["bool"] * count
    if name == "if":
        return ["bool", "num", "num"]
    return ["whole" if name in WHOLE else "num"] * count


def _range(kind: str):
    if kind == "bool":
        return st.sampled_from([(0, 0), (1, 1), (0, 1)])
    values = WHOLES if kind == "whole" else FRACTIONS
    return st.tuples(values, values).map(lambda r: (min(r), max(r)))


def _inside(kind: str, lo, hi, t: float, exact: bool):
    """A point of [lo, hi] (t in [0, 1]: 0 is lo, 1 is hi)."""
    if kind == "bool":
        return bool(lo if t < 0.5 else hi)
    if kind == "whole":
        return Fraction(round(lo + (hi - lo) * Fraction(t)))
    point = lo + (hi - lo) * (Fraction(t) if exact else t)
    return min(max(point, lo), hi)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(sorted(O.OPERATORS)), st.data())
def test_interval_contains_every_scalar_result(name, data):
    """Exact ranges (Fractions) contain every exact result; float ranges every float
    result up to the rounding of its last bits (`/`'s range multiplies by the
    divisor's inverse where the scalar divides, and the search compares with its
    tolerance)."""
    op = O.OPERATORS[name]
    kinds = _kinds(name, _count(op))
    ranges = [data.draw(_range(kind)) for kind in kinds]
    picks = data.draw(st.lists(st.tuples(*[st.floats(0, 1) for _ in kinds]), min_size=1,
                               max_size=8))
    corners = list(itertools.product(*[(0.0, 1.0)] * len(kinds)))
    for exact in (True, False):
        given_ranges = ranges if exact else [
            r if kind == "bool" else (float(r[0]), float(r[1])) for kind, r in zip(kinds, ranges)]
        low, high = O.interval(name, list(given_ranges), exact)
        for pick in corners + picks:
            point = [_inside(kind, lo, hi, t, exact)
                     for kind, (lo, hi), t in zip(kinds, given_ranges, pick)]
            value = op.scalar(*point)
            if isinstance(value, float) and value != value:
                continue  # undefined there (a division by 0)
            slack = 0 if exact else 1e-12 * max(1.0, abs(float(value)))
            assert low - slack <= value <= high + slack, \
                (name, given_ranges, point, value, (low, high))


# ---- Z3: the term's model value is the exact value ----------------------------------------

def _compiler(choices: dict):
    from kbsolve.solver.compile import Compiler
    kb = SimpleNamespace()  # the evaluator's closure cache lives on it
    problem = SimpleNamespace(choices=choices, fixed={}, kb=kb,
                              evaluator=evaluate.Evaluator(kb, "t", {}))
    return Compiler(problem)


def _z3_value(z3, model, term):
    value = model.eval(term, model_completion=True)
    if z3.is_bool(value):
        return z3.is_true(value)
    return Fraction(value.numerator_as_long(), value.denominator_as_long())


NUMBERS = [Fraction(-3), Fraction(0), Fraction(1, 2), Fraction(2), Fraction(5)]
DIVISORS = [Fraction(-2), Fraction(0), Fraction(1), Fraction(3)]


@pytest.mark.parametrize("name", sorted(O.OPERATORS))
def test_z3_model_value_is_the_exact_value(name):
    import z3
    op = O.OPERATORS[name]
    count = _count(op)
    if name in BOOLEAN_ARGS:
        domains = [[False, True]] * count
    elif name == "if":
        domains = [[False, True], NUMBERS, DIVISORS]
    elif name in WHOLE or name == "/":
        domains = [NUMBERS if name == "/" else [Fraction(v) for v in (-3, 0, 4, 6)],
                   DIVISORS]
    else:
        domains = [NUMBERS] + [DIVISORS] * (count - 1)
    keys = [f"t.x{i}" for i in range(count)]
    c = _compiler(dict(zip(keys, domains)))
    types = [BOOL if isinstance(d[0], bool) else NUM for d in domains]
    node = ir.Op(name, tuple(ir.OptionRef(k, t) for k, t in zip(keys, types)),
                 BOOL if op.result == "bool" else NUM)
    term = op.z3(z3, c, node)
    solver = z3.Solver(ctx=c.ctx)
    solver.add(*c.domain_constraints())
    checked = 0
    for combo in itertools.product(*domains):
        solver.push()
        solver.add(*[c.equals(k, v) for k, v in zip(keys, combo)])
        assert solver.check() == z3.sat
        found = _z3_value(z3, solver.model(), term)
        solver.pop()
        if op.divides and combo[1] == 0:
            assert found == op.z3_value(*combo) == 0  # the compiler's x / 0 = 0
            continue
        assert found == O.exact_value(name, *combo), (name, combo, found)
        if op.z3_value is not None:
            assert op.z3_value(*combo) == found
        checked += 1
    assert checked == math.prod(len(d) for d in domains) - (
        sum(1 for d in domains[1] if d == 0) * len(domains[0]) if op.divides else 0)
