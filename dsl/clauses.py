"""Which clauses each declaration takes, how often, and which it needs."""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from kbsolve.diagnostics import DiagnosticSink, Note, did_you_mean
from kbsolve.dsl import ast
from kbsolve.dsl.kb import Meta
from kbsolve.dsl.memo import ByIdentity

_META = {"doc", "because", "source"}
_REPEATABLE = {"emit", "alias", "value_alias", "file", "launch", "models", "recommend",
               "advice", "judges", "d_import", "d_cli", "d_yaml_key", "d_path",
               "d_dependency", "d_remote", "t_given", "t_pin", "t_expect", "bound"}

ALLOWED: dict[str, set[str]] = {
    "framework": _META | {"models", "task", "version", "unknown_keys", "file", "launch", "peak",
                          "tier"},
    "option": _META | {"emit", "alias", "value_alias", "when", "from", "origin", "versions",
                       "inert", "passthrough", "bound"},
    "nokey": _META | {"accepted"},
    "fact": _META,
    "field": _META | {"optional", "bound", "when", "fact"},
    "enum": _META,
    "extend": _META,
    "let": _META,
    "def": _META,
    "rule": _META | {"versions"},
    "warn": _META | {"versions", "accepted"},
    "optin": _META | {"group"},
    "prefer": _META | {"weight", "tier"},
    "memory": _META | {"at", "on"},
    "speed": _META,
    "work": _META,
    "emit": _META | {"when"},
    "category": _META | {"points"},
    "check": _META | {"points", "priority", "applies", "enabled", "recommend", "advice",
                      "group", "judges", "needs_code"},
    "detect": _META | {"d_import", "d_cli", "d_yaml_key", "d_path", "d_dependency",
                       "d_remote"},
    "test": {"doc", "t_given", "t_pin", "t_expect"},
    "silence": _META,
    "role": _META,
}

# Declarations that always need a because and a source (the vocabulary too: it
# is knowledge like any other, and a pack's new GPU vendor must say why).
NEEDS_REASON = {"rule", "warn", "optin", "prefer", "memory", "speed", "work", "field", "enum",
                "extend", "silence", "role"}
NEEDS_SOURCE = NEEDS_REASON | {"category", "check", "framework"}

# Generic kinds; every framework declared in the KB is a kind too (its repository).
SOURCE_KINDS = ("seed", "reference", "deepspeed", "peft",
                "transformers", "accelerate", "pytorch", "paper", "datasheet", "hf", "url",
                "fitted", "measured", "estimate", "issue", "docs", "kb")
_SOURCE_RE = re.compile(r"^([a-z][a-z0-9_-]*):\s*\S")


def shown(kind: str) -> str:
    """A clause kind as the user writes it."""
    return {"value_alias": "alias value", "t_given": "given", "t_pin": "pin",
            "t_expect": "expect"}.get(kind, kind.removeprefix("d_"))


def validate(decl: ast.Decl, sink: DiagnosticSink) -> None:
    allowed = ALLOWED[decl.kind]
    seen: dict[str, ast.Clause] = {}
    for clause in decl.clauses:
        if clause.kind not in allowed:
            choices = ", ".join(sorted(shown(k) for k in allowed))
            sink.error(f"'{shown(clause.kind)}' is not allowed in {article(decl.kind)}; "
                       f"allowed here: {choices}", clause.span, code="clause")
            continue
        if clause.kind in seen and clause.kind not in _REPEATABLE:
            sink.error(f"'{shown(clause.kind)}' is given twice in {decl.kind} '{decl.name}'",
                       clause.span, code="duplicate-clause",
                       notes=[Note("first given here", seen[clause.kind].span)])
            continue
        seen[clause.kind] = clause


def article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeio" else f"a {kind}"


def meta_of(decl: ast.Decl, module: str, sink: DiagnosticSink, *, has_numbers: bool,
            frameworks: tuple[str, ...] = ()) -> Meta:
    """The Meta of a declaration, reporting a missing because or source; a clean one
    is remembered per parsed declaration in a process (the ASTs are parsed once, and
    the shipped KB's are met again under every pack)."""
    key = (module, has_numbers, frameworks)
    found = _METAS.get(decl)
    if found is not None and found[0] == key:
        return found[1]
    before = len(sink.items)
    meta = _meta(decl, module, sink, has_numbers, frameworks)
    if len(sink.items) == before:
        _METAS.keep(decl, (key, meta))
    return meta


_METAS = ByIdentity(100_000)  # decl -> ((module, has_numbers, frameworks), Meta)


def _meta(decl: ast.Decl, module: str, sink: DiagnosticSink, has_numbers: bool,
          frameworks: tuple[str, ...]) -> Meta:
    doc = _text(decl, "doc")
    because = _text(decl, "because")
    source = _text(decl, "source")
    versions = _text(decl, "versions")
    needs_reason = decl.kind in NEEDS_REASON or (has_numbers and decl.kind in ("let", "def"))
    needs_source = decl.kind in NEEDS_SOURCE or needs_reason
    what = "extend enum" if decl.kind == "extend" else decl.kind
    if needs_reason and not because:
        why = "its numbers need" if decl.kind in ("let", "def") else "it needs"
        sink.error(f"{what} '{decl.name}' has no 'because'; {why} a reason",
                   decl.name_span, code="no-because",
                   hint='add: because "why this holds"')
    if needs_source and not source:
        sink.error(f"{what} '{decl.name}' has no 'source'", decl.name_span,
                   code="no-source", hint='add: source "seed:002#A" (or reference:, paper:, ...)')
    if source:
        _check_source(decl, source, sink, tuple(dict.fromkeys(SOURCE_KINDS + tuple(frameworks))))
    if versions:
        try:
            SpecifierSet(versions)
        except InvalidSpecifier:
            sink.error(f"versions '{versions}' is not a version specifier such as '>=0.9.5'",
                       decl.clause("versions").span, code="versions")
    return Meta(decl.span, module, doc, because, source, versions)


def _check_source(decl: ast.Decl, source: str, sink: DiagnosticSink, kinds) -> None:
    match = _SOURCE_RE.match(source)
    span = decl.clause("source").span
    if not match:
        sink.error(f"source '{source}' does not start with a kind such as 'seed:' or 'paper:'",
                   span, code="source-kind")
        return
    kind = match.group(1)
    if kind not in kinds:
        sink.error(f"unknown source kind '{kind}'{did_you_mean(kind, kinds)}",
                   span, code="source-kind",
                   hint="kinds: " + ", ".join(kinds))


def _text(decl: ast.Decl, kind: str) -> str:
    clause = decl.clause(kind)
    return clause.args[0] if clause else ""
