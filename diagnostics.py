"""Diagnostics shared by every layer: a location, a message, notes, a hint.

Every user-facing error in kbsolve is a `Diagnostic`; a failing step raises
`KbError` holding one or more of them. Rendering follows the compilers:
`file:line:col: error: message`, the source line, a caret, then notes.
"""

import contextlib
import re
import sys
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

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
    # A span of a trait's declaration instantiated for a framework: the `include`s
    # that brought it there, outermost first (docs/dsl.md, traits). Not part of
    # the place: two instances of one declaration sit at the same span.
    via: tuple["Span", ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


_PLACE = "_place"  # where a compact holder keeps its span (see compact_spans)


class _CompactSpan:
    """A holder's `span`, pickled as a plain tuple (file, line, col, end_line, end_col[,
    via]) and built into a Span when first read: a plan unpickles ~2,900 spans with the
    KB's scopes and reads few (issue 25). An instance dict's `span` (set by __init__ or a
    first read) hides this (a non-data descriptor)."""

    def __init__(self, default):
        self.default = default  # the dataclass field's default, or None

    def __get__(self, holder, owner=None):
        if holder is None:
            if self.default is None:
                raise AttributeError("span")
            return self.default
        span = holder.__dict__["span"] = Span(*holder.__dict__[_PLACE])
        return span


def _compact_state(holder) -> dict:
    """__getstate__ of a compact holder: its span as a tuple under _PLACE."""
    state = dict(holder.__dict__)
    span = state.get("span")
    if type(span) is Span:
        del state["span"]
        state[_PLACE] = (span.file, span.line, span.col, span.end_line, span.end_col,
                         *((span.via,) if span.via else ()))
    return state


def compact_spans(*classes) -> None:
    """Frozen dataclasses whose field `span` is pickled compact and built on first read."""
    for cls in classes:
        default = cls.__dict__.get("span")
        cls.span = _CompactSpan(default if type(default) is Span else None)
        cls.__getstate__ = _compact_state


@dataclass(frozen=True)
class Note:
    """A diagnostic's note: a message and the other place it points at."""
    message: str
    span: Span | None = None


@dataclass(frozen=True)
class Diagnostic:
    """One error or warning: the message, where it points, its code, notes and hint."""
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
        for include in reversed(self.span.via if self.span else ()):
            lines.append(f"{include}: note: included from here")
        for note in self.notes:
            where = f"{note.span}: " if note.span else ""
            lines.append(f"{where}note: {note.message}")
            for include in reversed(note.span.via if note.span else ()):
                lines.append(f"{include}: note: included from here")
        if self.hint:
            lines.append(f"  help: {self.hint}")
        return "\n".join(lines)


class SourceCache:
    """Source texts by file name, for excerpts under diagnostics."""

    def __init__(self) -> None:
        self._texts: dict[str, list[str]] = {}

    def add(self, file: str, text: str) -> None:
        self._texts[file] = text.splitlines()

    def merge(self, other: "SourceCache | None") -> None:
        """Add another cache's texts (errors of several files reported at once)."""
        if other is not None:
            self._texts.update(other._texts)

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
_TOKENS = re.compile(r"[-_/\s]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_AFTER = re.compile(r"(gib|gb|g|b|k|m|p)?(?=$|x\d|x$)")
_STRICT_UNITS = {"b": "b", "g": "g", "gb": "g", "gib": "g"}  # parameters, memory


def size_tokens(name: str) -> tuple[tuple[str, str], ...]:
    """The size and model numbers of a name with their units, in order: llama3-70b ->
    (('3', ''), ('70', 'b')), RTX-4090 -> (('4090', ''),), Mixtral-8x7B -> 8 and 7b.
    A digit inside a word (t2v, i2v) is no size."""
    out = []
    for token in _TOKENS.split(str(name).lower()):
        for number in _NUMBER.finditer(token):
            unit = _AFTER.match(token, number.end())
            if unit is not None:
                out.append((number.group(), unit.group(1) or ""))
            elif number.start() == 0:  # 8c, a typo of 8b: a size whose unit is unknown
                out.append((number.group(), ""))
    return tuple(out)


def _one_digit_apart(a: str, b: str) -> bool:
    """b is a with one digit added or dropped (H10 for H100, ib-40 for ib-400)."""
    short, long = sorted((a, b), key=len)
    return len(long) == len(short) + 1 and any(long[:i] + long[i + 1:] == short
                                              for i in range(len(long)))


def _relation(mine: tuple, theirs: tuple) -> int:
    """0: the same sizes; 1: a digit typed or dropped in a model number; 2: another size
    (7b vs 70b, 4080 vs 4090, 16G vs 32G: another model or card, not a typo)."""
    if len(mine) != len(theirs):
        return 2
    worst = 0
    for (a, ua), (b, ub) in zip(mine, theirs):
        if ua and ub and ua != ub:
            return 2
        if a == b:
            continue
        if _STRICT_UNITS.get(ua or ub) or not _one_digit_apart(a, b):
            return 2
        worst = 1
    return worst


def _ratio(a: str, b: str) -> float:
    import difflib  # here: only a suggestion reads it, and a plan makes none (issue 25)
    return max(difflib.SequenceMatcher(None, a, b).ratio(),
               difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio())


def _either(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


CLOSE = 0.6  # difflib ratio of a suggestion
NEAREST = 0.5  # of a listed neighbour shown with its size
TIE = 0.01  # suggestions this close are ambiguous


def did_you_mean(word: str, candidates: Iterable[str], *,
                 canonical: Mapping[str, str] | None = None,
                 describe: Mapping[str, str] | None = None) -> str:
    """A ' did you mean X?' suffix, or '' when nothing is close. A letter typed for
    a look-alike digit (A10O for A100) counts as an exact match. `canonical` maps
    aliases to their entry, so that two close names of different entries are
    'ambiguous' rather than one picked; a name whose size number differs (llama3-7b
    and llama3-70b, RTX-4080 and RTX-4090) is never offered as the one meant: with
    `describe` (entry -> its size in words) the nearest are listed with their sizes,
    else nothing is said."""
    pool = sorted(set(map(str, candidates)))
    canonical = canonical or {}
    lookalike = [c for c in pool if c.translate(_LOOKALIKE).lower() ==
                 word.translate(_LOOKALIKE).lower() and c != word]
    if lookalike:
        return f"; did you mean '{lookalike[0]}'?"
    mine = size_tokens(word)
    best: dict[str, tuple[int, float, str]] = {}
    for candidate in pool:
        score = _ratio(word, candidate)
        if score < NEAREST:
            continue
        entry = canonical.get(candidate, candidate)
        key = (_relation(mine, size_tokens(candidate)), -score, candidate)
        if entry not in best or key < best[entry]:
            best[entry] = key
    ranked = sorted(best.items(), key=lambda item: item[1])
    close = sorted(((entry, key) for entry, key in ranked if key[0] < 2 and -key[1] >= CLOSE),
                   key=lambda item: (item[1][1], item[1][0], item[1][2]))
    if close:
        relation, score, candidate = close[0][1]
        peers = [entry for entry, key in close if -key[1] >= -score - TIE]
        if len(peers) > 1:
            return f"; ambiguous: {_either(peers[:3])}"
        size = (describe or {}).get(close[0][0]) if relation else None
        return f"; did you mean '{candidate}'{f' ({size})' if size else ''}?"
    if not describe:
        return ""
    nearest = sorted(((key[1], entry) for entry, key in ranked if entry in describe))[:3]
    if not nearest:
        return ""
    listed = ", ".join(f"'{entry}' ({describe[entry]})" for _, entry in nearest)
    return f"; the nearest listed differ in size: {listed}"


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
