"""`kb fmt`'s migrations: rewrite a form the language replaced into its new form.

The one migration so far joins a fact to its field (the language's second edition,
issue 25): `fact gpu.vendor: gpu_vendor { doc "..." }` beside
`field gpu.vendor: gpu_vendor { ... }` becomes the field alone, with a bare `fact`
clause in its body. It applies only where the meaning is kept exactly: the field is
among the files being formatted, the two declare the same type (so the fact's unit,
enum or domain is the field's), the fact says nothing but a `doc`, and the fact
declaration has whole lines to itself. The field keeps its own `doc` (the fact's
moves over only when the field has none). A fact of a field declared elsewhere (a
pack that lets rules read a shipped field) stays a `fact` declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbsolve.diagnostics import KbError
from kbsolve.dsl import ast


@dataclass(frozen=True)
class _Edit:
    line: int  # 1-based
    col: int  # 1-based; 0 with `end_line`: whole lines from `line` to `end_line`
    end_line: int
    text: str


def merge_facts(texts: dict[str, str]) -> dict[str, str]:
    """The files' texts with every fact that repeats a field among them folded into
    the field (`fact` in its body); files that do not parse are left as they are."""
    from kbsolve.dsl.parse import parse_module
    modules: dict[str, ast.Module] = {}
    for path, text in texts.items():
        try:
            modules[path] = parse_module(text, path)
        except KbError:
            continue
    fields: dict[str, tuple[str, ast.Decl]] = {}
    for path, module in modules.items():
        for decl in module.decls:
            if decl.kind == "field" and module.framework is None:
                fields.setdefault(decl.name, (path, decl))
    edits: dict[str, list[_Edit]] = {}
    for path, module in modules.items():
        lines = texts[path].split("\n")
        for decl in module.decls:
            if decl.kind != "fact" or decl.name not in fields:
                continue
            field_path, field = fields[decl.name]
            if not _mergeable(decl, field, lines):
                continue
            edits.setdefault(path, []).append(
                _Edit(decl.span.line, 0, decl.span.end_line, ""))
            edits.setdefault(field_path, []).append(
                _insert_fact(field, decl, texts[field_path].split("\n"), lines))
    return {path: _apply(text, edits.get(path, [])) for path, text in texts.items()}


def _mergeable(fact: ast.Decl, field: ast.Decl, lines: list[str]) -> bool:
    if fact.type != field.type or field.clause("fact") is not None:
        return False
    if any(c.kind != "doc" for c in fact.clauses):
        return False
    if not field.clauses or field.clause("because") is None:
        return False  # no body to write `fact` into (and the field is broken anyway)
    first, last = lines[fact.span.line - 1], lines[fact.span.end_line - 1]
    before = first[:fact.span.col - 1]
    after = last[fact.span.end_col - 1:].strip()
    return not before.strip() and not after  # a comment after it would be lost


def _insert_fact(field: ast.Decl, fact: ast.Decl, field_lines: list[str],
                 fact_lines: list[str]) -> _Edit:
    """`fact` (with the fact's doc when the field has none) before the field's `because`."""
    anchor = field.clause("because").span
    words = ["fact"]
    doc = fact.clause("doc")
    if doc is not None and field.clause("doc") is None:
        words.insert(0, _source(fact_lines, doc.span))
    line = field_lines[anchor.line - 1]
    lead = line[:anchor.col - 1]
    separator = "\n" + lead if not lead.strip() else " "
    return _Edit(anchor.line, anchor.col, anchor.line,
                 separator.join(words) + separator)


def _source(lines: list[str], span) -> str:
    if span.line == span.end_line:
        return lines[span.line - 1][span.col - 1:span.end_col - 1]
    parts = [lines[span.line - 1][span.col - 1:]] + lines[span.line:span.end_line - 1] + \
        [lines[span.end_line - 1][:span.end_col - 1]]
    return "\n".join(parts)


def _apply(text: str, edits: list[_Edit]) -> str:
    if not edits:
        return text
    lines = text.split("\n")
    for edit in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        if edit.col == 0:
            del lines[edit.line - 1:edit.end_line]
        else:
            row = lines[edit.line - 1]
            lines[edit.line - 1] = row[:edit.col - 1] + edit.text + row[edit.col - 1:]
    return "\n".join(lines)
