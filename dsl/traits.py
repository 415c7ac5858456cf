"""Traits: declarations that frameworks share, instantiated where a framework includes them.

`trait NAME { declarations }` sits in a core module; `include NAME` in a framework
module (or in another trait) stands for the trait's declarations, written at that
place: they belong to the including framework and resolve in the including module
(its options, lets and imports), exactly as if they had been copied there. Every
span of an instance keeps the trait's file:line and carries the includes that
brought it (`Span.via`), so a diagnostic shows both: the declaration in the trait
and each `include` on the way (kconfiglib's "included from").
"""

from __future__ import annotations

import dataclasses

from kbsolve.diagnostics import DiagnosticSink, Note, Span, did_you_mean
from kbsolve.dsl import ast, clauses
from kbsolve.dsl.memo import ByIdentity

# What a trait may hold: what a framework module holds, less what is one per framework.
NOT_IN_TRAIT = {"framework", "fact", "field", "enum", "extend", "silence", "detect"}


def expand(modules: list[ast.Module], sink: DiagnosticSink) -> list[ast.Module]:
    """The modules with every trait declaration removed and every `include` replaced
    by the trait's declarations (errors to `sink`: unknown trait, cycle, misplaced)."""
    traits: dict[str, tuple[ast.Decl, ast.Module]] = {}
    for module in modules:
        for decl in module.decls:
            if decl.kind != "trait":
                continue
            if module.framework is not None:
                sink.error("a trait must be declared in a core module (no 'for')",
                           decl.name_span, code="needs-core",
                           hint="frameworks share it; put it in a module without 'for', "
                                "such as kb/core/traits.kb")
                continue
            first = traits.get(decl.name)
            if first is not None:
                sink.error(f"trait '{decl.name}' is already defined", decl.name_span,
                           code="duplicate",
                           notes=[Note("first defined here", first[0].name_span)])
                continue
            traits[decl.name] = (decl, module)
            for inner in decl.decls:
                if inner.kind not in NOT_IN_TRAIT and inner.kind != "include":
                    clauses.validate(inner, sink)  # checked even where nothing includes it
                if inner.kind in NOT_IN_TRAIT:
                    sink.error(f"{_article(inner.kind)} cannot be declared in a trait",
                               inner.name_span, code="in-trait",
                               hint="a trait holds what frameworks share: options, emits, "
                                    "lets, rules, terms, roles, ...")
    if not any(d.kind in ("trait", "include") for m in modules for d in m.decls):
        return modules
    expanded = []
    for module in modules:
        decls: list[ast.Decl] = []
        for decl in module.decls:
            if decl.kind == "trait":
                continue
            if decl.kind != "include":
                decls.append(decl)
                continue
            if module.framework is None:
                sink.error("an include must sit in a framework module",
                           decl.name_span, code="needs-framework",
                           hint=f"start the file with: module {module.name} for FRAMEWORK")
                continue
            decls += _instances(decl, traits, (), sink)
        expanded.append(dataclasses.replace(module, decls=tuple(decls)))
    return expanded


def _instances(include: ast.Decl, traits: dict, via: tuple[Span, ...],
               sink: DiagnosticSink, chain: tuple[str, ...] = ()) -> list[ast.Decl]:
    name = include.name
    found = traits.get(name)
    if found is None:
        close = did_you_mean(name, traits)
        sink.error(f"unknown trait '{name}'{close}", _via(include.name_span, via),
                   code="unknown-trait",
                   hint="" if close else "declare it in a core module: trait NAME { ... }")
        return []
    if name in chain:
        cycle = " -> ".join(chain[chain.index(name):] + (name,))
        sink.error(f"traits include each other in a circle: {cycle}",
                   _via(include.name_span, via), code="include-cycle",
                   notes=[Note(f"trait '{t}' is declared here", traits[t][0].name_span)
                          for t in chain[chain.index(name):]])
        return []
    trait = found[0]
    here = via + (include.span,)
    out: list[ast.Decl] = []
    for decl in trait.decls:
        if decl.kind == "include":
            out += _instances(decl, traits, here, sink, chain + (name,))
        elif decl.kind not in NOT_IN_TRAIT:
            out.append(_instance(decl, here))
    return out


# Instances made in this process, by (id of the trait's declaration, the includes' places):
# the parsed modules are kept by text (dsl/load.py), so a KB built again makes the same
# instances, and the same objects let the resolver's per-node memo answer them again.
_INSTANCES = ByIdentity(100_000)  # decl -> {the includes' places: its instance}


def _instance(decl: ast.Decl, via: tuple[Span, ...]) -> ast.Decl:
    """`_respan(decl, via)`, made once per declaration and places (ASTs are frozen)."""
    places = tuple(_place(s) for s in via)
    made = _INSTANCES.get(decl) or _INSTANCES.keep(decl, {})
    found = made.get(places)
    if found is None:
        found = made[places] = _respan(decl, via)
    return found


def _place(span: Span) -> tuple:
    """All of a span, its `via` included (Span's == leaves `via` out)."""
    return (span.file, span.line, span.col, span.end_line, span.end_col,
            tuple(_place(s) for s in span.via))


def _via(span: Span | None, via: tuple[Span, ...]) -> Span | None:
    if span is None or not via:
        return span
    return dataclasses.replace(span, via=via)


def _respan(value, via: tuple[Span, ...]):
    """A copy of an AST value whose every span carries `via`."""
    if isinstance(value, Span):
        return dataclasses.replace(value, via=via)
    if isinstance(value, tuple):
        return tuple(_respan(v, via) for v in value)
    if isinstance(value, str) and hasattr(value, "span"):  # parse._Name: a name with its span
        copy = type(value)(str(value), _respan(value.span, via))
        return copy
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _respan(getattr(value, f.name), via)
                   for f in dataclasses.fields(value) if f.name != "via"}
        return dataclasses.replace(value, **changes)
    return value


def _article(kind: str) -> str:
    what = "enum extension" if kind == "extend" else kind
    return f"an {what}" if what[0] in "aeio" else f"a {what}"
