"""The operator table: every operator of the checked IR, with each of its views.

One record per operator (dsl/operators.SIGNATURES names them, with their
arity, result and laziness; the tables' n-ary `sum` is added here). Its views:

- exact: Fractions, the reference semantics (program/evaluate.py). A strict
  operator's view is fn(*values); a lazy one's (if, and, or, implies) builds
  the evaluator's closure from its arguments' closures, fn(*closures) ->
  closure(env), so that an argument is read only where it is needed. `/` by 0
  raises ZeroDivisionError; the evaluator reports it at the formula
  (`divides`).
- scalar: one float or Fraction per argument (program/tables.Expr.value);
  undefined results are nan rather than errors.
- vector: numpy arrays broadcast together (program/tables.Tables.combine), in
  float64 or in object arrays of Fractions.
- interval: a sound range (low, high) of the result from its arguments' ranges
  (the search's bounds); booleans range over 0 and 1. The dispatcher
  interval() below handles an enum's unknown range (None) and widens float
  ranges that feed a fragile operation.
- z3: fn(z3, compiler, node) -> the Z3 term (solver/compile.Compiler provides
  num, term, values, table, named, split, by_values, real, boolean, error);
  z3_value: the value that term takes on constant numbers (the compiler's case
  splits over finite value sets; `/` by 0 is 0 there).

Flags: fragile (worked on in exact Fractions by the tables, its float inputs
widened by EPS in interval arithmetic: comparisons, rounding, divisibility);
inline (program/link.py writes its interval view out as straight-line code:
the name of its writer, `_Writer._op_<inline>`); divides (undefined where the
second argument is 0). Every place that needs an operator's meaning reads it
from OPERATORS (or a table made from it once, at import), so a new operator is
one record here and one signature in dsl/operators.py; tests/test_operators.py
checks that every operator has every view and that the views agree.
"""

import math
import operator
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Callable

import numpy as np

from kbsolve.dsl.operators import SIGNATURES, Signature

UNKNOWN = None  # the range of an enum-valued expression


@dataclass(frozen=True)
class Operator:
    """One operator's views: exact, scalar, vector, interval and Z3."""
    signature: Signature
    exact: Callable
    scalar: Callable
    vector: Callable
    interval: Callable
    z3: Callable
    z3_value: Callable | None = None  # numbers only
    fragile: bool = False
    inline: str | None = None
    divides: bool = False

    @property
    def name(self) -> str:
        return self.signature.name

    @property
    def arity(self) -> tuple[int, int | None]:
        return self.signature.least, self.signature.most

    @property
    def result(self) -> str:
        return self.signature.result

    @property
    def lazy(self) -> bool:
        return self.signature.lazy


# ---- exact: Fractions (program/evaluate.py)

def _exact(fn):
    """fn over Fractions: an operand already a Fraction (or a plain int beside one)
    is used as it is, the rest converted; the result is a Fraction either way."""
    def run(a, b):
        ta, tb = type(a), type(b)
        if ta is Fraction and (tb is Fraction or tb is int) or \
                tb is Fraction and ta is int:
            return fn(a, b)
        return fn(Fraction(a), Fraction(b))
    return run


QUOTIENT = _exact(operator.truediv)  # a Fraction: an int by an int too


def _exact_mod(a, b):
    return Fraction(0) if b == 0 else Fraction(a) % Fraction(b)


def _exact_divisible(a, b):
    return b != 0 and Fraction(a) % Fraction(b) == 0


def _lazy_if(c, t, e):
    return lambda env: t(env) if c(env) else e(env)


def _lazy_and(a, b):
    return lambda env: bool(a(env)) and bool(b(env))


def _lazy_or(a, b):
    return lambda env: bool(a(env)) or bool(b(env))


def _lazy_implies(a, b):
    return lambda env: (not a(env)) or bool(b(env))


