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

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import ir
from kbsolve.program.operators import OPERATORS, Z3_VALUE
from kbsolve.program.problem import Problem
from kbsolve.program.program import summed_terms

MAX_VALUES = 512
MAX_TABLE = 2048  # a term over at most this many option combinations becomes a table
# operators whose value on whole numbers is the same whole number in ints as in Fractions,
# and whose value on numbers times a common denominator d is their value times d (d * d
# for the product of two): value sets are computed on whole numbers (Compiler._value_set)
INTEGRAL_OPS = frozenset(["+", "-", "*", "neg", "sum", "min", "max", "abs"])


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
        self._option_nums: dict[str, Any] = {}  # a numeric option's term (_option)
        self._reals: dict[Any, z3.ArithRef] = {}  # value -> its numeral (real)
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
            raise self.error(node, "expected a number")
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
            return frozenset().union(*[self.deps(t.expr) for t in
                                       summed_terms(self.p.kb, node.framework, node.level)])
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
        return _nary(z3core.Z3_mk_and, terms, self.ctx) if terms else self.boolean(True)

    def _any(self, terms: list) -> z3.BoolRef:
        return _nary(z3core.Z3_mk_or, terms, self.ctx) if terms else self.boolean(False)

    def _tabulated(self, node: ir.Node):
        if not isinstance(node, (ir.Op, ir.LetRef)) or node.type.kind != "num":
            return None
        if not self.deps(node):
            return self.real(self.p.evaluator.run(node, self.p.fixed, {}))
        tabled = self.diagram(node, self.real)
        if tabled is None or z3.is_rational_value(tabled):
            return tabled
        var = self.named(tabled)  # its bounds help the arithmetic prune early
        low, high = self._bounds[id(node)]
        self.definitions.append(z3.And(var >= self.real(low), var <= self.real(high)))
        return var

    def diagram(self, node: ir.Node, leaf) -> z3.ExprRef | None:
        """The node's table as a reduced decision diagram of nested Ifs over the
        options' flags, with leaf(value) at the leaves (Real terms); None when too
        large."""
        deps = sorted(self.deps(node))
        if math.prod(len(self.p.choices[k]) for k in deps) > MAX_TABLE:
            return None
        values = self._exact_values(node, deps)
        if values is None:
            evaluator = self.p.evaluator
            values = [Fraction(evaluator.run(node, {**self.p.fixed, **dict(zip(deps, combo))},
                                             {}))
                      for combo in itertools.product(*[self.p.choices[k] for k in deps])]
        # blocks compared and remembered as tuples of small ints, one per distinct
        # value (a Fraction's hash is computed afresh on every use: the values are
        # told apart by their lowest terms instead, as_integer_ratio, which name one
        # number each, an int or a Fraction alike)
        distinct: dict = {}
        firsts: list = []
        codes = []
        for v in values:
            code = distinct.setdefault(v.as_integer_ratio(), len(distinct))
            if code == len(firsts):
                firsts.append(v if type(v) is Fraction else Fraction(v))
            codes.append(code)
        self._bounds[id(node)] = (min(firsts), max(firsts))  # the distinct values' range
        leaves = [None] * len(distinct)

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
        return values  # ints and Fractions (diagram names each value by its lowest terms)

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
            last = children[-1]
            made = last.ast  # the chain's If so far, a bare pointer until the last
            ref = self.ctx.ref()
            for flag, child in zip(reversed(flags[:-1]), reversed(children[:-1])):
                # z3.If through the C API (same term; the wrapper's coercions and
                # checks were most of the diagram's cost): flag is Bool, both sides
                # Real (the leaves are numerals, `real`), so the If is a Real term
                # that is no numeral: an ArithRef, as z3py's _to_expr_ref makes it.
                # Two terms are the same term where their pointers are (Z3_is_eq_ast).
                # Only the chain's last If gets a wrapper (a reference): each one
                # before it is held by the If over it (and, until that is made, by
                # the context's last result), as a dropped wrapper left it
                if child.ast.value != made.value:
                    made = z3core.Z3_mk_ite(ref, flag.ast, child.ast, made)
            memo[key] = last if made is last.ast else z3.ArithRef(made, self.ctx)
        return memo[key]

    def real(self, value) -> z3.ArithRef:
        term = self._reals.get(value)
        if term is None:  # one numeral per value (Z3 makes the same term for it anyway)
            exact = Fraction(value)
            term = self._reals[value] = z3.RealVal(f"{exact.numerator}/{exact.denominator}",
                                                   self.ctx)
        return term

    def boolean(self, value: bool) -> z3.BoolRef:
        return z3.BoolVal(bool(value), self.ctx)

    def constant(self, value):
        if isinstance(value, bool):
            return self.boolean(value)
        if isinstance(value, str):
            return {value: self.boolean(True)}
        return self.real(value)

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
            terms = [self.num(t.expr)
                     for t in summed_terms(self.p.kb, node.framework, node.level)]
            return z3.Sum(terms) if terms else self.real(0)
        return OPERATORS[node.op].z3(z3, self, node)  # its Z3 view (program/operators.py)

    def _option(self, node: ir.OptionRef):
        key = node.option
        if key in self.p.fixed:
            return self.constant(self.p.fixed[key])
        values = self.p.choices[key]
        if node.type.kind == "bool":
            return self.equals(key, True)
        if node.type.kind in ("enum", "str"):
            return {v: self.equals(key, v) for v in values}
        term = self._option_nums.get(key)
        if term is None:  # one term per option: every reference to it is the same term
            term = self._option_nums[key] = z3.Sum(
                [z3.If(self.equals(key, v), self.real(v), self.real(0)) for v in values
                 if v != 0]) if any(v != 0 for v in values) else self.real(0)
        return term

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
        fn = Z3_VALUE.get(node.op)
        if fn is None:
            return None
        if node.op in INTEGRAL_OPS:
            return _capped(_scaled_value_set(fn, sets, 2 if node.op == "*" else 1))
        out = set()
        for combo in itertools.product(*sets):
            out.add(fn(*combo))
        return _capped(frozenset(out))

    def split(self, node: ir.Node, build) -> z3.ArithRef:
        """Sum over the values v of `node`: If(guard of v, build(v), 0). The guard is
        over option indices where the node depends on few options, else node == v."""
        rows = self.table(node)  # guards, not a diagram: arithmetic leaves nest badly
        if rows is not None:
            if len(rows) == 1:
                return build(rows[0][0])
            return z3.Sum([z3.If(guard, build(value), self.real(0)) for value, guard in rows])
        values = self.values(node)
        if values is None:
            raise self.error(node, "cannot split this term over a finite set of values")
        term = self.named(self.num(node))
        if len(values) == 1:
            return build(next(iter(values)))
        return z3.Sum([z3.If(term == self.real(v), build(v), self.real(0))
                       for v in sorted(values)])

    def error(self, node: ir.Node, why: str) -> KbError:
        return KbError(Diagnostic(f"cannot linearise this formula: {why}", node.span,
                                  code="nonlinear"))

    def by_values(self, n, fn):
        """A term whose value is fn(values of args): split over every combination."""
        sets = [self.values(a) for a in n.args]
        if any(s is None for s in sets):
            raise self.error(n, f"'{n.op}' needs arguments with few possible values")
        terms = [self.num(a) for a in n.args]
        parts = []
        for combo in itertools.product(*[sorted(s) for s in sets]):
            guard = z3.And([t == self.real(v) for t, v in zip(terms, combo)])
            parts.append((guard, fn(*combo)))
        return parts


def _nary(make, terms: list, ctx: z3.Context) -> z3.BoolRef:
    """And/Or through the C API: z3py's wrappers re-check every argument, which
    dominates compile time for large tables."""
    if len(terms) == 1:
        return terms[0]
    array = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
    return z3.BoolRef(make(ctx.ref(), len(terms), array), ctx)


def _scaled_value_set(fn, sets: list, degree: int) -> frozenset:
    """fn over every combination of `sets` (Fractions), computed in ints: each value
    times the sets' common denominator d, each distinct result divided by d ** degree
    (fn(d a, d b) = d ** degree fn(a, b) for INTEGRAL_OPS), made a Fraction in lowest
    terms: the same values as fn over the Fractions, without Fraction arithmetic."""
    common = math.lcm(*[v.denominator for s in sets for v in s])
    out = {fn(*combo) for combo in itertools.product(
        *[[v.numerator * (common // v.denominator) for v in s] for s in sets])}
    if common == 1:
        return frozenset(map(Fraction, out))
    scale = common ** degree
    return frozenset([Fraction(v, scale) for v in out])


def _capped(values: frozenset) -> frozenset | None:
    return values if len(values) <= MAX_VALUES else None
