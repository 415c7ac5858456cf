"""The language's operators as the checked IR names them (`ir.Op.op`): how each
is written, how many arguments it takes, what it gives, and whether it reads
its arguments only as needed.

This is the one list of operators. The resolver (dsl/resolve.py) types what it
lists here and nothing else; their meanings (the exact, float, vector, interval
and Z3 views of each) are in program/operators.py, which holds exactly these
names (and the tables' own n-ary `sum`) and is tested to agree with this list.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    """How an operator is written and typed: its spelling, arity and result."""
    name: str  # as ir.Op.op spells it
    written: str  # "infix" (a + b), "prefix" (not a, -a), "call" (min(a, b)), "if"
    least: int  # arguments, at least
    most: int | None  # at most (None: any number)
    result: str  # "num", "bool", or "branch" (an `if`: its branches' type)
    lazy: bool = False  # reads an argument only where the ones before it need it


def _infix(name: str, result: str, lazy: bool = False) -> Signature:
    return Signature(name, "infix", 2, 2, result, lazy)


SIGNATURES: dict[str, Signature] = {s.name: s for s in (
    _infix("+", "num"), _infix("-", "num"), _infix("*", "num"), _infix("/", "num"),
    _infix("%", "num"),
    _infix("==", "bool"), _infix("!=", "bool"), _infix("<", "bool"), _infix("<=", "bool"),
    _infix(">", "bool"), _infix(">=", "bool"),
    _infix("and", "bool", lazy=True), _infix("or", "bool", lazy=True),
    _infix("implies", "bool", lazy=True),
    Signature("not", "prefix", 1, 1, "bool"), Signature("neg", "prefix", 1, 1, "num"),
    Signature("if", "if", 3, 3, "branch", lazy=True),
    Signature("min", "call", 2, None, "num"), Signature("max", "call", 2, None, "num"),
    Signature("ceil", "call", 1, 1, "num"), Signature("floor", "call", 1, 1, "num"),
    Signature("abs", "call", 1, 1, "num"),
    Signature("at_most_one", "call", 2, None, "bool"),
    Signature("exactly_one", "call", 2, None, "bool"),
    Signature("divisible", "call", 2, 2, "bool"),
)}

# the builtin functions a formula calls by name (min(a, b), divisible(a, b), ...)
CALLS = tuple(name for name, s in SIGNATURES.items() if s.written == "call")
# the connectives between conditions (both sides must be conditions)
CONNECTIVES = frozenset(name for name, s in SIGNATURES.items()
                        if s.written == "infix" and s.lazy)