def exact_value(name: str, *values):
    """The exact view applied to values (a lazy operator's closures built over
    constants and run)."""
    op = OPERATORS[name]
    if op.lazy:
        return op.exact(*[(lambda env, v=v: v) for v in values])(None)
    return op.exact(*values)


# ---- scalar: floats or Fractions, nan where a float result is undefined

def _finite(*values) -> bool:
    return all(not isinstance(v, float) or math.isfinite(v) for v in values)


def _mod(a, b):
    if not _finite(a, b):
        return math.nan
    return Fraction(0) if b == 0 else Fraction(a) % Fraction(b)


_RATIONAL = (int, Fraction)


def _divisible(a, b):
    if type(a) in _RATIONAL and type(b) in _RATIONAL:  # a/b an integer, by exact terms
        return b != 0 and (a.numerator * b.denominator) % (a.denominator * b.numerator) == 0
    return _finite(a, b) and b != 0 and Fraction(a) % Fraction(b) == 0


def _ceil(a):
    return Fraction(math.ceil(a)) if _finite(a) else a


def _floor(a):
    return Fraction(math.floor(a)) if _finite(a) else a


def _sdiv(a, b):
    if b == 0:
        return math.nan
    return a / b if isinstance(a, float) or isinstance(b, float) else Fraction(a) / b


# ---- vector: numpy arrays (float64, or object arrays of Fractions)

def _div(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a / b if b else math.nan
    return Fraction(a) / b if b else math.nan


_DIV = np.frompyfunc(_div, 2, 1)
_MOD = np.frompyfunc(_mod, 2, 1)
_DIVISIBLE = np.frompyfunc(_divisible, 2, 1)
_CEIL = np.frompyfunc(_ceil, 1, 1)
_FLOOR = np.frompyfunc(_floor, 1, 1)


def _vdiv(a, b):
    if a.dtype == object or b.dtype == object:
        return _DIV(a, b)
    return np.where(b != 0, a / np.where(b != 0, b, 1), np.nan)


def _nary(fn):
    def run(*arrays):
        result = arrays[0]
        for other in arrays[1:]:
            result = fn(result, other)
        return result
    return run


def _count(limit_ok):
    def run(*arrays):
        total = sum(np.asarray(a).astype(np.int64) for a in arrays)
        return limit_ok(total)
    return run


# ---- interval: sound ranges over partly set options

EPS = 1e-9  # relative widening of float ranges that feed a fragile operation


def _widen(r, exact: bool):
    if r is UNKNOWN or exact:
        return r
    lo, hi = r
    return lo - abs(lo) * EPS - 1e-300, hi + abs(hi) * EPS + 1e-300


def _if_range(c, a, b):
    if c is UNKNOWN:
        return UNKNOWN
    if c[0]:
        return a
    if not c[1]:
        return b
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    low, high = a  # min() and max() of two written out: the first unless the second is beyond
    if b[0] < low:
        low = b[0]
    if b[1] > high:
        high = b[1]
    return low, high


def _add(a, b):
    return a[0] + b[0], a[1] + b[1]


def _mul(a, b):
    a0, a1, b0, b1 = a[0], a[1], b[0], b[1]
    p0, p1, p2, p3 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    if p0 != p0:  # 0 * inf
        p0 = 0
    if p1 != p1:
        p1 = 0
    if p2 != p2:
        p2 = 0
    if p3 != p3:
        p3 = 0
    low = high = p0  # min() and max() written out (below the least is not above the most)
    if p1 < low:
        low = p1
    elif p1 > high:
        high = p1
    if p2 < low:
        low = p2
    elif p2 > high:
        high = p2
    if p3 < low:
        low = p3
    elif p3 > high:
        high = p3
    return low, high


def _divr(a, b):
    b0, b1 = b
    if b0 <= 0 <= b1 or not ((not isinstance(b0, float) or b0 - b0 == 0) and
                             (not isinstance(b1, float) or b1 - b1 == 0)):  # _finite
        return (-math.inf, math.inf)
    return _mul(a, (1 / b[1], 1 / b[0]))


def _abs_range(a):
    return (0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1])),
            max(abs(a[0]), abs(a[1])))


