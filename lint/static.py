"""Deep checks that need no solver: unused lets and defs, options that are never
written anywhere, options without a source, checklist items that recommend
what cannot be set."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from kbsolve.diagnostics import Diagnostic, KbError, Note
from kbsolve.dsl import ast, ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.lint.situations import through_lets


def every_formula(kb: KnowledgeBase) -> Iterator[ir.Node]:
    """Every checked formula of the KB, lets included."""
    for table in (kb.rules, kb.warnings, kb.optins, kb.preferences, kb.memory, kb.speed,
                  kb.work, kb.lets):
        for item in table.values():
            yield item.expr
    for option in kb.options.values():
        yield from (n for n in (option.when, option.source_expr) if n is not None)
    for emit in kb.emits:
        yield from (n for n in (emit.value, emit.when) if n is not None)
    for check in kb.checks.values():
        yield from (n for n in (check.applies, check.enabled) if n is not None)
    for framework in kb.frameworks.values():
        yield from (launch.condition for launch in framework.launches if launch.condition)
        if framework.peak is not None:
            yield framework.peak
    for test in kb.tests.values():
        yield from test.checks


def unused_lets(kb: KnowledgeBase) -> list[Diagnostic]:
    used: set[str] = set()
    for node in every_formula(kb):
        used |= ir.lets_used(node)
    return [Diagnostic(f"let '{let.name}' is defined but never used", let.meta.span,
                       severity="warning", code="unused")
            for key, let in sorted(kb.lets.items()) if key not in used]


def unused_defs(kb: KnowledgeBase) -> list[Diagnostic]:
    """Defs are inlined by the checker, so their calls are read from the syntax."""
    from kbsolve.dsl.parse import parse_module
    defs: dict[str, ast.Decl] = {}
    called: set[str] = set()
    for path, _ in kb.files:
        try:
            module = parse_module(Path(path).read_text(encoding="utf-8"), path)
        except (OSError, KbError):
            continue
        for decl in module.decls:
            if decl.kind == "def":
                defs.setdefault(decl.name, decl)
            called |= _calls(decl)
    return [Diagnostic(f"def '{name}' is defined but never called", decl.name_span,
                       severity="warning", code="unused")
            for name, decl in sorted(defs.items()) if name not in called]


def _calls(value) -> set[str]:
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Call):
            found.add(item.name)
        if isinstance(item, (tuple, list)):
            stack.extend(item)
        elif hasattr(item, "__dataclass_fields__"):
            stack.extend(getattr(item, f) for f in item.__dataclass_fields__
                         if f not in ("span", "name_span", "target_span", "unit_span"))
    return found


def unemitted_options(kb: KnowledgeBase) -> list[Diagnostic]:
    """Options that no `emit` clause, static emit or launch command writes."""
    written: set[str] = set()
    for emit in kb.emits:
        for node in (emit.value, emit.when):
            if node is not None:
                written |= through_lets(
                    kb, node, lambda n: n.option if isinstance(n, ir.OptionRef) else None)
    for framework in kb.frameworks.values():
        for launch in framework.launches:
            written |= {o.key for o in kb.options_of(framework.name)
                        if "{" + o.name + "}" in launch.command}
    return [Diagnostic(f"option '{o.name}' of {o.framework} is never written to any output",
                       o.meta.span, severity="warning", code="no-emit",
                       hint="add: emit main \"key\" (or a static emit that reads it)")
            for key, o in sorted(kb.options.items()) if not o.emits and key not in written]


def unsourced_options(kb: KnowledgeBase) -> list[Diagnostic]:
    return [Diagnostic(f"option '{o.name}' of {o.framework} has no source", o.meta.span,
                       severity="warning", code="no-source",
                       hint='add: source "reference:..." (the fact sheet section)')
            for _, o in sorted(kb.options.items()) if not o.meta.source]


def check_recommendations(kb: KnowledgeBase, dead: dict[str, list[Note]]) -> list[Diagnostic]:
    """A checklist item that recommends an option value no configuration allows."""
    out = []
    for check in kb.checks.values():
        for name, value in check.recommend:
            key = f"{check.framework}.{name}={value!r}"
            if key in dead:
                out.append(Diagnostic(
                    f"check {check.id} recommends {name} = {value!r}, which no configuration "
                    f"allows", check.meta.span, code="dead-recommendation", notes=dead[key]))
    return out
