"""Checked IR to Z3 terms, linear over finite domains.

Each chosen option is an Int index into its candidate values. Numbers are
exact rationals (Z3 Real, linear arithmetic). A product or quotient of two
option-dependent terms is split at compile time over the finite values of
one side, so Z3 never sees a non-linear term. Enum-valued expressions are
maps from value to guard.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import z3

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import ir
from kbsolve.solver.problem import Problem

MAX_VALUES = 512


class Compiler:
    def __init__(self, problem: Problem, ctx: z3.Context | None = None):
        self.p = problem
        self.ctx = ctx or z3.Context()
        self.index = {key: z3.Int(f"opt:{key}", self.ctx) for key in problem.choices}
        self._memo: dict[int, Any] = {}
        self._lets: dict[str, Any] = {}
        self._values: dict[int, frozenset | None] = {}
        self._let_values: dict[str, frozenset | None] = {}

    # ---- domains
    def domain_constraints(self) -> list:
        return [z3.And(v >= 0, v < len(self.p.choices[k]))
                for k, v in sorted(self.index.items())]

    def equals(self, key: str, value) -> z3.BoolRef:
        values = self.p.choices[key]
        return self.index[key] == values.index(value)

    def decode(self, model: z3.ModelRef) -> dict[str, Any]:
        return {key: self.p.choices[key][model.eval(var, model_completion=True).as_long()]
                for key, var in sorted(self.index.items())}

    # ---- terms
    def num(self, node: ir.Node):
        term = self.term(node)
        if isinstance(term, dict):
            raise self._error(node, "expected a number")
        return term

    def term(self, node: ir.Node):
        key = id(node)
        if key not in self._memo:  # the node is kept alive so that its id stays unique
            self._memo[key] = (node, self._compile(node))
        return self._memo[key][1]

    def _real(self, value) -> z3.ArithRef:
        value = Fraction(value)
        return z3.RealVal(f"{value.numerator}/{value.denominator}", self.ctx)

    def _bool(self, value: bool) -> z3.BoolRef:
        return z3.BoolVal(bool(value), self.ctx)

    def constant(self, value):
        if isinstance(value, bool):
            return self._bool(value)
        if isinstance(value, str):
            return {value: self._bool(True)}
        return self._real(value)

    def _compile(self, node: ir.Node):
        if isinstance(node, ir.Const):
            return self.constant(node.value)
        if isinstance(node, ir.FactRef):
            return self.constant(self.p.evaluator.run(node, {}))
        if isinstance(node, ir.OptionRef):
            return self._option(node)
        if isinstance(node, ir.LetRef):
            if node.let not in self._lets:
                self._lets[node.let] = self.term(self.p.kb.lets[node.let].expr)
            return self._lets[node.let]
        if isinstance(node, ir.MemorySum):
            terms = [self.num(t.expr) for t in self.p.items(self.p.kb.memory)
                     if t.level == node.level and t.location == "gpu"]
            return z3.Sum(terms) if terms else self._real(0)
        return getattr(self, "_op_" + _OP_NAMES.get(node.op, node.op))(node)

    def _option(self, node: ir.OptionRef):
        key = node.option
        if key in self.p.fixed:
            return self.constant(self.p.fixed[key])
        values = self.p.choices[key]
        if node.type.kind == "bool":
            return self.equals(key, True)
        if node.type.kind in ("enum", "str"):
            return {v: self.equals(key, v) for v in values}
        return z3.Sum([z3.If(self.equals(key, v), self._real(v), self._real(0)) for v in values
                       if v != 0]) if any(v != 0 for v in values) else self._real(0)

    # ---- value sets, for case splits
    def values(self, node: ir.Node) -> frozenset | None:
        key = id(node)
        if key not in self._values:
            self._values[key] = (node, self._value_set(node))
        return self._values[key][1]

    def _value_set(self, node: ir.Node) -> frozenset | None:
        if isinstance(node, (ir.Const, ir.FactRef)):
            return frozenset([Fraction(self.p.evaluator.run(node, {}))])
        if isinstance(node, ir.OptionRef):
            if node.option in self.p.fixed:
                return frozenset([Fraction(self.p.fixed[node.option])])
            return frozenset(Fraction(v) for v in self.p.choices[node.option])
        if isinstance(node, ir.LetRef):
            if node.let not in self._let_values:
                self._let_values[node.let] = self.values(self.p.kb.lets[node.let].expr)
            return self._let_values[node.let]
        if not isinstance(node, ir.Op):
            return None
        if node.op == "if":
            a, b = self.values(node.args[1]), self.values(node.args[2])
            return None if a is None or b is None else _capped(a | b)
        sets = [self.values(a) for a in node.args]
        if any(s is None for s in sets) or node.type.kind != "num":
            return None
        if math.prod(len(s) for s in sets) > MAX_VALUES * 4:
            return None
        fn = _VALUE_FNS.get(node.op)
        if fn is None:
            return None
        out = set()
        for combo in itertools.product(*sets):
            out.add(fn(*combo))
        return _capped(frozenset(out))

    def _split(self, node: ir.Node, build) -> z3.ArithRef:
        """Sum over the values v of `node`: If(node == v, build(v), 0)."""
        values = self.values(node)
        if values is None:
            raise self._error(node, "cannot split this term over a finite set of values")
        term = self.num(node)
        if len(values) == 1:
            return build(next(iter(values)))
        return z3.Sum([z3.If(term == self._real(v), build(v), self._real(0))
                       for v in sorted(values)])

    def _error(self, node: ir.Node, why: str) -> KbError:
        return KbError(Diagnostic(f"cannot linearise this formula: {why}", node.span,
                                  code="nonlinear"))

    # ---- operators
    def _op_add(self, n):
        return self.num(n.args[0]) + self.num(n.args[1])

    def _op_sub(self, n):
        return self.num(n.args[0]) - self.num(n.args[1])

    def _op_neg(self, n):
        return -self.num(n.args[0])

    def _op_mul(self, n):
        a, b = n.args
        va, vb = self.values(a), self.values(b)
        if va is not None and (vb is None or len(va) <= len(vb)):
            other = self.num(b)
            return self._split(a, lambda v: self._real(v) * other)
        other = self.num(a)
        return self._split(b, lambda v: other * self._real(v))

    def _op_div(self, n):
        a, b = n.args
        top = self.num(a)
        return self._split(b, lambda v: top / self._real(v) if v != 0 else self._real(0))

    def _by_values(self, n, fn):
        """A term whose value is fn(values of args): split over every combination."""
        sets = [self.values(a) for a in n.args]
        if any(s is None for s in sets):
            raise self._error(n, f"'{n.op}' needs arguments with few possible values")
        terms = [self.num(a) for a in n.args]
        parts = []
        for combo in itertools.product(*[sorted(s) for s in sets]):
            guard = z3.And([t == self._real(v) for t, v in zip(terms, combo)])
            parts.append((guard, fn(*combo)))
        return parts

    def _op_mod(self, n):
        parts = self._by_values(n, lambda a, b: Fraction(0) if b == 0 else Fraction(a) % b)
        return z3.Sum([z3.If(g, self._real(v), self._real(0)) for g, v in parts])

    def _op_divisible(self, n):
        parts = self._by_values(n, lambda a, b: b != 0 and Fraction(a) % b == 0)
        return z3.Or([g for g, ok in parts if ok] or [self._bool(False)])

    def _op_ceil(self, n):
        return self._split(n.args[0], lambda v: self._real(math.ceil(v)))

    def _op_floor(self, n):
        return self._split(n.args[0], lambda v: self._real(math.floor(v)))

    def _op_abs(self, n):
        t = self.num(n.args[0])
        return z3.If(t >= 0, t, -t)

    def _op_min(self, n):
        terms = [self.num(a) for a in n.args]
        result = terms[0]
        for t in terms[1:]:
            result = z3.If(t < result, t, result)
        return result

    def _op_max(self, n):
        terms = [self.num(a) for a in n.args]
        result = terms[0]
        for t in terms[1:]:
            result = z3.If(t > result, t, result)
        return result

    def _op_if(self, n):
        cond = self.term(n.args[0])
        a, b = self.term(n.args[1]), self.term(n.args[2])
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = _as_map(a), _as_map(b)
            keys = list(dict.fromkeys(list(a) + list(b)))
            return {k: z3.Or(z3.And(cond, a.get(k, False)), z3.And(z3.Not(cond), b.get(k, False)))
                    for k in keys}
        return z3.If(cond, a, b)

    def _op_and(self, n):
        return z3.And(self.term(n.args[0]), self.term(n.args[1]))

    def _op_or(self, n):
        return z3.Or(self.term(n.args[0]), self.term(n.args[1]))

    def _op_implies(self, n):
        return z3.Implies(self.term(n.args[0]), self.term(n.args[1]))

    def _op_not(self, n):
        return z3.Not(self.term(n.args[0]))

    def _op_eq(self, n):
        a, b = self.term(n.args[0]), self.term(n.args[1])
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = _as_map(a), _as_map(b)
            common = [z3.And(a[k], b[k]) for k in a if k in b]
            return z3.Or(common) if common else self._bool(False)
        return a == b

    def _op_ne(self, n):
        return z3.Not(self._op_eq(n))

    def _op_lt(self, n):
        return self.num(n.args[0]) < self.num(n.args[1])

    def _op_le(self, n):
        return self.num(n.args[0]) <= self.num(n.args[1])

    def _op_gt(self, n):
        return self.num(n.args[0]) > self.num(n.args[1])

    def _op_ge(self, n):
        return self.num(n.args[0]) >= self.num(n.args[1])

    def _op_at_most_one(self, n):
        return z3.AtMost(*[self.term(a) for a in n.args], 1)

    def _op_exactly_one(self, n):
        terms = [self.term(a) for a in n.args]
        return z3.And(z3.AtMost(*terms, 1), z3.AtLeast(*terms, 1))


def _as_map(term) -> dict:
    return term if isinstance(term, dict) else {}


def _capped(values: frozenset) -> frozenset | None:
    return values if len(values) <= MAX_VALUES else None


_OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "==": "eq",
             "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _vdiv(a, b):
    return Fraction(0) if b == 0 else Fraction(a) / b


_VALUE_FNS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": _vdiv,
    "neg": lambda a: -a, "min": lambda *a: min(a), "max": lambda *a: max(a),
    "ceil": lambda a: Fraction(math.ceil(a)), "floor": lambda a: Fraction(math.floor(a)),
    "abs": abs, "%": lambda a, b: Fraction(0) if b == 0 else Fraction(a) % b,
}
