"""Deep checks that need no solver: unused lets and defs, options that are never
written anywhere, options that move nothing and do not say so (inert), options
without a source, checklist items that recommend what cannot be set."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from kbsolve.diagnostics import Diagnostic, KbError, Note
from kbsolve.dsl import ast, ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.program import reads


def every_formula(kb: KnowledgeBase) -> Iterator[ir.Node]:
    """Every checked formula of the KB, lets included."""
    return kb.formulas()


def unused_lets(kb: KnowledgeBase) -> list[Diagnostic]:
    used: set[str] = set()
    for node in every_formula(kb):
        used |= ir.lets_used(node)
    return [Diagnostic(f"let '{let.name}' is defined but never used", let.meta.span,
                       severity="warning", code="unused")
            for key, let in sorted(kb.lets.items()) if key not in used]


def unused_defs(kb: KnowledgeBase) -> list[Diagnostic]:
    """Defs are inlined by the checker, so their calls are read from the syntax (each
    text parsed once a process, as the loader parses it: ~1.5 s a deep check before)."""
    from kbsolve.dsl.load import parsed_module
    defs: dict[str, ast.Decl] = {}
    called: set[str] = set()
    for path, _ in kb.files:
        try:
            module = parsed_module(Path(path).read_text(encoding="utf-8"), path)
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
                written |= reads(kb, node).options
    for framework in kb.frameworks.values():
        for launch in framework.launches:
            written |= {o.key for o in kb.options_of(framework.name)
                        if "{" + o.name + "}" in launch.command}
    return [Diagnostic(f"option '{o.name}' of {o.framework} is never written to any output",
                       o.meta.span, severity="warning", code="no-emit",
                       hint="add: emit main \"key\" (or a static emit that reads it)")
            for key, o in sorted(kb.options.items()) if not o.emits and key not in written]


def option_effects(kb: KnowledgeBase) -> dict[str, str]:
    """Option key -> the first thing one of its values moves: a memory, speed or work
    term, a rule, a warning, an emitted file (its own emit, a static emit, a launch
    command or a file condition), or, through `when` and `from`, an option that
    moves one. Options absent from the result move nothing."""
    def read(node) -> set[str]:
        return reads(kb, node).options
    effects: dict[str, str] = {}

    def mark(keys, what: str) -> None:
        for key in keys:
            effects.setdefault(key, what)
    for name, table in (("memory term", kb.memory), ("speed term", kb.speed),
                        ("work term", kb.work), ("rule", kb.rules), ("warning", kb.warnings)):
        for key, item in sorted(table.items()):
            mark(read(item.expr), f"{name} {key.split('.', 1)[1]}")
    for emit in kb.emits:
        for node in (emit.value, emit.when):
            if node is not None:
                mark(read(node), f"emit {emit.target}:{emit.key}")
    for framework in kb.frameworks.values():
        for launch in framework.launches:
            mark({o.key for o in kb.options_of(framework.name)
                  if "{" + o.name + "}" in launch.command}, "a launch command")
            if launch.condition is not None:
                mark(read(launch.condition), "a launch command")
        for file in framework.files:
            if file.condition is not None:
                mark(read(file.condition), f"file {file.name}")
    for key, option in sorted(kb.options.items()):
        if option.emits and not option.passthrough:
            mark({key}, f"emit {option.emits[0].target}:{option.emits[0].key}")
    changed = True
    while changed:  # `when` and `from` of an option that moves something move it too
        changed = False
        for key, option in sorted(kb.options.items()):
            if key not in effects:
                continue
            for node in (option.when, option.source_expr):
                if node is None:
                    continue
                for other in sorted(read(node) - effects.keys()):
                    effects[other] = f"option {option.name}"
                    changed = True
    return effects


def silent_options(kb: KnowledgeBase) -> list[Diagnostic]:
    """Every option moves memory, speed, a file, a rule or a warning, or says (inert)
    why it moves nothing; an inert one that moves something is a contradiction."""
    effects = option_effects(kb)
    out = []
    for key, option in sorted(kb.options.items()):
        if option.passthrough:
            continue
        if key not in effects and not option.inert:
            out.append(Diagnostic(
                f"option '{option.name}' of {option.framework} is silent: no value of it "
                f"moves memory, speed, an emitted file, a rule or a warning", option.meta.span,
                code="silent-option",
                hint='model its effect, or declare it: inert "why no value matters"'))
        elif key in effects and option.inert:
            out.append(Diagnostic(
                f"option '{option.name}' of {option.framework} is declared inert, but it "
                f"moves {effects[key]}", option.meta.span, severity="warning",
                code="inert-moves", hint="drop the inert clause"))
    return out


def unsourced_options(kb: KnowledgeBase) -> list[Diagnostic]:
    return [Diagnostic(f"option '{o.name}' of {o.framework} has no source", o.meta.span,
                       severity="warning", code="option-no-source",
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