def _compare(test_all, test_any):
    def run(a, b):
        return int(test_all(a, b)), int(test_any(a, b))
    return run


def _equal(a, b):
    if a[0] == a[1] == b[0] == b[1]:
        return 1, 1
    return 0, int(a[0] <= b[1] and b[0] <= a[1])


def _unequal(a, b):
    low, high = _equal(a, b)
    return 1 - high, 1 - low


def _counted(ok):
    def run(*ranges):
        low = sum(r[0] for r in ranges)
        high = sum(r[1] for r in ranges)
        outcomes = {ok(n) for n in range(int(low), int(high) + 1)}
        return int(all(outcomes)), int(any(outcomes))
    return run


def _stepped(fn):
    def run(a):
        lo, hi = a
        return fn(lo), fn(hi)
    return run


def _modr(a, b):
    if a[0] == a[1] and b[0] == b[1]:
        value = _mod(a[0], b[0])
        return value, value
    return (0, max(abs(b[0]), abs(b[1]))) if b[0] >= 0 else (-math.inf, math.inf)


def _divisibler(a, b):
    if a[0] == a[1] and b[0] == b[1]:
        ok = int(_divisible(a[0], b[0]))
        return ok, ok
    return 0, 1


def interval(op: str, ranges: list, exact: bool):
    """op's range over its arguments' ranges (UNKNOWN where an argument's is and
    the result is not a condition); `exact`: the ranges are exact, not widened."""
    if op == "if":
        return _if_range(*ranges)
    if UNKNOWN in ranges:  # a range is a pair, never equal to None
        return (0, 1) if op in BOOL_RESULT else UNKNOWN
    if op in FRAGILE:
        ranges = [_widen(r, exact) for r in ranges]
    return _RANGES[op](*ranges)


def left_sum(values):
    """sum(values) as Python 3.11's sum() adds them: from 0, left to right, one
    rounding per addition. Python 3.12's sum() compensates runs of plain floats
    (another float, where the run holds no numpy float): a plan's bounds must not
    depend on the interpreter, so float ranges are added here (and by the linked
    code, program/link.py, and the search's sums, solver/search.py)."""
    total = 0
    for value in values:
        total = total + value
    return total


def _sum_range(*ranges):
    """The sum's interval view: the lows' and the highs' left_sum."""
    low = high = 0
    for a, b in ranges:
        low = low + a
        high = high + b
    return low, high


def interval_of(op: str, exact: bool, unknown_args: bool) -> Callable:
    """interval(op, ranges, exact) as a function of the ranges, resolved once
    per expression: op's own range function where interval would only look it
    up (no argument's range can be UNKNOWN, none is widened), else interval."""
    if op == "if" or unknown_args or (op in FRAGILE and not exact):
        return partial(_interval_over, op, exact)
    return _RANGES[op]


def _interval_over(op: str, exact: bool, *ranges):
    return interval(op, ranges, exact)


# ---- z3: terms over the compiler's one-hot option flags (solver/compile.py)

def _as_map(term) -> dict:
    return term if isinstance(term, dict) else {}


def _z3_add(z3, c, n):
    return c.num(n.args[0]) + c.num(n.args[1])


def _z3_sub(z3, c, n):
    return c.num(n.args[0]) - c.num(n.args[1])


def _z3_neg(z3, c, n):
    return -c.num(n.args[0])


def _z3_sum(z3, c, n):
    return z3.Sum([c.num(a) for a in n.args])


