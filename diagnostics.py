"""Diagnostics shared by every layer: a location, a message, notes, a hint.

Every user-facing error in kbsolve is a `Diagnostic`; a failing step raises
`KbError` holding one or more of them. Rendering follows the compilers:
`file:line:col: error: message`, the source line, a caret, then notes.
"""

from __future__ import annotations

import contextlib
import sys

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Sequence

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3


@dataclass(frozen=True)
class Span:
    """A place in a source file; lines and columns start at 1."""

    file: str
    line: int = 0
    col: int = 0
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Note:
    message: str
    span: Span | None = None


@dataclass(frozen=True)
class Diagnostic:
    message: str
    span: Span | None = None
    severity: str = "error"
    code: str = ""
    notes: tuple[Note, ...] = ()
    hint: str = ""

    def headline(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}{self.severity}: {self.message}"

    def render(self, sources: "SourceCache | None" = None) -> str:
        lines = [self.headline()]
        lines += _excerpt(self.span, sources)
        for note in self.notes:
            where = f"{note.span}: " if note.span else ""
            lines.append(f"{where}note: {note.message}")
        if self.hint:
            lines.append(f"  help: {self.hint}")
        return "\n".join(lines)


class SourceCache:
    """Source texts by file name, for excerpts under diagnostics."""

    def __init__(self) -> None:
        self._texts: dict[str, list[str]] = {}

    def add(self, file: str, text: str) -> None:
        self._texts[file] = text.splitlines()

    def line(self, file: str, line: int) -> str | None:
        lines = self._texts.get(file)
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]


def _excerpt(span: Span | None, sources: SourceCache | None) -> list[str]:
    if span is None or sources is None or span.line <= 0:
        return []
    text = sources.line(span.file, span.line)
    if text is None:
        return []
    shown = text.expandtabs(1)
    width = 1
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    caret = " " * max(span.col - 1, 0) + "^" * max(width, 1)
    return [f"  {shown}", f"  {caret}"]


class KbError(Exception):
    """One or more diagnostics; the only exception kbsolve lets reach a user."""

    def __init__(self, diagnostics: Sequence[Diagnostic] | Diagnostic,
                 sources: SourceCache | None = None, exit_code: int = EXIT_USAGE):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = tuple(diagnostics)
        self.sources = sources
        self.exit_code = exit_code
        super().__init__(self.diagnostics[0].headline() if self.diagnostics else "error")

    def render(self) -> str:
        return "\n".join(d.render(self.sources) for d in self.diagnostics)


_LOOKALIKE = str.maketrans({"O": "0", "o": "0", "I": "1", "l": "1"})


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A ' did you mean X?' suffix, or '' when nothing is close. A letter typed for
    a look-alike digit (A10O for A100) counts as an exact match."""
    pool = sorted(set(candidates))
    lookalike = [c for c in pool if c.translate(_LOOKALIKE).lower() ==
                 word.translate(_LOOKALIKE).lower() and c != word]
    if lookalike:
        return f"; did you mean '{lookalike[0]}'?"
    close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in pool}
        close = [lowered[m] for m in difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)]
    return f"; did you mean '{close[0]}'?" if close else ""


@dataclass
class DiagnosticSink:
    """Collects diagnostics so that one run reports many errors."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, message: str, span: Span | None = None, *, code: str = "",
              notes: Sequence[Note] = (), hint: str = "") -> None:
        self.items.append(Diagnostic(message, span, "error", code, tuple(notes), hint))

    def warning(self, message: str, span: Span | None = None, *, code: str = "",
                notes: Sequence[Note] = (), hint: str = "") -> None:
        self.items.append(Diagnostic(message, span, "warning", code, tuple(notes), hint))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    def raise_if_errors(self, sources: SourceCache | None = None) -> None:
        """Raise every error once (a def body checked at each call reports once)."""
        if self.errors:
            unique = {(d.span, d.message): d for d in self.errors}
            raise KbError(sorted(unique.values(), key=_order), sources)


def _order(d: Diagnostic) -> tuple:
    s = d.span or Span("")
    return (s.file, s.line, s.col, d.message)


DEEPEST = 20000  # Python frames allowed while building and checking a file's AST


@contextlib.contextmanager
def deep_recursion():
    """Long `and` chains nest one level per term; allow them room."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, DEEPEST))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
