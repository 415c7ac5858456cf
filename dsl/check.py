"""The checker: parsed modules to a typed, immutable KnowledgeBase.

One pass per concern: clauses, symbol tables, facts, option types, lets (with
cycle detection), then every other declaration. All errors of a run are
collected and raised together.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import networkx as nx

from kbsolve import roles as role_registry
from kbsolve.diagnostic_codes import BY_NAME, WARNING, silenceable
from kbsolve.diagnostics import (Diagnostic, DiagnosticSink, KbError, Note, Span,
                                  deep_recursion, did_you_mean)
from kbsolve.dsl import ast, clauses, ir, kb
from kbsolve.dsl.code_pattern import pattern_problem
from kbsolve.dsl.memo import ByIdentity
from kbsolve.dsl.resolve import BUILTINS, ERROR, Context, Resolver, Symbols
from kbsolve.dsl.symbols import Entry, Tables, collect
from kbsolve.dsl.traits import expand as expand_traits
from kbsolve.dsl.types import BOOL, INT, NONE, NUM, STR, UNITS, Type, dim_name
from kbsolve.dsl.types import show_value as _show
from kbsolve.dsl.vocab import BOOKKEEPING, Field, Vocabulary

FILE_KINDS = ("yaml", "json", "env", "params", "args", "script", "requirements")
PRIORITIES = ("P0", "P1", "P2")
LOCATIONS = ("gpu", "host")
UNKNOWN_KEY_MODES = ("ignore", "error")


def check(modules: list[ast.Module], sink: DiagnosticSink, *, partial: bool = False,
          extra_given: tuple[str, ...] = (),
          vocabulary: Vocabulary | None = None) -> kb.KnowledgeBase:
    """`partial`: some files failed to parse; skip errors their absence would cause.
    `vocabulary`: built from `modules` by dsl/vocab.py (done here when None)."""
    if vocabulary is None:
        from kbsolve.dsl.vocab import build
        vocabulary = build(modules, sink)
    modules = expand_traits(modules, sink)
    try:
        with deep_recursion():
            return _Checker(modules, sink, extra_given, partial, vocabulary).run()
    except RecursionError:
        file = modules[-1].file if modules else ""
        raise KbError(Diagnostic("an expression nests too deeply to check; split long "
                                 "chains into lets", Span(file, 1, 1), code="too-deep")) from None


def _has_numbers(expr) -> bool:
    """Whether an expression writes a number other than 0 or 1 (a plain 1 or 0 needs no
    source); once per parsed expression in a process (the ASTs are parsed once)."""
    found = _NUMBERS.get(expr)
    return _NUMBERS.keep(expr, _writes_numbers(expr)) if found is None else found


def _options_read(node: ir.Node) -> frozenset[str]:
    """ir.options_used, once per IR node in a process (the resolver reuses a shipped
    declaration's IR in the next check: dsl/resolve.py Resolver.expr)."""
    found = _OPTIONS_READ.get(node)
    return _OPTIONS_READ.keep(node, frozenset(ir.options_used(node))) if found is None \
        else found


_NUMBERS = ByIdentity(100_000)  # ast expr -> _writes_numbers
_OPTIONS_READ = ByIdentity(100_000)  # ir node -> the options it reads


def _writes_numbers(expr) -> bool:
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Num) and (node.value not in (0, 1) or
                                          (node.unit is not None and node.value != 0)):
            return True
        if hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                value = getattr(node, name)
                if isinstance(value, tuple):
                    stack.extend(v for v in value if hasattr(v, "__dataclass_fields__"))
                elif hasattr(value, "__dataclass_fields__") and name != "span":
                    stack.append(value)
    return False


