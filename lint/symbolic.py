"""One Z3 model of a framework's hard rules over every catalog situation at once.

Each fact-only part of a formula (`gpu.fa3`, `divisible(model.layers, 2)` is
not one, `model.layers` is) becomes a stand-in option whose values are the
ones the catalogs give it; a table says which value vectors occur together
(lint/situations.py). The solver's own compiler then sees only options, so
the whole catalog is compiled once instead of once per GPU and model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import z3

from kbsolve import roles
from kbsolve.diagnostics import KbError
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.lint.situations import Space, space
from kbsolve.solver.compile import Compiler
from kbsolve.program.problem import build_problem
from kbsolve.program.program import reads

STAND_IN = "fact#"


class _Rewriter:
    def __init__(self, kb: KnowledgeBase, parts: list[ir.Node]):
        self.kb = kb
        self.key = {id(p): f"{STAND_IN}{i}" for i, p in enumerate(parts)}
        self.memo: dict[int, ir.Node] = {}
        self.lets: dict[str, Any] = {}

    def __call__(self, node: ir.Node) -> ir.Node:
        found = self.memo.get(id(node))
        if found is None:
            found = self._rewrite(node)
            self.memo[id(node)] = found
        return found

    def _rewrite(self, node: ir.Node) -> ir.Node:
        if id(node) in self.key:
            return ir.OptionRef(self.key[id(node)], node.type, node.span)
        if isinstance(node, ir.Op):
            return ir.Op(node.op, tuple(self(a) for a in node.args), node.type, node.span)
        if isinstance(node, ir.LetRef):
            if node.let not in self.lets:
                self.lets[node.let] = None
                let = self.kb.lets[node.let]
                self.lets[node.let] = replace(let, expr=self(let.expr))
            return ir.LetRef(node.let, node.type, node.span)
        if isinstance(node, ir.MemorySum):
            return ir.MemorySum(node.framework, node.level, node.type, node.span)
        return node


class SymbolicModel:
    """Rules and `when` clauses as named parts (the shape CoreFinder expects),
    over the real options plus the stand-ins, with the catalog table asserted."""

    def __init__(self, kb: KnowledgeBase, framework: str):
        rules = kb.of(kb.rules, framework)
        warns = kb.of(kb.warnings, framework)
        options = kb.options_of(framework)
        nodes = [r.expr for r in rules] + [w.expr for w in warns] + \
            [o.when for o in options if o.when is not None]
        self.space: Space = space(kb, framework, nodes)
        rewrite = _Rewriter(kb, self.space.parts)
        self.rules = {f"rule:{r.framework}.{r.id}": (r, rewrite(r.expr)) for r in rules}
        self.warnings = {f"warn:{w.framework}.{w.id}": (w, rewrite(w.expr)) for w in warns}
        whens = {o.key: rewrite(o.when) for o in options if o.when is not None}
        memory = {k: replace(t, expr=rewrite(t.expr)) for k, t in kb.memory.items()
                  if t.framework == framework}
        lets = {k: v for k, v in rewrite.lets.items() if v is not None}
        self.kb = replace(kb, lets={**kb.lets, **lets}, memory={**kb.memory, **memory})
        facts = self.space.places[0].facts if self.space.places else {}
        self.p = build_problem(self.kb, framework, facts, {})
        self.free = self._open_pinnable(options)
        for index, part in enumerate(self.space.parts):
            seen = tuple(dict.fromkeys(row[index] for row in self.space.rows))
            self.p.choices[f"{STAND_IN}{index}"] = (False, True) \
                if part.type.kind == "bool" else seen
        self.c = Compiler(self.p)
        self.parts: dict[str, z3.BoolRef] = {}
        self.failed: dict[str, str] = {}
        self.unpinned: list[str] = []  # rules left out: they read an option nobody decides
        for name, (rule, expr) in self.rules.items():
            if self.reads_free_option(rule.expr):
                self.unpinned.append(name)
                continue
            self._add(name, lambda r=rule, e=expr: self.c.term(
                e if r.kind == "require" else ir.Op("not", (e,), e.type, e.span)))
        for key, when in whens.items():
            default = kb.options[key].default
            if key in self.p.choices and default in self.p.choices[key]:
                self._add(f"when:{key}", lambda w=when, k=key, d=default: z3.Implies(
                    z3.Not(self.c.term(w)), self.c.equals(k, d)))
        self.catalog = self._table()

    def _open_pinnable(self, options) -> set[str]:
        """Options that follow `from` can still be pinned: open their domains.
        Returns the options left fixed (no finite domain)."""
        for option in options:
            if option.key in self.p.fixed and option.domain is not None:
                del self.p.fixed[option.key]
                self.p.choices[option.key] = tuple(option.domain)
            elif option.key in self.p.fixed and option.type.kind == "bool":
                del self.p.fixed[option.key]
                self.p.choices[option.key] = (False, True)
        return set(self.p.fixed)

    def _add(self, name: str, build) -> None:
        try:
            self.parts[name] = build()
        except KbError as error:
            self.failed[name] = error.diagnostics[0].message

    def _table(self) -> z3.BoolRef:
        keys = [f"{STAND_IN}{i}" for i in range(len(self.space.parts))]
        if not keys:
            return z3.BoolVal(bool(self.space.rows), self.c.ctx)
        return z3.Or([z3.And([self.c.equals(k, v) for k, v in zip(keys, row)])
                      for row in self.space.rows] or [z3.BoolVal(False, self.c.ctx)])

    def domain_constraints(self) -> list:
        return self.c.domain_constraints() + [self.catalog]

    def term(self, node: ir.Node):
        try:
            return self.c.term(node)
        except KbError:
            return None

    def where(self, solution) -> str:
        """The catalog situation a satisfying model sits in."""
        keys = [f"{STAND_IN}{i}" for i in range(len(self.space.parts))]
        chosen = self.c.decode(solution)
        row = tuple(chosen[k] for k in keys)
        for place, known in zip(self.space.places, self.space.rows):
            if known == row:
                return place.label
        return ""

    def reads_user_shape(self, node: ir.Node) -> bool:
        """Reads a query fact the user sets freely (sequence length, image size,
        frames): the few shapes tried cannot prove it never holds."""
        return bool(roles.free_shapes() & _facts(self.kb, node))

    def reads_free_option(self, node: ir.Node) -> bool:
        return bool(_options(self.kb, node) & self.free)


def _facts(kb: KnowledgeBase, node: ir.Node) -> set[str]:
    return reads(kb, node).facts


def _options(kb: KnowledgeBase, node: ir.Node) -> set[str]:
    return reads(kb, node).options
