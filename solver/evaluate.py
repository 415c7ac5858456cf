"""The reference semantics of checked expressions, in exact rationals.

The Z3 model must agree with this evaluator; the enumerator, `estimate` and
the explanations use it directly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase


class Evaluator:
    """Evaluates IR for one framework, given facts and an option assignment."""

    def __init__(self, kb: KnowledgeBase, framework: str, facts: Mapping[str, Any]):
        self.kb = kb
        self.framework = framework
        self.facts = facts

    def run(self, node: ir.Node, assignment: Mapping[str, Any], memo: dict | None = None):
        return _Run(self, assignment, {} if memo is None else memo).eval(node)


class _Run:
    def __init__(self, ev: Evaluator, assignment: Mapping[str, Any], memo: dict):
        self.ev = ev
        self.assignment = assignment
        self.memo = memo

    def eval(self, node: ir.Node):
        if isinstance(node, ir.Const):
            return node.value
        if isinstance(node, ir.OptionRef):
            return self.assignment[node.option]
        if isinstance(node, ir.FactRef):
            value = self.ev.facts.get(node.path)
            if value is None:
                raise KbError(Diagnostic(f"the model or GPU has no value for {node.path}, which "
                                         f"this formula needs", node.span, code="missing-fact"))
            return value
        if isinstance(node, ir.LetRef):
            if node.let not in self.memo:
                self.memo[node.let] = self.eval(self.ev.kb.lets[node.let].expr)
            return self.memo[node.let]
        if isinstance(node, ir.MemorySum):
            return sum((Fraction(self.eval(t.expr)) for t in self.ev.kb.memory.values()
                        if t.framework == node.framework and t.level == node.level
                        and t.location == "gpu"), Fraction(0))
        return _OPS[node.op](self, node)


def _lazy(fn):
    return lambda run, node: fn(run, node.args)


def _strict(fn):
    return lambda run, node: fn(*[run.eval(a) for a in node.args])


def _if(run, args):
    return run.eval(args[1]) if run.eval(args[0]) else run.eval(args[2])


def _and(run, args):
    return bool(run.eval(args[0])) and bool(run.eval(args[1]))


def _or(run, args):
    return bool(run.eval(args[0])) or bool(run.eval(args[1]))


def _implies(run, args):
    return (not run.eval(args[0])) or bool(run.eval(args[1]))


def _div_node(run, node):
    a, b = run.eval(node.args[0]), run.eval(node.args[1])
    if b == 0:
        raise KbError(Diagnostic("division by zero: a fact or option in this formula is 0 for "
                                 "this query", node.span, code="div-zero"))
    return Fraction(a) / Fraction(b)


def _mod(a, b):
    return Fraction(0) if b == 0 else Fraction(a) % Fraction(b)


def _divisible(a, b):
    return b != 0 and Fraction(a) % Fraction(b) == 0


def _eq(a, b):
    return a == b


_OPS = {
    "if": _lazy(_if), "and": _lazy(_and), "or": _lazy(_or), "implies": _lazy(_implies),
    "not": _strict(lambda a: not a), "neg": _strict(lambda a: -a),
    "+": _strict(lambda a, b: Fraction(a) + Fraction(b)),
    "-": _strict(lambda a, b: Fraction(a) - Fraction(b)),
    "*": _strict(lambda a, b: Fraction(a) * Fraction(b)),
    "/": _div_node, "%": _strict(_mod),
    "==": _strict(_eq), "!=": _strict(lambda a, b: a != b),
    "<": _strict(lambda a, b: a < b), "<=": _strict(lambda a, b: a <= b),
    ">": _strict(lambda a, b: a > b), ">=": _strict(lambda a, b: a >= b),
    "min": _strict(lambda *a: min(a)), "max": _strict(lambda *a: max(a)),
    "ceil": _strict(lambda a: Fraction(math.ceil(a))),
    "floor": _strict(lambda a: Fraction(math.floor(a))),
    "abs": _strict(lambda a: abs(a)),
    "at_most_one": _strict(lambda *a: sum(bool(x) for x in a) <= 1),
    "exactly_one": _strict(lambda *a: sum(bool(x) for x in a) == 1),
    "divisible": _strict(_divisible),
}
