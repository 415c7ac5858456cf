"""The pattern language of a check's `needs_code "code: ..."` (docs/audit.md), read
here so that the front end checks it: a typo in a pattern is an error at its place,
never a check the audit silently drops. audit/code_patterns.py judges scripts by it.

  code: when A, B [require C | D]   a fault when every A, B is used and no C, D is
  code: rank-branch A | B            a fault when A or B is used under `if ...rank...`
  code: name-of CALL has W | X, Y    a fault when CALL's path argument lacks a word of
                                     every comma-separated group
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "code:"
FORMS = ("when", "rank-branch", "name-of")


@dataclass(frozen=True)
class Pattern:
    form: str  # when | rank-branch | name-of
    names: tuple[str, ...]
    required: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()


def parse_pattern(text: str) -> Pattern | None:
    """The pattern of a `needs_code`, or None when it is prose (no `code:`) or broken
    (pattern_problem says why)."""
    found = _read(text)
    return found if isinstance(found, Pattern) else None


def pattern_problem(text: str) -> str:
    """Why a `code:` pattern cannot be read ('' when it can, or when it is prose)."""
    found = _read(text)
    return found if isinstance(found, str) else ""


def _read(text: str) -> Pattern | str | None:
    text = text.strip()
    if not text.startswith(PREFIX):
        return None
    body = text[len(PREFIX):].strip()
    form, _, rest = body.partition(" ")
    if form == "when":
        used, _, required = rest.partition(" require ")
        if not _names(used, ","):
            return "'code: when' needs the names whose use is a fault: when A, B [require C | D]"
        if " require " in f" {rest} " and not _names(required, "|"):
            return "'require' needs the names that cure the fault: require C | D"
        return Pattern("when", _names(used, ","), _names(required, "|"))
    if form == "rank-branch":
        if not _names(rest, "|"):
            return "'code: rank-branch' needs the names to look for: rank-branch A | B"
        return Pattern("rank-branch", _names(rest, "|"))
    if form == "name-of":
        call, has, words = rest.partition(" has ")
        groups = tuple(g for g in (_names(g, "|") for g in words.split(",")) if g)
        if not call.strip() or not has or not groups:
            return "'code: name-of' needs a call and the words its path must hold: " \
                   "name-of CALL has W | X, Y"
        return Pattern("name-of", (call.strip(),), groups=groups)
    from kbsolve.diagnostics import did_you_mean
    close = did_you_mean(form, FORMS) if form else ""
    return f"unknown code pattern '{form}'{close}" if close else \
        f"unknown code pattern '{form or '(nothing)'}'; the forms are {', '.join(FORMS)}"


def _names(text: str, sep: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(sep) if n.strip())