def _z3_mul(z3, c, n):
    """Linear: split over the values of the side with fewer of them."""
    a, b = n.args
    va, vb = c.values(a), c.values(b)
    if va is not None and (vb is None or len(va) <= len(vb)):
        if len(va) == 1:
            return c.real(next(iter(va))) * c.num(b)
        other = c.named(c.num(b))
        return c.split(a, lambda v: c.real(v) * other)
    if vb is None:  # neither side has few values: split over the options one reads
        side, rest = (b, a) if c.table(b) is not None else (a, b)
        other = c.named(c.num(rest))
        return c.split(side, lambda v: other * c.real(v))
    if len(vb) == 1:
        return c.num(a) * c.real(next(iter(vb)))
    other = c.named(c.num(a))
    return c.split(b, lambda v: other * c.real(v))


def _z3_div(z3, c, n):
    a, b = n.args
    vb = c.values(b)
    if vb is not None and len(vb) == 1:
        v = next(iter(vb))
        return c.num(a) / c.real(v) if v != 0 else c.real(0)
    top = c.named(c.num(a))
    return c.split(b, lambda v: top / c.real(v) if v != 0 else c.real(0))


def _z3_mod(z3, c, n):
    parts = c.by_values(n, _z3_value_mod)
    return z3.Sum([z3.If(g, c.real(v), c.real(0)) for g, v in parts])


def _z3_divisible(z3, c, n):
    parts = c.by_values(n, lambda a, b: b != 0 and Fraction(a) % b == 0)
    return z3.Or([g for g, ok in parts if ok] or [c.boolean(False)])


def _z3_ceil(z3, c, n):
    return c.split(n.args[0], lambda v: c.real(math.ceil(v)))


def _z3_floor(z3, c, n):
    return c.split(n.args[0], lambda v: c.real(math.floor(v)))


def _z3_abs(z3, c, n):
    t = c.num(n.args[0])
    return z3.If(t >= 0, t, -t)


def _z3_min(z3, c, n):
    terms = [c.num(a) for a in n.args]
    result = terms[0]
    for t in terms[1:]:
        result = z3.If(t < result, t, result)
    return result


def _z3_max(z3, c, n):
    terms = [c.num(a) for a in n.args]
    result = terms[0]
    for t in terms[1:]:
        result = z3.If(t > result, t, result)
    return result


def _z3_if(z3, c, n):
    cond = c.term(n.args[0])
    a, b = c.term(n.args[1]), c.term(n.args[2])
    if isinstance(a, dict) or isinstance(b, dict):  # enums: value -> guard
        a, b = _as_map(a), _as_map(b)
        keys = list(dict.fromkeys(list(a) + list(b)))
        false = c.boolean(False)
        return {k: _or(z3, c, [_and(z3, c, [cond, a.get(k, false)]),
                               _and(z3, c, [_not(z3, c, cond), b.get(k, false)])])
                for k in keys}
    return _ite(z3, c, cond, a, b)


def _z3_and(z3, c, n):
    return _and(z3, c, [c.term(n.args[0]), c.term(n.args[1])])


def _z3_or(z3, c, n):
    return _or(z3, c, [c.term(n.args[0]), c.term(n.args[1])])


def _z3_implies(z3, c, n):
    return z3.Implies(c.term(n.args[0]), c.term(n.args[1]))


def _z3_not(z3, c, n):
    return _not(z3, c, c.term(n.args[0]))


def _z3_eq(z3, c, n):
    a, b = c.term(n.args[0]), c.term(n.args[1])
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = _as_map(a), _as_map(b)
        common = [_and(z3, c, [a[k], b[k]]) for k in a if k in b]
        return _or(z3, c, common) if common else c.boolean(False)
    return _eq(z3, c, a, b)


def _z3_ne(z3, c, n):
    return _not(z3, c, _z3_eq(z3, c, n))


# z3py's And, Or, Not, If and == through the C API where z3py would make the term
# as it is (Bool arguments; both sides of one sort): the same term, without the
# wrappers' coercions and checks (~15 % of a Model's build); anything else (a
# Python value, two sorts) goes through z3py, which coerces it as before.

