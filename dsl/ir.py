"""Checked expressions: names bound, types known, defs inlined, match desugared.

Operators in `Op.op`: + - * / % neg not and or implies == != < <= > >= if
min max ceil floor abs at_most_one exactly_one divisible.
"""

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterator, Union

from kbsolve.diagnostics import Span, compact_spans
from kbsolve.dsl.types import Type


@dataclass(frozen=True)
class Const:
    """A constant: a bool, an exact number or a string."""
    value: Union[bool, Fraction, str]
    type: Type
    span: Span = field(compare=False, default=Span(""))


@dataclass(frozen=True)
class OptionRef:
    """A read of a framework option by its key."""
    option: str  # "framework.name"
    type: Type
    span: Span = field(compare=False, default=Span(""))


@dataclass(frozen=True)
class FactRef:
    """A read of a fact (a query or catalog number) by its path."""
    path: str  # "gpu.memory_gib"
    type: Type
    span: Span = field(compare=False, default=Span(""))


@dataclass(frozen=True)
class LetRef:
    """A read of a let by its scoped name."""
    let: str  # "scope.name"
    type: Type
    span: Span = field(compare=False, default=Span(""))


@dataclass(frozen=True)
class MemorySum:
    """The sum of a framework's GPU memory terms at one level."""

    framework: str
    level: str
    type: Type
    span: Span = field(compare=False, default=Span(""))


@dataclass(frozen=True)
class Op:
    """An operator (ir.Op.op names it, dsl/operators.py signs it) over its arguments."""
    op: str
    args: tuple["Node", ...]
    type: Type
    span: Span = field(compare=False, default=Span(""))


Node = Union[Const, OptionRef, FactRef, LetRef, MemorySum, Op]


def walk(node: Node) -> Iterator[Node]:
    """Every node below and including `node`, depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, Op):
            stack.extend(reversed(current.args))


def options_used(node: Node) -> set[str]:
    return {n.option for n in walk(node) if isinstance(n, OptionRef)}


def lets_used(node: Node) -> set[str]:
    return {n.let for n in walk(node) if isinstance(n, LetRef)}


def facts_used(node: Node) -> set[str]:
    return {n.path for n in walk(node) if isinstance(n, FactRef)}


compact_spans(Const, OptionRef, FactRef, LetRef, MemorySum, Op)
