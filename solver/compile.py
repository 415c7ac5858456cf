"""Checked IR to Z3 terms, linear over finite domains.

Each chosen option is a set of one-hot Booleans, one per candidate value
(exactly one holds), so that guards stay propositional. Numbers are
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
from z3 import z3core
from z3.z3 import _to_expr_ref as _expr_ref  # wraps a C API term as z3py does

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import ir
from kbsolve.program.problem import Problem

MAX_VALUES = 512
MAX_TABLE = 2048  # a term over at most this many option combinations becomes a table


class Compiler:
    def __init__(self, problem: Problem, ctx: z3.Context | None = None):
        self.p = problem
        self.ctx = ctx or z3.Context()
        self.flags = {key: [z3.Bool(f"opt:{key}={i}", self.ctx) for i in range(len(values))]
                      for key, values in problem.choices.items()}
        self._memo: dict[int, Any] = {}
        self._lets: dict[str, Any] = {}
        self._values: dict[int, frozenset | None] = {}
        self._let_values: dict[str, frozenset | None] = {}
        self.definitions: list[z3.BoolRef] = []  # aux == term, asserted with the model
        self._deps: dict[int, tuple] = {}
        self._equals: dict[tuple, z3.BoolRef] = {}
        self._let_deps: dict[str, frozenset] = {}
        self._bounds: dict[int, tuple] = {}  # node id -> (min, max) of its table
        self._tables = None  # program/tables.Tables in exact mode, for diagrams

    # ---- domains
    def domain_constraints(self) -> list:
        """Exactly one value per option, and the aux definitions made so far:
        assert after compiling."""
        return [z3.PbEq([(flag, 1) for flag in flags], 1) if len(flags) > 1 else flags[0]
                for _, flags in sorted(self.flags.items())] + list(self.definitions)

    def equals(self, key: str, value) -> z3.BoolRef:
        cached = self._equals.get((key, value))
        if cached is None:
            cached = self.flags[key][self.p.choices[key].index(value)]
            self._equals[(key, value)] = cached
        return cached

    def decode(self, model: z3.ModelRef) -> dict[str, Any]:
        return {key: self.p.choices[key][next(
                    (i for i, flag in enumerate(flags)
                     if z3.is_true(model.eval(flag, model_completion=True))), 0)]
                for key, flags in sorted(self.flags.items())}

    # ---- terms
    def named(self, term):
        """A fresh Real standing for `term`, so that case splits copy a name, not a tree."""
        if z3.is_const(term) or z3.is_rational_value(term):
            return term
        var = z3.Real(f"aux{len(self.definitions)}", self.ctx)
        self.definitions.append(var == term)
        return var

    def num(self, node: ir.Node):
        term = self.term(node)
        if isinstance(term, dict):
            raise self._error(node, "expected a number")
        return term

    def term(self, node: ir.Node):
        key = id(node)
        if key not in self._memo:  # the node is kept alive so that its id stays unique
            term = self._tabulated(node)
            self._memo[key] = (node, self._compile(node) if term is None else term)
        return self._memo[key][1]

    # ---- tables: a term of few options becomes a sum of constants under index guards
    def deps(self, node: ir.Node) -> frozenset:
        """The chosen options a node's value depends on (through lets too)."""
        key = id(node)
        if key not in self._deps:
            self._deps[key] = (node, self._deps_of(node))
        return self._deps[key][1]

    def _deps_of(self, node: ir.Node) -> frozenset:
        if isinstance(node, ir.OptionRef):
            return frozenset([node.option]) if node.option in self.p.choices else frozenset()
        if isinstance(node, ir.LetRef):
            if node.let not in self._let_deps:
                self._let_deps[node.let] = self.deps(self.p.kb.lets[node.let].expr)
            return self._let_deps[node.let]
        if isinstance(node, ir.MemorySum):
            return frozenset().union(*[self.deps(t.expr) for t in self.p.items(self.p.kb.memory)
                                       if t.level == node.level and t.location == "gpu"])
        if isinstance(node, ir.Op):
            return frozenset().union(*[self.deps(a) for a in node.args])
        return frozenset()

    def table(self, node: ir.Node) -> list[tuple[Any, z3.BoolRef]] | None:
        """(value, guard) pairs over the node's options, or None when too many."""
        deps = sorted(self.deps(node))
        if math.prod(len(self.p.choices[k]) for k in deps) > MAX_TABLE:
            return None
        evaluator = self.p.evaluator
        rows: dict[Any, list] = {}
        for combo in itertools.product(*[self.p.choices[k] for k in deps]):
            assignment = {**self.p.fixed, **dict(zip(deps, combo))}
            value = evaluator.run(node, assignment, {})
            guard = self._all([self.equals(k, v) for k, v in zip(deps, combo)])
            rows.setdefault(value, []).append(guard)
        return [(value, self._any(guards)) for value, guards in rows.items()]

    def _all(self, terms: list) -> z3.BoolRef:
        return _nary(z3core.Z3_mk_and, terms, self.ctx) if terms else self._bool(True)

    def _any(self, terms: list) -> z3.BoolRef:
        return _nary(z3core.Z3_mk_or, terms, self.ctx) if terms else self._bool(False)

    def _tabulated(self, node: ir.Node):
        if not isinstance(node, (ir.Op, ir.LetRef)) or node.type.kind != "num":
            return None
        if not self.deps(node):
            return self._real(self.p.evaluator.run(node, self.p.fixed, {}))
        tabled = self.diagram(node, self._real)
        if tabled is None or z3.is_rational_value(tabled):
            return tabled
        var = self.named(tabled)  # its bounds help the arithmetic prune early
        low, high = self._bounds[id(node)]
        self.definitions.append(z3.And(var >= self._real(low), var <= self._real(high)))
        return var

    def diagram(self, node: ir.Node, leaf) -> z3.ExprRef | None:
        """The node's table as a reduced decision diagram of nested Ifs over the
        options' flags, with leaf(value) at the leaves; None when too large."""
        deps = sorted(self.deps(node))
        if math.prod(len(self.p.choices[k]) for k in deps) > MAX_TABLE:
            return None
        values = self._exact_values(node, deps)
        if values is None:
            evaluator = self.p.evaluator
            values = [Fraction(evaluator.run(node, {**self.p.fixed, **dict(zip(deps, combo))},
                                             {}))
                      for combo in itertools.product(*[self.p.choices[k] for k in deps])]
        self._bounds[id(node)] = (min(values), max(values))
        # blocks compared and remembered as tuples of small ints, one per distinct
        # value (a Fraction's hash is computed afresh on every use)
        distinct: dict = {}
        codes = [distinct.setdefault(v, len(distinct)) for v in values]
        firsts, leaves = list(distinct), [None] * len(distinct)

        def leaf_of(code: int):  # one term per distinct value, made where first reached
            if leaves[code] is None:
                leaves[code] = leaf(firsts[code])
            return leaves[code]

        sizes = [1] * (len(deps) + 1)
        for level in range(len(deps) - 1, -1, -1):
            sizes[level] = sizes[level + 1] * len(self.p.choices[deps[level]])
        return self._diagram(deps, codes, leaf_of, 0, 0, {}, sizes)

    def _exact_values(self, node: ir.Node, deps: list[str]) -> list | None:
        """The node's values over `deps` in product order, from the problem's exact
        tables (program/tables.py: Fractions, vectorised) instead of one evaluator
        call per combination; None where the table does not span exactly `deps` or
        holds anything but exact numbers (a division by zero is nan there, an
        error in the evaluator, which then says so)."""
        if self._tables is None:
            from kbsolve.program.tables import Tables
            self._tables = Tables(self.p, sorted(self.p.choices))
        from kbsolve.program.tables import Table
        try:
            cell = self._tables.cell(node, exact=True)
        except (KbError, KeyError, ZeroDivisionError, TypeError, ValueError):
            return None
        if not isinstance(cell, Table) or cell.kind != "num" or \
                [self._tables.order[a] for a in cell.deps] != deps:
            return None
        values = cell.array.ravel().tolist()
        if not all(type(v) is Fraction or type(v) is int for v in values):
            return None
        return [v if type(v) is Fraction else Fraction(v) for v in values]

    def _diagram(self, deps: list[str], values: list, leaf, level: int, start: int,
                 memo: dict, sizes: list[int]):
        """A block of equal values is one leaf; equal blocks are shared."""
        size = sizes[level]
        block = tuple(values[start:start + size])
        if block.count(block[0]) == size:
            return leaf(block[0])
        key = (level, block)
        if key not in memo:
            stride = sizes[level + 1]
            children = [self._diagram(deps, values, leaf, level + 1, start + j * stride, memo,
                                      sizes)
                        for j in range(len(self.p.choices[deps[level]]))]
            flags = self.flags[deps[level]]
            term = children[-1]
            ref = self.ctx.ref()
            for flag, child in zip(reversed(flags[:-1]), reversed(children[:-1])):
                # z3.If through the C API (same term; the wrapper's coercions and
                # checks were most of the diagram's cost): flag is Bool, both sides
                # the leaves' sort
                if not z3core.Z3_is_eq_ast(ref, child.as_ast(), term.as_ast()):
                    term = _expr_ref(z3core.Z3_mk_ite(ref, flag.as_ast(), child.as_ast(),
                                                      term.as_ast()), self.ctx)
            memo[key] = term
        return memo[key]

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
                term = self.term(self.p.kb.lets[node.let].expr)
                self._lets[node.let] = self.named(term) if z3.is_arith(term) else term
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
        """Sum over the values v of `node`: If(guard of v, build(v), 0). The guard is
        over option indices where the node depends on few options, else node == v."""
        rows = self.table(node)  # guards, not a diagram: arithmetic leaves nest badly
        if rows is not None:
            if len(rows) == 1:
                return build(rows[0][0])
            return z3.Sum([z3.If(guard, build(value), self._real(0)) for value, guard in rows])
        values = self.values(node)
        if values is None:
            raise self._error(node, "cannot split this term over a finite set of values")
        term = self.named(self.num(node))
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
            if len(va) == 1:
                return self._real(next(iter(va))) * self.num(b)
            other = self.named(self.num(b))
            return self._split(a, lambda v: self._real(v) * other)
        if vb is None:  # neither side has few values: split over the options one reads
            side, rest = (b, a) if self.table(b) is not None else (a, b)
            other = self.named(self.num(rest))
            return self._split(side, lambda v: other * self._real(v))
        if len(vb) == 1:
            return self.num(a) * self._real(next(iter(vb)))
        other = self.named(self.num(a))
        return self._split(b, lambda v: other * self._real(v))

    def _op_div(self, n):
        a, b = n.args
        vb = self.values(b)
        if vb is not None and len(vb) == 1:
            v = next(iter(vb))
            return self.num(a) / self._real(v) if v != 0 else self._real(0)
        top = self.named(self.num(a))
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


def _nary(make, terms: list, ctx: z3.Context) -> z3.BoolRef:
    """And/Or through the C API: z3py's wrappers re-check every argument, which
    dominates compile time for large tables."""
    if len(terms) == 1:
        return terms[0]
    array = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
    return z3.BoolRef(make(ctx.ref(), len(terms), array), ctx)


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