def _and(z3, c, terms: list):
    if all(isinstance(t, z3.BoolRef) for t in terms):
        array = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
        return z3.BoolRef(z3.z3core.Z3_mk_and(c.ctx.ref(), len(terms), array), c.ctx)
    return z3.And(terms)


def _or(z3, c, terms: list):
    if all(isinstance(t, z3.BoolRef) for t in terms):
        array = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
        return z3.BoolRef(z3.z3core.Z3_mk_or(c.ctx.ref(), len(terms), array), c.ctx)
    return z3.Or(terms)


def _not(z3, c, term):
    if isinstance(term, z3.BoolRef):
        return z3.BoolRef(z3.z3core.Z3_mk_not(c.ctx.ref(), term.as_ast()), c.ctx)
    return z3.Not(term)


def _same_sort(z3, c, a, b) -> bool:
    core = z3.z3core
    return isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef) and core.Z3_is_eq_sort(
        c.ctx.ref(), core.Z3_get_sort(c.ctx.ref(), a.as_ast()),
        core.Z3_get_sort(c.ctx.ref(), b.as_ast()))


def _eq(z3, c, a, b):
    if _same_sort(z3, c, a, b):
        if type(a) is not type(b) and isinstance(b, type(a)):
            a, b = b, a  # Python asks the subclass's == first: a numeral's, b == a
        return z3.BoolRef(z3.z3core.Z3_mk_eq(c.ctx.ref(), a.as_ast(), b.as_ast()), c.ctx)
    return a == b


def _ite(z3, c, cond, a, b):
    if isinstance(cond, z3.BoolRef) and _same_sort(z3, c, a, b):
        return z3.z3._to_expr_ref(z3.z3core.Z3_mk_ite(c.ctx.ref(), cond.as_ast(), a.as_ast(),
                                                      b.as_ast()), c.ctx)
    return z3.If(cond, a, b)


def _z3_lt(z3, c, n):
    return c.num(n.args[0]) < c.num(n.args[1])


def _z3_le(z3, c, n):
    return c.num(n.args[0]) <= c.num(n.args[1])


def _z3_gt(z3, c, n):
    return c.num(n.args[0]) > c.num(n.args[1])


def _z3_ge(z3, c, n):
    return c.num(n.args[0]) >= c.num(n.args[1])


def _z3_at_most_one(z3, c, n):
    return z3.AtMost(*[c.term(a) for a in n.args], 1)


def _z3_exactly_one(z3, c, n):
    terms = [c.term(a) for a in n.args]
    return z3.And(z3.AtMost(*terms, 1), z3.AtLeast(*terms, 1))


def _z3_value_div(a, b):
    return Fraction(0) if b == 0 else Fraction(a) / b


def _z3_value_mod(a, b):
    return Fraction(0) if b == 0 else Fraction(a) % b


# ---- the table

SUM = Signature("sum", "tables", 1, None, "num")  # the tables' n-ary +, never in the IR


def _record(name: str, **views) -> Operator:
    return Operator(SUM if name == "sum" else SIGNATURES[name], **views)


def _cmp(name, fn, vector, ranges, z3):
    return _record(name, exact=fn, scalar=fn, vector=vector, interval=ranges, z3=z3,
                   fragile=True)


