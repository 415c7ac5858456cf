"""The compiler's shortcuts (one numeral per value, one term per numeric option,
value sets in ints, diagram leaves named by lowest terms) make the very terms the
plain forms made: the same Z3 terms, in the same order, with the same ids, so the
solver (and the cores it finds) cannot tell them apart."""

import itertools
from fractions import Fraction

import pytest
import z3

from kbsolve.catalog import load_kb
from kbsolve.dsl import ir
from kbsolve.dsl.types import NUM
from kbsolve.program.query import Query, resolve
from kbsolve.solver import compile as compile_
from kbsolve.solver.prove import Model

QUERIES = [Query(gpus="1x4090", model="llama3-70b"),  # refused
           Query(gpus="8xA100", model="qwen3-8b")]


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def _terms(model: Model) -> list[tuple]:
    roots = list(model.parts.items()) + \
        [(f"domain{i}", c) for i, c in enumerate(model.c.domain_constraints())] + \
        [("time", model.time_per_work())] + \
        [(f"tier{t}", s) for t, s in model.preference_scores().items()]
    return [(name, term.get_id(), term.sexpr()) for name, term in roots]


def _plain_real(self, value):
    value = Fraction(value)
    return z3.RealVal(f"{value.numerator}/{value.denominator}", self.ctx)


def _plain_option(self, node):
    key = node.option
    if key in self.p.fixed:
        return self.constant(self.p.fixed[key])
    values = self.p.choices[key]
    if node.type.kind == "bool":
        return self.equals(key, True)
    if node.type.kind in ("enum", "str"):
        return {v: self.equals(key, v) for v in values}
    return z3.Sum([z3.If(self.equals(key, v), self.real(v), self.real(0)) for v in values
                   if v != 0]) if any(v != 0 for v in values) else self.real(0)


def _plain_diagram(self, deps, values, leaf, level, start, memo, sizes):
    """Compiler._diagram with z3py's If and eq (the wrapper's checks, _to_expr_ref)."""
    size = sizes[level]
    block = tuple(values[start:start + size])
    if block.count(block[0]) == size:
        return leaf(block[0])
    key = (level, block)
    if key not in memo:
        stride = sizes[level + 1]
        children = [_plain_diagram(self, deps, values, leaf, level + 1, start + j * stride,
                                   memo, sizes)
                    for j in range(len(self.p.choices[deps[level]]))]
        term = children[-1]
        for flag, child in zip(reversed(self.flags[deps[level]][:-1]), reversed(children[:-1])):
            if not z3.eq(child, term):
                term = z3.If(flag, child, term)
        memo[key] = term
    return memo[key]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.gpus} {q.model}")
def test_the_shortcuts_make_the_plain_terms(kb, query, monkeypatch):
    problem = resolve(kb, query).problem
    exact_values = compile_.Compiler._exact_values
    with monkeypatch.context() as mixed:  # whole numbers as ints and Fractions, mixed
        mixed.setattr(compile_.Compiler, "_exact_values", lambda self, node, deps: (
            None if (v := exact_values(self, node, deps)) is None else
            [int(x) if i % 2 and x == int(x) else Fraction(x) for i, x in enumerate(v)]))
        fast = _terms(Model(problem))
    with monkeypatch.context() as plain:
        plain.setattr(compile_.Compiler, "real", _plain_real)
        plain.setattr(compile_.Compiler, "_option", _plain_option)
        plain.setattr(compile_.Compiler, "_diagram", _plain_diagram)
        plain.setattr(compile_, "INTEGRAL_OPS", frozenset())
        plain.setattr(compile_.Compiler, "_exact_values", lambda self, node, deps: (
            None if (v := exact_values(self, node, deps)) is None else [Fraction(x) for x in v]))
        slow = _terms(Model(problem))
    assert len(fast) > 50 and fast == slow


def _value_set(problem, op: str, sets: list) -> frozenset | None:
    """compile's value set of `op` over arguments whose value sets are `sets`."""
    compiler = compile_.Compiler(problem)
    args = tuple(ir.Const(Fraction(0), NUM) for _ in sets)
    for arg, values in zip(args, sets):
        compiler._values[id(arg)] = (arg, frozenset(map(Fraction, values)))
    return compiler.values(ir.Op(op, args, NUM))


