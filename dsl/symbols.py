"""Symbol tables: every declaration under its namespace, duplicates reported.

Namespaces: module names; framework names; facts; per scope (a framework or
`core`) the values (options, lets, defs); per framework the ids (rules,
warnings, preferences, checks), the terms (memory, speed, work), categories,
no-keys and tests.
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbsolve.diagnostics import DiagnosticSink, Note, did_you_mean

if TYPE_CHECKING:  # annotations only; the vocabulary reads VOCABULARY without the AST classes
    from kbsolve.dsl import ast

_NAMESPACE = {"option": "value", "let": "value", "def": "value", "rule": "id", "warn": "id",
              "prefer": "id", "check": "id", "memory": "term", "speed": "term", "work": "term",
              "category": "category", "nokey": "nokey", "test": "test", "detect": "detect",
              "emit": "emit", "optin": "optin", "role": "role"}
VOCABULARY = {"field", "enum", "extend"}
FRAMEWORK_ONLY = {"option", "rule", "warn", "optin", "prefer", "check", "memory", "speed", "work",
                  "category", "nokey", "emit", "detect", "test"}


@dataclass
class Entry:
    """A declaration and the module that declares it."""
    decl: "ast.Decl"
    module: "ast.Module"

    @property
    def scope(self) -> str:
        return self.module.framework or "core"


@dataclass
class Tables:
    """The symbol tables of a KB being checked: modules, frameworks, facts and scoped names."""
    modules: "dict[str, ast.Module]" = field(default_factory=dict)
    frameworks: dict[str, Entry] = field(default_factory=dict)
    facts: dict[str, Entry] = field(default_factory=dict)
    scoped: dict[tuple[str, str], dict[str, Entry]] = field(default_factory=dict)
    imports: dict[str, set[str]] = field(default_factory=dict)
    silences: list[Entry] = field(default_factory=list)  # by code, per pack: never unique

    def table(self, namespace: str, scope: str) -> dict[str, Entry]:
        return self.scoped.setdefault((namespace, scope), {})

    def entries(self, kind: str) -> list[Entry]:
        namespace = _NAMESPACE[kind]
        return [e for (ns, _), table in sorted(self.scoped.items()) if ns == namespace
                for e in table.values() if e.decl.kind == kind]


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeio" else f"a {kind}"


def collect(modules: "list[ast.Module]", sink: DiagnosticSink, partial: bool = False) -> Tables:
    tables = Tables()
    for module in modules:
        first = tables.modules.get(module.name)
        if first is not None:
            sink.error(f"module '{module.name}' is declared twice", module.span,
                       code="duplicate", notes=[Note("first declared here", first.span)])
            continue
        tables.modules[module.name] = module
        if module.framework and _dotted_framework(module.framework, module.span, sink):
            continue  # its declarations would sit under a scope no key can name
        for decl in module.decls:
            _add(tables, Entry(decl, module), sink)
    _check_headers(tables, sink, partial)
    _check_shadowing(tables, sink)
    return tables


def _check_shadowing(tables: Tables, sink: DiagnosticSink) -> None:
    """A framework name that hides a core let or def makes formulas ambiguous."""
    core = tables.table("value", "core")
    for (namespace, scope), table in sorted(tables.scoped.items()):
        if namespace != "value" or scope == "core":
            continue
        for name, entry in table.items():
            if name in core:
                hidden = core[name].decl
                sink.error(f"{entry.decl.kind} '{name}' hides core {hidden.kind} '{name}'",
                           entry.decl.name_span, code="shadow",
                           notes=[Note(f"core {hidden.kind} '{name}' is defined here",
                                       hidden.name_span)],
                           hint="rename one of them")


def _add(tables: Tables, entry: Entry, sink: DiagnosticSink) -> None:
    decl = entry.decl
    if decl.kind == "framework":
        if not _dotted_framework(decl.name, decl.name_span, sink):
            _unique(tables.frameworks, decl.name, entry, sink, "framework")
        return
    if decl.kind == "fact":
        _unique(tables.facts, decl.name, entry, sink, "fact")
        return
    if decl.kind == "silence":
        tables.silences.append(entry)
        return
    if decl.kind == "field" and decl.clause("fact") is not None:
        _unique(tables.facts, decl.name, entry, sink, "fact")  # a field rules may read
    if decl.kind in VOCABULARY:
        return  # fields, enums and their extensions: dsl/vocab.py builds and checks them
    if decl.kind in FRAMEWORK_ONLY and entry.module.framework is None:
        sink.error(f"{_article(decl.kind)} must be declared in a framework module",
                   decl.name_span, code="needs-framework",
                   hint=f"start the file with: module {entry.module.name} for FRAMEWORK")
        return
    namespace = _NAMESPACE[decl.kind]
    _unique(tables.table(namespace, entry.scope), decl.name, entry, sink, decl.kind)


def _dotted_framework(name: str, span, sink: DiagnosticSink) -> bool:
    """A framework's name is the first part of every key it scopes (framework.name,
    split at the first dot): one with a dot in it is reported, and True."""
    if "." not in name:
        return False
    sink.error(f"framework name '{name}' has a '.': a framework's name is the first part of "
               f"every key it scopes (framework.name)", span, code="dotted-framework",
               hint="name the framework without dots (`flow-factory`, not `flow.factory`)")
    return True


def _unique(table: dict[str, Entry], name: str, entry: Entry, sink: DiagnosticSink,
            what: str) -> None:
    first = table.get(name)
    if first is None:
        table[name] = entry
        return
    other = first.decl.kind
    clash = f"{what} '{name}' is already defined" if other == what else \
        f"{what} '{name}' clashes with {other} '{name}'"
    sink.error(clash, entry.decl.name_span, code="duplicate",
               notes=[Note(f"{other} '{name}' first defined here", first.decl.name_span)])


def _check_headers(tables: Tables, sink: DiagnosticSink, partial: bool) -> None:
    """`partial`: some files did not parse, so names they define may be missing."""
    for module in tables.modules.values():
        if module.framework and module.framework not in tables.frameworks and not partial \
                and "." not in module.framework:  # a dotted one is reported by collect()
            sink.error(f"unknown framework '{module.framework}'"
                       f"{did_you_mean(module.framework, tables.frameworks)}", module.span,
                       code="unknown-framework")
        seen: set[str] = set()
        for name, span in module.imports:
            if name not in tables.modules:
                sink.error(f"unknown module '{name}'{did_you_mean(name, tables.modules)}", span,
                           code="unknown-module")
            elif name in seen:
                sink.error(f"module '{name}' is imported twice", span, code="duplicate")
            seen.add(name)
        tables.imports[module.name] = seen