OPERATORS: dict[str, Operator] = {o.name: o for o in (
    _record("+", exact=_exact(operator.add), scalar=lambda a, b: a + b,
            vector=lambda a, b: a + b, interval=_add, z3=_z3_add,
            z3_value=lambda a, b: a + b, inline="add"),
    _record("-", exact=_exact(operator.sub), scalar=lambda a, b: a - b,
            vector=lambda a, b: a - b, interval=lambda a, b: (a[0] - b[1], a[1] - b[0]),
            z3=_z3_sub, z3_value=lambda a, b: a - b, inline="sub"),
    _record("*", exact=_exact(operator.mul), scalar=lambda a, b: a * b,
            vector=lambda a, b: a * b, interval=_mul, z3=_z3_mul,
            z3_value=lambda a, b: a * b, inline="mul"),
    _record("/", exact=QUOTIENT, scalar=_sdiv, vector=_vdiv, interval=_divr, z3=_z3_div,
            z3_value=_z3_value_div, inline="div", divides=True),
    _record("%", exact=_exact_mod, scalar=_mod, vector=lambda a, b: _MOD(a, b),
            interval=_modr, z3=_z3_mod, z3_value=_z3_value_mod, fragile=True),
    _record("neg", exact=lambda a: -a, scalar=lambda a: -a, vector=lambda a: -a,
            interval=lambda a: (-a[1], -a[0]), z3=_z3_neg, z3_value=lambda a: -a,
            inline="neg"),
    _record("sum", exact=lambda *a: sum((Fraction(x) for x in a), Fraction(0)),
            scalar=lambda *a: left_sum(a), vector=_nary(lambda a, b: a + b),
            interval=_sum_range, z3=_z3_sum,
            z3_value=lambda *a: sum(a), inline="sum"),
    _record("min", exact=lambda *a: min(a), scalar=min, vector=_nary(np.minimum),
            interval=lambda *r: (min([x[0] for x in r]), min([x[1] for x in r])), z3=_z3_min,
            z3_value=lambda *a: min(a), inline="min"),
    _record("max", exact=lambda *a: max(a), scalar=max, vector=_nary(np.maximum),
            interval=lambda *r: (max([x[0] for x in r]), max([x[1] for x in r])), z3=_z3_max,
            z3_value=lambda *a: max(a), inline="max"),
    _record("abs", exact=abs, scalar=abs, vector=lambda a: abs(a), interval=_abs_range,
            z3=_z3_abs, z3_value=abs),
    _record("ceil", exact=lambda a: Fraction(math.ceil(a)), scalar=_ceil,
            vector=lambda a: _CEIL(a), interval=_stepped(_ceil), z3=_z3_ceil,
            z3_value=lambda a: Fraction(math.ceil(a)), fragile=True),
    _record("floor", exact=lambda a: Fraction(math.floor(a)), scalar=_floor,
            vector=lambda a: _FLOOR(a), interval=_stepped(_floor), z3=_z3_floor,
            z3_value=lambda a: Fraction(math.floor(a)), fragile=True),
    _record("divisible", exact=_exact_divisible, scalar=_divisible,
            vector=lambda a, b: _DIVISIBLE(a, b), interval=_divisibler, z3=_z3_divisible,
            fragile=True),
    _cmp("==", lambda a, b: a == b, lambda a, b: np.asarray(a == b, dtype=bool), _equal,
         _z3_eq),
    _cmp("!=", lambda a, b: a != b, lambda a, b: np.asarray(a != b, dtype=bool), _unequal,
         _z3_ne),
    _cmp("<", lambda a, b: a < b, lambda a, b: np.asarray(a < b, dtype=bool),
         _compare(lambda a, b: a[1] < b[0], lambda a, b: a[0] < b[1]), _z3_lt),
    _cmp("<=", lambda a, b: a <= b, lambda a, b: np.asarray(a <= b, dtype=bool),
         _compare(lambda a, b: a[1] <= b[0], lambda a, b: a[0] <= b[1]), _z3_le),
    _cmp(">", lambda a, b: a > b, lambda a, b: np.asarray(a > b, dtype=bool),
         _compare(lambda a, b: a[0] > b[1], lambda a, b: a[1] > b[0]), _z3_gt),
    _cmp(">=", lambda a, b: a >= b, lambda a, b: np.asarray(a >= b, dtype=bool),
         _compare(lambda a, b: a[0] >= b[1], lambda a, b: a[1] >= b[0]), _z3_ge),
    _record("not", exact=lambda a: not a, scalar=lambda a: not a,
            vector=lambda a: ~a.astype(bool), interval=lambda a: (1 - a[1], 1 - a[0]),
            z3=_z3_not),
    _record("and", exact=_lazy_and, scalar=lambda a, b: bool(a) and bool(b),
            vector=lambda a, b: a.astype(bool) & b.astype(bool),
            interval=lambda a, b: (min(a[0], b[0]), min(a[1], b[1])), z3=_z3_and),
    _record("or", exact=_lazy_or, scalar=lambda a, b: bool(a) or bool(b),
            vector=lambda a, b: a.astype(bool) | b.astype(bool),
            interval=lambda a, b: (max(a[0], b[0]), max(a[1], b[1])), z3=_z3_or),
    _record("implies", exact=_lazy_implies, scalar=lambda a, b: (not a) or bool(b),
            vector=lambda a, b: ~a.astype(bool) | b.astype(bool),
            interval=lambda a, b: (max(1 - a[1], b[0]), max(1 - a[0], b[1])),
            z3=_z3_implies),
    _record("if", exact=_lazy_if, scalar=lambda c, a, b: a if c else b,
            vector=lambda c, a, b: np.where(c.astype(bool), a, b), interval=_if_range,
            z3=_z3_if, inline="if"),
    _record("at_most_one", exact=lambda *a: sum(bool(x) for x in a) <= 1,
            scalar=lambda *a: sum(bool(x) for x in a) <= 1,
            vector=_count(lambda n: n <= 1), interval=_counted(lambda n: n <= 1),
            z3=_z3_at_most_one),
    _record("exactly_one", exact=lambda *a: sum(bool(x) for x in a) == 1,
            scalar=lambda *a: sum(bool(x) for x in a) == 1,
            vector=_count(lambda n: n == 1), interval=_counted(lambda n: n == 1),
            z3=_z3_exactly_one),
)}