class _Checker:
    def __init__(self, modules: list[ast.Module], sink: DiagnosticSink,
                 extra_given: tuple[str, ...], partial: bool, vocabulary: Vocabulary):
        self.modules = modules
        self.partial = partial
        self.vocab = vocabulary
        self.levels = vocabulary.memory_levels
        self.sink = sink
        self.extra_given = extra_given
        self.tables: Tables = Tables()
        self.metas: dict[int, kb.Meta] = {}
        self.option_types: dict[str, tuple[ast.Decl, Type]] = {}
        self.fact_types: dict[str, Type] = {}
        self.lets: dict[str, kb.Let] = {}
        self.let_stack: list[str] = []
        self.let_graph = nx.DiGraph()

    # ---- driver
    def run(self) -> kb.KnowledgeBase:
        for module in self.modules:
            for decl in module.decls:
                clauses.validate(decl, self.sink)
        self.tables = collect(self.modules, self.sink, self.partial)
        for module in self.modules:
            for decl in module.decls:
                self.metas[id(decl)] = clauses.meta_of(
                    decl, module.name, self.sink,
                    has_numbers=decl.expr is not None and _has_numbers(decl.expr),
                    frameworks=tuple(sorted(self.tables.frameworks)))
        facts = self._facts()
        self._option_types()
        self.resolver = Resolver(self._symbols(), self.sink)
        lets_decls = self._all("let")
        for entry in lets_decls:
            self._let(f"{entry.scope}.{entry.decl.name}")
        self._report_cycles()
        frameworks = {e.decl.name: self._framework(e) for e in self.tables.frameworks.values()}
        options = {f"{e.scope}.{e.decl.name}": self._option(e) for e in self._all("option")}
        for entry in self._all("def"):
            self._def_body(entry)
        result = kb.KnowledgeBase(
            frameworks=frameworks, options=options,
            nokeys={f"{e.scope}.{e.decl.name}": self._nokey(e) for e in self._all("nokey")},
            facts=facts, lets=dict(sorted(self.lets.items())),
            rules=self._keyed("rule", self._rule), warnings=self._keyed("warn", self._warn),
            preferences=self._keyed("prefer", self._prefer),
            optins=self._keyed("optin", self._optin),
            memory=self._keyed("memory", self._memory), speed=self._keyed("speed", self._speed),
            work=self._keyed("work", self._work),
            emits=tuple(self._static_emit(e) for e in self._all("emit")),
            categories=self._keyed("category", self._category),
            checks=self._keyed("check", self._check),
            detectors={e.scope: self._detector(e) for e in self._all("detect")},
            tests=self._keyed("test", self._test),
            modules=tuple(sorted(self.tables.modules)),
            vocabulary=self.vocab,
            silences=tuple(self._silence(e) for e in self.tables.silences),
        )
        self._cross_checks(result)
        return dataclasses.replace(result, roles=self._roles(result))

    def _all(self, kind: str) -> list[Entry]:
        return self.tables.entries(kind)

    def _keyed(self, kind: str, build) -> dict:
        return {f"{e.scope}.{e.decl.name}": build(e) for e in self._all(kind)}

    def _meta(self, entry: Entry) -> kb.Meta:
        return self.metas[id(entry.decl)]

    def _ctx(self, entry: Entry, memory_level: str | None = None) -> Context:
        return Context(entry.module.name, entry.module.framework, memory_level=memory_level)

    def _cond(self, entry: Entry, expr, what: str) -> ir.Node:
        return self.resolver.expect(expr, self._ctx(entry), "bool", what)

    # ---- facts: each names a field of the vocabulary, and says how rules see it
    def _facts(self) -> dict[str, kb.Fact]:
        facts = {}
        groups = self.vocab.groups
        for path, entry in sorted(self.tables.facts.items()):
            decl = entry.decl
            prefix, field = decl.target, decl.key
            if prefix not in groups:
                if not (self.partial and not groups):
                    self.sink.error(f"unknown fact group '{prefix}'"
                                    f"{did_you_mean(prefix, groups)}", decl.name_span,
                                    code="unknown-fact")
                continue
            spec = self.vocab.field(prefix, field)
            if spec is None and decl.kind == "field":
                continue  # the field itself is broken, and said so
            if spec is None or field in BOOKKEEPING or spec.fact_type is None:
                if spec is not None and spec.kind == "list":
                    self.sink.error(f"the {prefix} attribute '{field}' is a list, which rules "
                                    f"cannot read", decl.name_span, code="unknown-attribute")
                    continue
                close = did_you_mean(field, self.vocab.fact_fields(prefix))
                hint = "" if close else \
                    f"declare the attribute first: field {prefix}.{field}: TYPE {{ ... }}"
                if not self.partial:
                    self.sink.error(f"the {prefix} catalog has no attribute '{field}'{close}",
                                    decl.name_span, code="unknown-attribute", hint=hint)
                continue
            ftype, scale = self._fact_type(decl, spec)
            if ftype is not None:
                facts[path] = kb.Fact(path, ftype, scale, self._meta(entry))
                self.fact_types[path] = ftype
        return facts

    def _fact_type(self, decl: ast.Decl, spec: Field) -> tuple[Type | None, Fraction]:
        t = decl.type
        have = spec.fact_type
        shown = spec.enum or ("an enum" if spec.kind == "enum" else spec.kind)
        if t.kind == "unit" and t.unit in self.vocab.enums:  # the enum, by its name
            if spec.enum != t.unit:
                self.sink.error(f"fact {decl.name} is declared {t.unit} but the catalog "
                                f"attribute is {shown}", t.span, code="fact-type")
                return None, Fraction(1)
            return Type("enum", values=spec.values), Fraction(1)
        if t.kind == "unit":
            if t.unit not in UNITS:
                self.sink.error(f"unknown unit '{t.unit}'"
                                f"{did_you_mean(t.unit, list(UNITS) + list(self.vocab.enums))}",
                                t.span, code="unit")
                return None, Fraction(1)
            if have not in ("int", "num"):
                self.sink.error(f"fact {decl.name} has a unit but the catalog attribute is "
                                f"{shown}", t.span, code="fact-type")
                return None, Fraction(1)
            if spec.unit is not None and spec.unit != t.unit:
                self.sink.error(f"fact {decl.name} is declared in {t.unit} but the catalog "
                                f"attribute is in {spec.unit}", t.span, code="fact-type",
                                notes=[Note("the field is declared here", spec.meta.span)])
                return None, Fraction(1)
            dim, scale = UNITS[t.unit]
            return Type("num", dim, have == "int" and scale.denominator == 1), scale
        declared = {"bool": "bool", "str": "str", "int": "int", "num": "num"}.get(t.kind)
        if t.kind == "enum":
            if not (isinstance(have, tuple) and have[0] == "enum"):
                self.sink.error(f"fact {decl.name} is declared enum but the catalog attribute "
                                f"is {have}", t.span, code="fact-type")
                return None, Fraction(1)
            missing = [v for v in have[1] if v not in t.values]
            if missing:
                hint = f"or write the enum's name: fact {decl.name}: {spec.enum}" \
                    if spec.enum else ""
                self.sink.error(f"fact {decl.name} lacks catalog values: "
                                + ", ".join(f'"{m}"' for m in missing), t.span,
                                code="fact-type", hint=hint)
            return Type("enum", values=tuple(t.values)), Fraction(1)
        compatible = have == declared or (declared == "num" and have == "int") or \
            (declared == "str" and isinstance(have, tuple))
        if not compatible:
            self.sink.error(f"fact {decl.name} is declared {t.kind} but the catalog attribute "
                            f"is {have if isinstance(have, str) else 'an enum'}", t.span,
                            code="fact-type")
            return None, Fraction(1)
        return {"bool": BOOL, "str": STR, "int": INT, "num": NUM}[declared], Fraction(1)

    # ---- options: types first, since expressions need them
    def _option_types(self) -> None:
        for entry in self._all("option"):
            decl = entry.decl
            t = decl.type
            if t.kind == "bool":
                otype = BOOL
            elif t.kind == "enum":
                dupes = {v for v in t.values if t.values.count(v) > 1}
                if dupes:
                    self.sink.error(f"enum value '{sorted(dupes)[0]}' is listed twice", t.span,
                                    code="duplicate")
                otype = Type("enum", values=tuple(dict.fromkeys(t.values)))
            elif t.kind == "int":
                bad = [v for v in t.values if v.denominator != 1]
                if bad:
                    self.sink.error(f"int domain holds a fraction: {float(bad[0])}", t.span,
                                    code="type")
                if t.low is not None and t.low > t.high:
                    self.sink.error(f"empty range {t.low}..{t.high}", t.span, code="domain")
                otype = INT
            elif t.kind == "num":
                otype = NUM
            elif t.kind == "str":
                otype = STR
            else:
                self.sink.error(f"options take bool, enum, int, num or str, not a unit "
                                f"('{t.unit}')", t.span, code="type")
                otype = ERROR
            self.option_types[f"{entry.scope}.{decl.name}"] = (decl, otype)

    def _option(self, entry: Entry) -> kb.Option:
        decl = entry.decl
        key = f"{entry.scope}.{decl.name}"
        otype = self.option_types[key][1]
        t = decl.type
        domain = None
        if t.kind == "bool":
            domain = (False, True)
        elif t.kind == "enum":
            domain = otype.values
        elif t.kind in ("int", "num") and t.values:
            domain = tuple(sorted(set(t.values)))
        if domain is not None and otype.kind == "num":
            otype = Type("num", NONE, otype.integral, ())
        from_clause = decl.clause("from")
        passthrough = decl.clause("passthrough")
        inert = decl.clause("inert")
        if passthrough is not None:
            self._passthrough_clauses(decl, passthrough)
        default = None if passthrough is not None and decl.default is None else \
            self._option_default(entry, otype, domain, from_clause is not None)
        ctx = self._ctx(entry)
        when = decl.clause("when")
        bounds = self._option_bounds(decl, otype, domain, default)
        return kb.Option(
            framework=entry.scope, name=decl.name, type=otype, domain=domain,
            low=t.low, high=t.high, default=default, meta=self._meta(entry),
            emits=tuple(self._emit(entry, c, otype, domain) for c in decl.clauses_of("emit")),
            aliases=tuple(kb.Alias(c.args[0], c.args[1] or "", c.span)
                          for c in decl.clauses_of("alias")),
            value_aliases=tuple(self._value_alias(entry, c, otype)
                                for c in decl.clauses_of("value_alias")),
            when=self.resolver.expect(when.args[0], ctx, "bool", "'when'") if when else None,
            source_expr=self._from(entry, from_clause, otype) if from_clause else None,
            origin=(decl.clause("origin").args[0] if decl.clause("origin") else ""),
            inert=(passthrough or inert).args[0] if (passthrough or inert) else "",
            passthrough=passthrough is not None,
            bounds=bounds,
        )

    def _option_bounds(self, decl: ast.Decl, otype: Type, domain, default) -> tuple:
        """`bound >= 1` opens a number option's set: the set is where the search
        looks, any number of the type within the bounds is valid."""
        from kbsolve.dsl.vocab import _BOUNDS
        out = []
        for clause in decl.clauses_of("bound"):
            op, value = clause.args
            if otype.kind != "num" or domain is None:
                self.sink.error(f"'bound' opens the set of an int or num option; option "
                                f"'{decl.name}' has none", clause.span, code="type")
            elif op not in _BOUNDS:
                self.sink.error(f"a bound is <, <=, > or >=, not '{op}'", clause.span,
                                code="domain")
            else:
                out.append((_BOUNDS[op], value))
        bad = [v for v in (domain or ()) + ((default,) if default is not None else ())
               if out and not kb.within_bounds(v, tuple(out), otype.integral)]
        if bad:
            self.sink.error(f"{_show(bad[0])} of option '{decl.name}' is outside its bounds",
                            decl.clauses_of("bound")[0].span, code="default-domain")
        return tuple(out)

    def _passthrough_clauses(self, decl: ast.Decl, clause: ast.Clause) -> None:
        """A pass-through key is written only when given: no default, nothing it follows."""
        for other in ("from", "inert", "when"):
            if decl.clause(other) is not None:
                self.sink.error(f"option '{decl.name}' is passthrough and cannot take "
                                f"'{other}': it is written as given, never decided",
                                decl.clause(other).span, code="clause")
        if decl.default is not None:
            self.sink.error(f"passthrough option '{decl.name}' has a default; a pass-through "
                            f"key is written only when the user gives it", decl.default.span,
                            code="clause", hint=f"write: option {decl.name}: TYPE {{ ... }}")
        if not decl.clauses_of("emit"):
            self.sink.error(f"passthrough option '{decl.name}' has no emit; say where the "
                            f"key is written", clause.span, code="clause",
                            hint='add: emit main "key"')
        if not clause.args[0].strip():
            self.sink.error(f"passthrough option '{decl.name}' needs a reason: why kbsolve "
                            f"does not model it", clause.span, code="no-because")

    def _option_default(self, entry: Entry, otype: Type, domain, has_from: bool):
        decl = entry.decl
        if decl.default is None:
            if not has_from:
                self.sink.error(f"option '{decl.name}' has no default", decl.name_span,
                                code="no-default", hint="write: option NAME: TYPE = VALUE")
            return None
        value = self.resolver.literal(decl.default, None, "")
        node = self.resolver.expr(decl.default, Context("", None))
        if node.type is ERROR or otype is ERROR:
            return value
        what = f"option '{decl.name}'"
        if not self.resolver.compatible_value(node, otype, what, decl.default.span):
            return value
        if domain is not None and value not in domain:
            shown = ", ".join(_show(v) for v in domain)
            self.sink.error(f"default {_show(value)} is outside the domain of {what}",
                            decl.default.span, code="default-domain", hint=f"domain: {shown}")
        t = decl.type
        if t.low is not None and not (t.low <= value <= t.high):
            self.sink.error(f"default {_show(value)} is outside {t.low}..{t.high} of {what}",
                            decl.default.span, code="default-domain")
        return value

    def _from(self, entry: Entry, clause: ast.Clause, otype: Type) -> ir.Node:
        node = self.resolver.expr(clause.args[0], self._ctx(entry))
        if node.type is ERROR or otype is ERROR:
            return node
        mismatch = node.type.kind != otype.kind or (
            otype.is_num and (node.type.dim != otype.dim
                              or (otype.integral and not node.type.integral)))
        if mismatch:
            self.sink.error(f"'from' gives {node.type} but option '{entry.decl.name}' is "
                            f"{otype}", clause.span, code="type")
        return node

    def _emit(self, entry: Entry, clause: ast.Clause, otype: Type, domain) -> kb.Emit:
        target, key, mapping = clause.args
        self._check_target(entry.scope, target, clause)
        pairs = []
        for lit, written in mapping or ():
            value = self._domain_literal(entry, lit, otype, domain)
            out = None if written is None else (
                tuple(self.resolver.literal(w, None, "") for w in written)
                if isinstance(written, tuple) else self.resolver.literal(written, None, ""))
            pairs.append((value, out))
        return kb.Emit(str(target), key, tuple(pairs) if mapping else None, clause.span)

    def _domain_literal(self, entry: Entry, lit, otype: Type, domain):
        node = self.resolver.expr(lit, Context("", None))
        what = f"option '{entry.decl.name}'"
        if node.type is ERROR or otype is ERROR:
            return getattr(node, "value", None)
        if self.resolver.compatible_value(node, otype, what, lit.span,
                                          entry.decl.name_span) and \
                domain is not None and node.value not in domain:
            self.sink.error(f"{_show(node.value)} is not in the domain of {what}", lit.span,
                            code="enum-value")
        return node.value

    def _value_alias(self, entry: Entry, clause: ast.Clause, otype: Type) -> kb.ValueAlias:
        old, new, note = clause.args
        decl = entry.decl
        old_value = self.resolver.literal(old, None, "")
        new_value = self._domain_literal(entry, new, otype, self._domain_of(decl, otype))
        return kb.ValueAlias(old_value, new_value, note or "", clause.span)

    def _domain_of(self, decl: ast.Decl, otype: Type):
        if decl.type.kind == "bool":
            return (False, True)
        if decl.type.kind == "enum":
            return otype.values
        return tuple(decl.type.values) or None

    def _check_target(self, framework: str, target: str, clause_or_decl) -> None:
        entry = self.tables.frameworks.get(framework)
        if entry is None:
            return
        files = [c.args[0] for c in entry.decl.clauses_of("file")]
        if target not in files:
            span = getattr(target, "span", None) or getattr(clause_or_decl, "target_span", None) \
                or clause_or_decl.span
            self.sink.error(f"unknown output '{target}' of framework {framework}"
                            f"{did_you_mean(target, files)}", span, code="unknown-output",
                            notes=[Note("outputs are declared here", entry.decl.name_span)],
                            hint="declare it in the framework: file NAME yaml \"path\"")

    # ---- lets, resolved lazily so that types flow between them
    def _symbols(self) -> Symbols:
        lets = {f"{e.scope}.{e.decl.name}": (e.decl, e.module.name) for e in self._all("let")}
        defs = {f"{e.scope}.{e.decl.name}": (e.decl, e.module.name, e.module.framework)
                for e in self._all("def")}
        return Symbols(self.option_types, lets, defs, self.fact_types,
                       {p: e.decl.name_span for p, e in self.tables.facts.items()},
                       self.tables.imports, self._let_type, self._on_let_ref,
                       fact_groups=self.vocab.groups, memory_levels=self.levels)

    def _on_let_ref(self, key: str) -> None:
        if self.let_stack:
            self.let_graph.add_edge(self.let_stack[-1], key)

    def _let_type(self, key: str) -> Type:
        if key in self.let_stack:
            return ERROR  # a cycle; reported once by _report_cycles
        let = self._let(key)
        return let.type if let else ERROR

    def _let(self, key: str) -> kb.Let | None:
        if key in self.lets:
            return self.lets[key]
        entry = self._let_entry(key)
        self.let_graph.add_node(key)
        self.let_stack.append(key)
        try:
            node = self.resolver.expr(entry.decl.expr, self._ctx(entry))
        finally:
            self.let_stack.pop()
        ltype = node.type
        unit = entry.decl.unit
        if unit is not None and ltype is not ERROR:
            ltype = self._declared_unit(entry, unit, ltype)
        let = kb.Let(entry.scope, entry.decl.name, node, ltype, self._meta(entry))
        self.lets[key] = let
        return let

    def _let_entry(self, key: str) -> Entry:
        scope, name = key.split(".", 1)
        return self.tables.table("value", scope)[name]

    def _declared_unit(self, entry: Entry, unit: str, ltype: Type) -> Type:
        if unit not in UNITS:
            self.sink.error(f"unknown unit '{unit}'{did_you_mean(unit, UNITS)}",
                            entry.decl.name_span, code="unit")
            return ERROR
        dim = UNITS[unit][0]
        if not ltype.is_num or ltype.dim != dim:
            self.sink.error(f"let '{entry.decl.name}' is declared in {unit} "
                            f"({dim_name(dim)}) but its formula gives {ltype if not ltype.is_num else dim_name(ltype.dim)}",
                            entry.decl.expr.span, code="unit",
                            notes=[Note("declared here", entry.decl.name_span)])
            return ERROR
        return ltype

    def _report_cycles(self) -> None:
        cycles = []
        for cycle in nx.simple_cycles(self.let_graph):
            start = cycle.index(min(cycle))  # the same report whatever the hash seed
            cycles.append(cycle[start:] + cycle[:start])
        for cycle in sorted(cycles):
            entries = [self._let_entry(k) for k in cycle]
            names = " -> ".join(e.decl.name for e in entries + entries[:1])
            self.sink.error(f"derived quantities form a cycle: {names}", entries[0].decl.name_span,
                            code="cycle",
                            notes=[Note(f"'{e.decl.name}' is defined here", e.decl.name_span)
                                   for e in entries[1:]])

    def _def_body(self, entry: Entry) -> None:
        """Check a def's names once, with untyped parameters; types are checked at calls."""
        decl = entry.decl
        seen: set[str] = set()
        for param in decl.params:
            if param in seen:
                self.sink.error(f"def '{decl.name}' has two parameters named '{param}'",
                                decl.name_span, code="duplicate")
            seen.add(param)
        if decl.name in BUILTINS:
            self.sink.error(f"def '{decl.name}' has the name of a builtin, which it could "
                            f"never replace", decl.name_span, code="duplicate")
        params = {p: ir.Const(False, ERROR, decl.name_span) for p in decl.params}
        self.resolver.expr(decl.expr, Context(entry.module.name, entry.module.framework, params))

    # ---- other declarations
    def _framework(self, entry: Entry) -> kb.Framework:
        decl = entry.decl
        files = []
        ctx = Context(entry.module.name, decl.name)
        for c in decl.clauses_of("file"):
            name, kind, path, when = c.args
            if kind not in FILE_KINDS:
                self.sink.error(f"unknown file kind '{kind}'{did_you_mean(kind, FILE_KINDS)}",
                                c.span, code="file-kind")
            cond = self.resolver.expect(when, ctx, "bool", "the file condition") \
                if when is not None else None
            files.append(kb.OutputFile(str(name), str(kind), path, c.span, cond))
        launches = tuple(kb.Launch(c.args[0], self.resolver.expect(c.args[1], ctx, "bool",
                                                                    "the launch condition")
                                   if c.args[1] is not None else None, c.span)
                         for c in decl.clauses_of("launch"))
        task = decl.clause("task")
        task_option = str(task.args[0]) if task else ""
        if task and f"{decl.name}.{task_option}" not in self.option_types:
            self.sink.error(f"task option '{task_option}' is not an option of {decl.name}",
                            task.span, code="unknown-option")
        mode = decl.clause("unknown_keys")
        unknown = mode.args[0] if mode else "error"
        if unknown not in UNKNOWN_KEY_MODES:
            self.sink.error(f"unknown_keys takes \"ignore\" or \"error\", not \"{unknown}\"",
                            mode.span, code="domain")
        peak = None
        if decl.clause("peak"):
            peak = self.resolver.expr(decl.clause("peak").args[0], ctx)
            if peak.type is not ERROR and (not peak.type.is_num or peak.type.dim != (0, 1, -1)):
                self.sink.error(f"peak must be in FLOP/s (FLOPS, TFLOPS), not {peak.type}",
                                decl.clause("peak").span, code="unit")
        tier = decl.clause("tier").args[0] if decl.clause("tier") else Fraction(1)
        if tier.denominator != 1 or tier < 1:
            self.sink.error("tier must be a whole number from 1", decl.clause("tier").span,
                            code="domain")
        kinds = self.vocab.field("model", "kind")
        for clause in decl.clauses_of("models"):
            for value in clause.args:
                if kinds is not None and kinds.kind == "enum" and value not in kinds.values:
                    self.sink.error(f"'{value}' is not a model kind"
                                    f"{did_you_mean(value, kinds.values)}", clause.span,
                                    code="enum-value", hint="kinds (model.kind): " + ", ".join(
                                        f'"{v}"' for v in kinds.values))
        return kb.Framework(decl.name, self._meta(entry),
                            tuple(m for c in decl.clauses_of("models") for m in c.args),
                            task_option, decl.clause("version").args[0]
                            if decl.clause("version") else "", unknown, tuple(files), launches,
                            peak, int(tier))

    def _nokey(self, entry: Entry) -> kb.NoKey:
        if not self._meta(entry).because:
            self.sink.error(f"nokey '{entry.decl.name}' needs a 'because' saying what to use "
                            f"instead", entry.decl.name_span, code="no-because")
        accepted = entry.decl.clause("accepted")
        return kb.NoKey(entry.scope, entry.decl.name, self._meta(entry),
                        accepted.args[0] if accepted else "")

    def _silence(self, entry: Entry) -> kb.Silence:
        """A silenced code must be a warning's (diagnostic_codes.py); errors stay."""
        code, span = entry.decl.name, entry.decl.name_span
        known = BY_NAME.get(code)
        if known is None:
            self.sink.error(f"unknown diagnostic code '{code}'"
                            f"{did_you_mean(code, silenceable())}", span, code="unknown-code",
                            hint="`kbsolve kb codes` lists the codes; a warning's code is "
                                 "the one to silence")
        elif known.severity != WARNING:
            self.sink.error(f"'{code}' is an error; only warnings can be silenced", span,
                            code="not-silenceable", hint=f"fix what it reports: {known.meaning}")
        return kb.Silence(code, self._meta(entry))

    def _rule(self, entry: Entry) -> kb.Rule:
        expr = self._cond(entry, entry.decl.expr, f"rule {entry.decl.name}")
        return kb.Rule(entry.scope, entry.decl.name, entry.decl.rule_kind, expr,
                       self._meta(entry))

    def _warn(self, entry: Entry) -> kb.Warning_:
        expr = self._cond(entry, entry.decl.expr, f"warning {entry.decl.name}")
        accepted = entry.decl.clause("accepted")
        return kb.Warning_(entry.scope, entry.decl.name, expr, self._meta(entry),
                           accepted.args[0] if accepted else "")

    def _optin(self, entry: Entry) -> kb.OptIn:
        decl = entry.decl
        expr = self._cond(entry, decl.expr, f"optin {decl.name}")
        groups = self.vocab.enum_values("optin_group") if self.vocab else ()
        clause = decl.clause("group")
        group = str(clause.args[0]) if clause else ""
        if not clause:
            self.sink.error(f"optin '{decl.name}' has no 'group'", decl.name_span,
                            code="no-group", hint="add: group " + (groups[0] if groups
                                                                    else "numerics"))
        elif group not in groups:
            self.sink.error(f"unknown optin group '{group}'{did_you_mean(group, groups)}",
                            clause.span, code="domain",
                            hint="" if groups else "the vocabulary declares no enum optin_group")
        return kb.OptIn(entry.scope, decl.name, group, expr, self._meta(entry))

    def _prefer(self, entry: Entry) -> kb.Preference:
        decl = entry.decl
        expr = self.resolver.expr(decl.expr, self._ctx(entry))
        if expr.type is not ERROR and not (expr.type.kind == "bool" or
                                           (expr.type.is_num and expr.type.dim == NONE)):
            self.sink.error(f"preference {decl.name} must be a condition or a plain number, "
                            f"not {expr.type}", decl.expr.span, code="type")
        weight = decl.clause("weight").args[0] if decl.clause("weight") else Fraction(1)
        tier = decl.clause("tier").args[0] if decl.clause("tier") else Fraction(1)
        if tier.denominator != 1 or tier < 1:
            self.sink.error("tier must be a whole number from 1", decl.clause("tier").span,
                            code="domain")
        return kb.Preference(entry.scope, decl.name, expr, weight, int(tier), self._meta(entry))

    def _memory(self, entry: Entry) -> kb.MemoryTerm:
        decl = entry.decl
        lowest = self.levels[0] if self.levels else "allocated"
        level = str(decl.clause("at").args[0]) if decl.clause("at") else lowest
        location = str(decl.clause("on").args[0]) if decl.clause("on") else "gpu"
        if level not in self.levels:
            self.sink.error(f"unknown memory level '{level}'{did_you_mean(level, self.levels)}",
                            decl.clause("at").span if decl.clause("at") else decl.name_span,
                            code="domain", hint="" if self.levels else
                            "the vocabulary declares no memory levels (enum memory_level)")
        if location not in LOCATIONS:
            self.sink.error(f"unknown memory location '{location}'"
                            f"{did_you_mean(location, LOCATIONS)}", decl.clause("on").span,
                            code="domain")
        expr = self.resolver.expr(decl.expr, self._ctx(entry, memory_level=level))
        self._want_dim(expr, (1, 0, 0), decl, "memory term")
        return kb.MemoryTerm(entry.scope, decl.name, expr, level, location, self._meta(entry))

    def _speed(self, entry: Entry) -> kb.SpeedTerm:
        decl = entry.decl
        expr = self.resolver.expr(decl.expr, self._ctx(entry))
        kind = "factor"
        if expr.type is not ERROR:
            if expr.type.is_num and expr.type.dim == (0, 0, 1):
                kind = "time"
            elif not (expr.type.is_num and expr.type.dim == NONE):
                self.sink.error(f"speed term {decl.name} must be a time (s) or a plain factor, "
                                f"not {expr.type}", decl.expr.span, code="unit")
        return kb.SpeedTerm(entry.scope, decl.name, expr, kind, self._meta(entry))

    def _work(self, entry: Entry) -> kb.WorkTerm:
        decl = entry.decl
        expr = self.resolver.expr(decl.expr, self._ctx(entry))
        if expr.type is not ERROR and not (expr.type.is_num and expr.type.dim in (NONE, (0, 1, 0))):
            self.sink.error(f"work term {decl.name} must be a count or FLOP, not {expr.type}",
                            decl.expr.span, code="unit")
        return kb.WorkTerm(entry.scope, decl.name, expr, self._meta(entry))

    def _want_dim(self, expr: ir.Node, dim, decl: ast.Decl, what: str) -> None:
        if expr.type is ERROR:
            return
        if not expr.type.is_num or expr.type.dim != dim:
            got = dim_name(expr.type.dim) if expr.type.is_num else str(expr.type)
            self.sink.error(f"{what} {decl.name} must be in {dim_name(dim)}, not {got}",
                            decl.expr.span, code="unit")

    def _static_emit(self, entry: Entry) -> kb.StaticEmit:
        decl = entry.decl
        self._check_target(entry.scope, decl.target, decl)
        value = self.resolver.expr(decl.expr, self._ctx(entry))
        when = decl.clause("when")
        cond = self._cond(entry, when.args[0], "'when'") if when else None
        return kb.StaticEmit(entry.scope, decl.target, decl.key, value, cond, self._meta(entry))

    def _category(self, entry: Entry) -> kb.Category:
        decl = entry.decl
        points = self._whole(decl, "points", required=True)
        return kb.Category(entry.scope, decl.name, decl.titles[0], decl.titles[1], points,
                           self._meta(entry))

    def _whole(self, decl: ast.Decl, kind: str, required: bool) -> int:
        clause = decl.clause(kind)
        if clause is None:
            if required:
                self.sink.error(f"{decl.kind} '{decl.name}' needs '{kind}'", decl.name_span,
                                code="missing-clause")
            return 0
        value = clause.args[0]
        if value.denominator != 1:
            self.sink.error(f"{kind} must be a whole number", clause.span, code="domain")
        return int(value)

    def _check(self, entry: Entry) -> kb.Check:
        decl = entry.decl
        categories = self.tables.table("category", entry.scope)
        if decl.target not in categories:
            self.sink.error(f"unknown category '{decl.target}'"
                            f"{did_you_mean(decl.target, categories)}",
                            decl.target_span or decl.name_span,
                            code="unknown-category")
        priority = str(decl.clause("priority").args[0]) if decl.clause("priority") else "P2"
        if priority not in PRIORITIES:
            self.sink.error(f"priority must be P0, P1 or P2, not '{priority}'",
                            decl.clause("priority").span, code="domain")
        applies = decl.clause("applies")
        enabled = decl.clause("enabled")
        if enabled is None:
            self.sink.error(f"check '{decl.name}' needs 'enabled' (when it counts as on)",
                            decl.name_span, code="missing-clause")
        advice = decl.clauses_of("advice")
        needs_code = decl.clause("needs_code")
        if needs_code is not None and pattern_problem(needs_code.args[0]):
            self.sink.error(pattern_problem(needs_code.args[0]), needs_code.span,
                            code="code-pattern",
                            hint="the forms are in docs/audit.md section 6; without 'code:' the "
                                 "text is prose that the audit asks about")
        return kb.Check(
            framework=entry.scope, id=decl.name, category=decl.target, title_en=decl.titles[0],
            title_zh=decl.titles[1], points=self._whole(decl, "points", required=True),
            priority=priority,
            applies=self._cond(entry, applies.args[0], "'applies'") if applies else None,
            enabled=self._cond(entry, enabled.args[0], "'enabled'") if enabled
            else ir.Const(False, BOOL, decl.span),
            recommend=tuple(self._pins(entry, [p for c in decl.clauses_of("recommend")
                                               for p in c.args])),
            advice_en=advice[0].args[0] if advice else "",
            advice_zh=(advice[0].args[1] or "") if advice else "",
            group=str(decl.clause("group").args[0]) if decl.clause("group") else "",
            judges=tuple(self._option_names(entry, decl.clauses_of("judges"))),
            needs_code=decl.clause("needs_code").args[0] if decl.clause("needs_code") else "",
            meta=self._meta(entry))

    def _option_names(self, entry: Entry, found) -> list[str]:
        names = []
        for clause in found:
            for name in clause.args:
                if f"{entry.scope}.{name}" not in self.option_types:
                    self._unknown_option(entry.scope, str(name), clause.span)
                names.append(str(name))
        return names

    def _unknown_option(self, framework: str, name: str, span) -> None:
        prefix = framework + "."
        known = [k[len(prefix):] for k in self.option_types if k.startswith(prefix)]
        self.sink.error(f"unknown option '{name}' of {framework}{did_you_mean(name, known)}",
                        span, code="unknown-option")

    def _pins(self, entry: Entry, pins: list[ast.Pin]):
        for pin in pins:
            key = f"{entry.scope}.{pin.name}"
            if key not in self.option_types:
                self._unknown_option(entry.scope, pin.name, pin.span)
                continue
            decl, otype = self.option_types[key]
            value = self._domain_literal(Entry(decl, entry.module), pin.value, otype,
                                         self._domain_of(decl, otype))
            yield pin.name, value

    def _detector(self, entry: Entry) -> kb.Detector:
        decl = entry.decl
        if decl.name != entry.scope:
            self.sink.error(f"detect '{decl.name}' must be named after its framework "
                            f"'{entry.scope}'", decl.name_span, code="detect-name")

        def strings(kind):
            return tuple(c.args[0] for c in decl.clauses_of(kind))
        yaml_keys = tuple((c.args[0], self.resolver.literal(c.args[1], None, "")
                           if c.args[1] is not None else None)
                          for c in decl.clauses_of("d_yaml_key"))
        return kb.Detector(entry.scope, strings("d_import"), strings("d_cli"), yaml_keys,
                           strings("d_path"), strings("d_dependency"), strings("d_remote"),
                           self._meta(entry))

    def _test(self, entry: Entry) -> kb.Test:
        decl = entry.decl
        allowed = ("gpus", "model", "framework", "task", "network", "objective",
                   "headroom") + tuple(self.vocab.fact_fields("query")) + self.extra_given
        given = []
        for clause in decl.clauses_of("t_given"):
            for pin in clause.args:
                if pin.name not in allowed:
                    self.sink.error(f"unknown query key '{pin.name}'"
                                    f"{did_you_mean(pin.name, allowed)}", pin.span,
                                    code="unknown-key")
                given.append((pin.name, self.resolver.literal(pin.value, None, "")))
        pins = tuple(self._pins(entry, [c.args[0] for c in decl.clauses_of("t_pin")]))
        expectations, checks = [], []
        for clause in decl.clauses_of("t_expect"):
            exp: ast.Expectation = clause.args[0]
            low = high = None
            if exp.kind == "holds":
                checks.append(self._cond(entry, exp.expr, "an expectation"))
            elif exp.kind == "memory":
                low, high = self._memory_expectation(exp)
            expectations.append(kb.Expectation(exp.kind, tuple(exp.names), low, high, exp.span))
        if not expectations:
            self.sink.error(f"test '{decl.name}' expects nothing", decl.name_span,
                            code="empty-test", hint="add: expect feasible (or another expect)")
        return kb.Test(entry.scope, decl.name, tuple(given), pins, tuple(expectations),
                       tuple(checks), self._meta(entry))

    def _memory_expectation(self, exp: ast.Expectation) -> tuple:
        """The bounds of `expect memory`, in bytes (None where in error)."""
        if exp.names and exp.names[0] not in self.levels:
            self.sink.error(f"unknown memory level '{exp.names[0]}'"
                            f"{did_you_mean(exp.names[0], self.levels)}", exp.span,
                            code="domain")
        bounds = []
        for bound in (exp.low, exp.high):
            node = self.resolver.expr(bound, Context("", None))
            if node.type is not ERROR and (not node.type.is_num or node.type.dim != (1, 0, 0)):
                self.sink.error("memory bounds need a unit such as GiB", bound.span, code="unit")
            bounds.append(node.value if isinstance(node, ir.Const) else None)
        return tuple(bounds)

    # ---- checks that need the whole KB
    def _roles(self, result: kb.KnowledgeBase) -> dict[str, kb.Role]:
        """Every role against roles.py: a known role, an entity of the kind it needs that
        exists, and per framework the roles its declared roles need."""
        found: dict[str, kb.Role] = {}
        for entry in self._all("role"):
            decl, scope = entry.decl, entry.scope
            known = role_registry.BY_NAME.get(decl.name)
            if known is None:
                self.sink.error(f"unknown role '{decl.name}'"
                                f"{did_you_mean(decl.name, role_registry.BY_NAME)}",
                                decl.name_span, code="unknown-role",
                                hint="roles.py lists the roles Python reads")
                continue
            if decl.target != known.kind:
                want = "a list of numbers" if known.kind == "values" else \
                    f"{known.kind} {decl.name}"
                self.sink.error(f"role '{decl.name}' names {_a(known.kind)}, not "
                                f"{_a(decl.target)}", decl.target_span or decl.name_span,
                                code="role-kind", hint=f"write: role {decl.name} = {want}")
                continue
            if known.core and scope != "core":
                self.sink.error(f"role '{decl.name}' is shared by every framework: declare it "
                                f"in a core module", decl.name_span, code="role-kind",
                                hint="move it to kb/core/roles.kb")
                continue
            target = ""
            if known.kind in ("enum", "value"):
                enum_name, _, value = decl.key.partition(".")
                enums = self.vocab.enums if self.vocab is not None else {}
                found_enum = enums.get(enum_name)
                if found_enum is None or (known.kind == "value") != bool(value) or \
                        (value and value not in found_enum.values):
                    names = [f"{e}.{v}" for e, en in enums.items() for v in en.values] \
                        if known.kind == "value" else list(enums)
                    self.sink.error(f"role '{decl.name}' names {known.kind} '{decl.key}', which "
                                    f"the vocabulary does not declare"
                                    f"{did_you_mean(decl.key, names)}",
                                    decl.target_span or decl.name_span, code="role-target")
                    continue
                target = decl.key
            elif known.kind != "values":
                table = getattr(result, role_registry.TABLES[known.kind])
                target = decl.key if known.kind == "fact" else next(
                    (k for k in (f"{scope}.{decl.key}", f"core.{decl.key}") if k in table),
                    f"{scope}.{decl.key}")
                if target not in table:
                    names = [k.split(".", 1)[1] for k in table
                             if k.split(".", 1)[0] in (scope, "core")] \
                        if known.kind != "fact" else list(table)
                    self.sink.error(f"role '{decl.name}' names {known.kind} '{decl.key}', which "
                                    f"{scope} does not declare{did_you_mean(decl.key, names)}",
                                    decl.target_span or decl.name_span, code="role-target")
                    continue
            found[f"{scope}.{decl.name}"] = kb.Role(scope, decl.name, known.kind, target,
                                                   tuple(decl.values), self._meta(entry))
        for key, role in sorted(found.items()):
            for needed in role_registry.BY_NAME[role.name].needs:
                if f"{role.scope}.{needed}" not in found and f"core.{needed}" not in found:
                    self.sink.error(f"{role.scope} declares role '{role.name}' but not role "
                                    f"'{needed}', which it needs", role.meta.span,
                                    code="missing-role",
                                    hint=f"declare: role {needed} = "
                                         f"{role_registry.BY_NAME[needed].kind} {needed}")
        return found

    def _cross_checks(self, result: kb.KnowledgeBase) -> None:
        for test in result.tests.values():
            for exp in test.expectations:
                if exp.kind == "memory":
                    continue
                table, what = (result.rules, "rule") if exp.kind == "infeasible" else \
                    (result.warnings, "warning")
                for name in exp.names:
                    if f"{test.framework}.{name}" in table:
                        continue
                    known = [k.split(".", 1)[1] for k in table
                             if k.startswith(test.framework + ".")]
                    other = result.warnings if what == "rule" else result.rules
                    hint = (f"'{name}' is a {'warning' if what == 'rule' else 'rule'}; write "
                            f"'expect {'warning' if what == 'rule' else 'infeasible'} {name}'"
                            if f"{test.framework}.{name}" in other else "")
                    self.sink.error(f"unknown {what} '{name}'{did_you_mean(name, known)}",
                                    exp.span, code="unknown-rule", hint=hint)
        for option in result.options.values():
            names = {o.name for o in result.options.values() if o.framework == option.framework}
            for alias in option.aliases:
                if alias.old in names:
                    self.sink.error(f"alias '{alias.old}' of option '{option.name}' is itself an "
                                    f"option", alias.span, code="duplicate")
        self._emit_clashes(result)
        self._launch_placeholders(result)
        self._passthrough_reads(result)

    def _passthrough_reads(self, result: kb.KnowledgeBase) -> None:
        """A pass-through option has no value unless given, so no formula may read it."""
        through = {k for k, o in result.options.items() if o.passthrough}
        if not through:
            return
        for node in result.formulas():
            for key in sorted(_options_read(node) & through):
                option = result.options[key]
                self.sink.error(f"option '{option.name}' is passthrough, but a formula reads "
                                f"it", node.span, code="passthrough-read",
                                notes=[Note("declared here", option.meta.span)],
                                hint="model it as an option with a default, or drop the read")

    def _launch_placeholders(self, result: kb.KnowledgeBase) -> None:
        """`{NAME}` in a launch command names a file of the framework (its path) or a
        key of its `params` file (the script's parameter)."""
        for framework in result.frameworks.values():
            params = {f.name for f in framework.files if f.kind == "params"}
            known = [f.name for f in framework.files] + sorted(
                {e.key for e in result.emits if e.framework == framework.name
                 and e.target in params} | {e.key for o in result.options.values()
                                            if o.framework == framework.name
                                            for e in o.emits if e.target in params})
            for launch in framework.launches:
                for name in kb.PLACEHOLDER.findall(launch.command):
                    if name not in known:
                        self.sink.error(f"unknown placeholder '{{{name}}}' in a launch command"
                                        f"{did_you_mean(name, known)}", launch.span,
                                        code="unknown-output",
                                        hint="a placeholder names a file of the framework "
                                             "({main}) or a key of its params file")

    def _emit_clashes(self, result: kb.KnowledgeBase) -> None:
        seen: dict[tuple, object] = {}
        for option in result.options.values():
            for emit in option.emits:
                where = (option.framework, emit.target, emit.key)
                if where in seen:
                    self.sink.error(f"'{emit.key}' in output '{emit.target}' is written by two "
                                    f"options", emit.span, code="duplicate",
                                    notes=[Note("also written here", seen[where])])
                seen[where] = emit.span


def _a(kind: str) -> str:
    return "a list of numbers" if kind == "values" else \
        (f"an {kind}" if kind[0] in "aeio" else f"a {kind}")
