"""Duplication in rule files, as written (before traits are included): what issue 25
counted to ask for the language's second edition.

Two measures, over the parsed modules:

* **identical pairs**: two declarations of different frameworks that are equal up
  to their places (spans) and to the framework's own name, written in strings
  (`"llamafactory:src/..."` against `"pytorch:..."` is no difference by name alone
  when the rest is equal); a group of n such declarations counts n(n-1)/2 pairs;
* **fact/field pairs**: a `fact` declaration beside a `field` of the same name (the
  first edition's two declarations of one attribute).

`python -m bench.kb_duplication` prints both for the shipped KB, with the
language's size (declaration kinds, clauses, keywords).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from typing import NamedTuple

from kbsolve.diagnostics import Span
from kbsolve.dsl import ast


class Pair(NamedTuple):
    kind: str
    name: str
    first: tuple[str, Span]  # (framework or "core", span)
    second: tuple[str, Span]


def identical_pairs(modules: list[ast.Module]) -> list[Pair]:
    """Declarations of two different frameworks equal up to spans and framework names."""
    groups: dict[object, list[tuple[str, ast.Decl]]] = defaultdict(list)
    for module in modules:
        scope = module.framework or "core"
        for decl in module.decls:
            if decl.kind == "include":
                continue  # a reference to shared declarations, not a copy of them
            groups[_shape(decl, None)].append((scope, decl))
            if module.framework:
                groups[("named", _shape(decl, module.framework))].append((scope, decl))
    seen: set[tuple[int, int]] = set()
    pairs = []
    for members in groups.values():
        for (a_scope, a), (b_scope, b) in itertools.combinations(members, 2):
            key = tuple(sorted((id(a), id(b))))
            if a_scope == b_scope or key in seen:
                continue
            seen.add(key)
            pairs.append(Pair(a.kind, a.name, (a_scope, a.span), (b_scope, b.span)))
    return sorted(pairs, key=lambda p: (p.kind, p.name, p.first[0], p.second[0]))


def fact_field_pairs(modules: list[ast.Module]) -> list[Pair]:
    fields = {d.name: (m.framework or "core", d) for m in modules for d in m.decls
              if d.kind == "field"}
    return [Pair("fact", d.name, (m.framework or "core", d.span),
                 (fields[d.name][0], fields[d.name][1].span))
            for m in modules for d in m.decls if d.kind == "fact" and d.name in fields]


def _shape(value, framework: str | None):
    """The value with spans left out and, when `framework`, its name in strings masked."""
    if isinstance(value, Span):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,) + tuple(
            _shape(getattr(value, f.name), framework)
            for f in dataclasses.fields(value) if f.compare)
    if isinstance(value, tuple):
        return tuple(_shape(v, framework) for v in value)
    if isinstance(value, str):
        return str(value).replace(framework, "\0") if framework else str(value)
    return value