if set(OPERATORS) != set(SIGNATURES) | {"sum"}:  # a signature without views, or the reverse
    raise ImportError("program/operators.py and dsl/operators.py disagree on the operators: "
                      f"{sorted(set(OPERATORS) ^ (set(SIGNATURES) | {'sum'}))}")

# the tables the hot paths read, made once from OPERATORS
FRAGILE = frozenset(name for name, o in OPERATORS.items() if o.fragile)
BOOL_RESULT = frozenset(name for name, o in OPERATORS.items() if o.result == "bool")
COMPARISONS = frozenset(name for name, o in OPERATORS.items()
                        if o.signature.written == "infix" and o.result == "bool" and not o.lazy)
EXACT: dict[str, Callable] = {name: o.exact for name, o in OPERATORS.items()}
SCALAR: dict[str, Callable] = {name: o.scalar for name, o in OPERATORS.items()}
VECTOR: dict[str, Callable] = {name: o.vector for name, o in OPERATORS.items()}
_RANGES: dict[str, Callable] = {name: o.interval for name, o in OPERATORS.items()}
Z3_VALUE: dict[str, Callable] = {name: o.z3_value for name, o in OPERATORS.items()
                                 if o.z3_value is not None}


# ---- exact sums and products of Fractions (measure(), the evaluator's memory sums)
def fraction_sum(values) -> Fraction:
    """sum(values, Fraction(0)) of Fractions: the same Fraction, normalised once
    (Fraction's + finds a gcd at every step, in Python)."""
    n, d = 0, 1
    for value in values:
        vn, vd = value._numerator, value._denominator
        if vd == d:
            n += vn
        else:
            n, d = n * vd + vn * d, d * vd
    return Fraction(n, d)


def fraction_product(first: Fraction, factors) -> Fraction:
    """first times each of the Fractions `factors`, in turn: the same Fraction,
    normalised once."""
    n, d = first._numerator, first._denominator
    for factor in factors:
        n, d = n * factor._numerator, d * factor._denominator
    return Fraction(n, d)
