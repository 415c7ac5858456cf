"""The syntax tree of one rule file: declarations, clauses and expressions.

Every node carries the `Span` it was parsed from. Nothing here is resolved:
names are plain strings until the checker binds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union

from kbsolve.diagnostics import Span

# ---- expressions -----------------------------------------------------------


@dataclass(frozen=True)
class Num:
    value: Fraction
    unit: str | None
    span: Span = field(compare=False)
    unit_span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Str:
    value: str
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Bool:
    value: bool
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Ref:
    """A name, possibly dotted (`lora_rank`, `gpu.memory_gib`)."""

    parts: tuple[str, ...]
    span: Span = field(compare=False)

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple["Expr", ...]
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "not"
    operand: "Expr"
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % == != < <= > >= and or implies
    left: "Expr"
    right: "Expr"
    span: Span = field(compare=False)


@dataclass(frozen=True)
class InSet:
    operand: "Expr"
    values: tuple["Literal", ...]
    negated: bool
    span: Span = field(compare=False)


@dataclass(frozen=True)
class IfElse:
    cond: "Expr"
    then: "Expr"
    else_: "Expr"
    span: Span = field(compare=False)


@dataclass(frozen=True)
class MatchArm:
    values: tuple["Literal", ...]
    result: "Expr"
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Match:
    subject: "Expr"
    arms: tuple[MatchArm, ...]
    default: "Expr | None"
    span: Span = field(compare=False)


Literal = Union[Num, Str, Bool]
Expr = Union[Num, Str, Bool, Ref, Call, Unary, Binary, InSet, IfElse, Match]

# ---- types -----------------------------------------------------------------


@dataclass(frozen=True)
class TypeExpr:
    """`bool`, `enum [..]`, `int [..]`, `int a..b`, `int`, `num [..]`, `num`, `str`, a
    unit (or, in the vocabulary, an enum's name), or `[TYPE]` (a list; fields only)."""

    kind: str  # bool | enum | int | num | str | unit | list
    values: tuple = ()  # enum strings, int/num set members, or a list's element type
    low: Fraction | None = None
    high: Fraction | None = None
    unit: str | None = None
    span: Span = field(default=Span(""), compare=False)


# ---- clauses ---------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    """A keyword-led line inside `{ ... }`; `args` depend on `kind`."""

    kind: str
    args: tuple
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Pin:
    name: str
    value: Literal
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Expectation:
    kind: str  # feasible | infeasible | warning | no_warning | memory | holds
    names: tuple[str, ...] = ()
    low: Literal | None = None
    high: Literal | None = None
    expr: Expr | None = None
    span: Span = field(default=Span(""), compare=False)


# ---- declarations ----------------------------------------------------------


@dataclass(frozen=True)
class Decl:
    """One top-level declaration.

    `kind` is the keyword (option, rule, let, ...), `name` its identifier.
    Keyword-specific header parts live in named fields; the rest is clauses.
    """

    kind: str
    name: str
    span: Span = field(compare=False)
    name_span: Span = field(compare=False)
    clauses: tuple[Clause, ...] = ()
    type: TypeExpr | None = None
    default: Literal | None = None
    expr: Expr | None = None
    params: tuple[str, ...] = ()
    rule_kind: str = ""  # require | forbid
    unit: str | None = None
    target: str = ""  # emit target, check category, fact or field group, extended enum
    target_span: Span | None = field(default=None, compare=False)
    key: str = ""  # emit key, fact or field name
    titles: tuple[str, ...] = ()  # category/check titles (en, zh)
    values: tuple = ()  # a role's list of numbers (`role NAME = [1, 2]`)
    decls: tuple["Decl", ...] = ()  # a trait's declarations

    def clauses_of(self, kind: str) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.kind == kind)

    def clause(self, kind: str) -> Clause | None:
        found = self.clauses_of(kind)
        return found[0] if found else None


@dataclass(frozen=True)
class Module:
    name: str
    framework: str | None
    imports: tuple[tuple[str, Span], ...]
    decls: tuple[Decl, ...]
    file: str
    span: Span = field(compare=False)