@pytest.mark.parametrize("op", sorted(compile_.INTEGRAL_OPS | {"/", "%"}))
def test_value_sets_in_ints_are_the_fraction_ones(kb, op, monkeypatch):
    problem = resolve(kb, QUERIES[0]).problem
    arity = 1 if op in ("neg", "abs") else 3 if op in ("sum", "min", "max") else 2
    for sets in (([-3, 0, 2, 7], [1, 4, -5], [6, 0]), ([-3, 2], [Fraction(1, 3), 4], [1])):
        fast = _value_set(problem, op, sets[:arity])
        with monkeypatch.context() as plain:
            plain.setattr(compile_, "INTEGRAL_OPS", frozenset())
            slow = _value_set(problem, op, sets[:arity])
        assert fast == slow and len(fast) > 1 and all(type(v) is Fraction for v in fast)


@pytest.mark.parametrize("op", sorted(compile_.INTEGRAL_OPS))
def test_value_sets_over_a_common_denominator_are_the_fraction_ones(kb, op, monkeypatch):
    """Sets of many denominators, computed in ints times their common denominator (the
    product's result over its square): the Fractions' own values, in lowest terms."""
    problem = resolve(kb, QUERIES[0]).problem
    arity = 1 if op in ("neg", "abs") else 3 if op in ("sum", "min", "max") else 2
    sets = ([Fraction(-5, 2), Fraction(7, 12), 3, Fraction(1, 1024)],
            [Fraction(2, 3), Fraction(-9, 4), Fraction(5, 6)], [Fraction(1, 7), 0])
    fast = _value_set(problem, op, sets[:arity])
    with monkeypatch.context() as plain:
        plain.setattr(compile_, "INTEGRAL_OPS", frozenset())
        slow = _value_set(problem, op, sets[:arity])
    assert fast == slow and len(fast) > 2 and all(type(v) is Fraction for v in fast)



# the Z3 views of if, and, or, not, == and != as they were, through z3py's wrappers
def _plain_if(z3, c, n):
    cond = c.term(n.args[0])
    a, b = c.term(n.args[1]), c.term(n.args[2])
    if isinstance(a, dict) or isinstance(b, dict):
        a = a if isinstance(a, dict) else {}
        b = b if isinstance(b, dict) else {}
        keys = list(dict.fromkeys(list(a) + list(b)))
        return {k: z3.Or(z3.And(cond, a.get(k, False)), z3.And(z3.Not(cond), b.get(k, False)))
                for k in keys}
    return z3.If(cond, a, b)


def _plain_eq(z3, c, n):
    a, b = c.term(n.args[0]), c.term(n.args[1])
    if isinstance(a, dict) or isinstance(b, dict):
        a = a if isinstance(a, dict) else {}
        b = b if isinstance(b, dict) else {}
        common = [z3.And(a[k], b[k]) for k in a if k in b]
        return z3.Or(common) if common else c.boolean(False)
    return a == b


PLAIN_VIEWS = {
    "if": _plain_if, "==": _plain_eq,
    "!=": lambda z3, c, n: z3.Not(_plain_eq(z3, c, n)),
    "and": lambda z3, c, n: z3.And(c.term(n.args[0]), c.term(n.args[1])),
    "or": lambda z3, c, n: z3.Or(c.term(n.args[0]), c.term(n.args[1])),
    "not": lambda z3, c, n: z3.Not(c.term(n.args[0])),
}


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.gpus} {q.model}")
def test_the_operators_c_api_forms_make_z3pys_terms(kb, query, monkeypatch):
    import dataclasses
    from kbsolve.program.operators import OPERATORS
    problem = resolve(kb, query).problem
    fast = _terms(Model(problem))
    calls = {"c": 0}

    def counted(plain):
        def call(*args):
            calls["c"] += 1
            return plain(*args)
        return call

    assert set(PLAIN_VIEWS) <= set(OPERATORS)
    for name, plain in PLAIN_VIEWS.items():
        monkeypatch.setitem(OPERATORS, name, dataclasses.replace(OPERATORS[name],
                                                                 z3=counted(plain)))
    slow = _terms(Model(problem))
    assert calls["c"] > 100 and len(fast) > 50 and fast == slow


def test_a_diagrams_ifs_have_the_class_z3py_gives_them(kb, monkeypatch):
    """The diagram wraps each If it makes through the C API as z3py would."""
    problem = resolve(kb, QUERIES[0]).problem
    made, diagram = [], compile_.Compiler.diagram

    def checked(self, node, leaf):
        term = diagram(self, node, leaf)
        if term is not None:
            made.append((type(term), type(z3.z3._to_expr_ref(term.as_ast(), self.ctx))))
        return term
    monkeypatch.setattr(compile_.Compiler, "diagram", checked)
    Model(problem)
    ifs = [pair for pair in made if pair[0] is z3.ArithRef]
    assert len(ifs) > 20 and all(ours is theirs for ours, theirs in made)
