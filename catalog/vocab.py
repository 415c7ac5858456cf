"""The vocabulary: what a catalog entry and a query may say, as declared in the KB.

`kb/core/vocabulary.kb` declares, in the rule language, the fields of each
group (`field gpu.memory_gib: GiB { bound > 0 ... }`), the named value sets
those fields take (`enum gpu_vendor [...]`) and the memory levels; a rule pack
adds fields and extends enums (`extend enum gpu_vendor ["intel"] { ... }`).
`dsl/vocab.py` builds a `Vocabulary` from the parsed files; `catalog/schema.py`
builds the pydantic models from it.

Nothing here imports lark or pydantic: a KB read from the cache carries its
vocabulary, and only `shipped()` (for callers without a KB) parses files.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.dsl.kb import Meta

# Where kbsolve reads each group's entries from: a catalog file, or the query.
# The KB declares the fields; it cannot invent a place to read them from.
SOURCES = ("gpu", "model", "network", "query")

# The enum that names the memory levels, lowest first (each level's total holds
# the levels below it). The solver sums exactly these, so packs cannot extend it.
MEMORY_LEVEL_ENUM = "memory_level"
CLOSED_ENUMS = {MEMORY_LEVEL_ENUM: "the solver sums exactly these levels"}

# Fields every catalog entry has, and the GPU's alias note: bookkeeping about
# the entry, never facts, so they stay in Python (catalog/schema.py).
BOOKKEEPING = ("name", "aliases", "source", "notes", "alias_note")


@dataclass(frozen=True)
class Enum:
    """A named value set; `values` holds the extensions too, in load order."""

    name: str
    values: tuple[str, ...]
    meta: Meta
    extensions: tuple[tuple[tuple[str, ...], Meta], ...] = ()


@dataclass(frozen=True)
class When:
    """`when model.kind == "llm"`: the field applies only to such entries."""

    field: str
    values: tuple[str, ...]
    negated: bool = False

    def holds(self, value: Any) -> bool:
        return (value in self.values) != self.negated


@dataclass(frozen=True)
class Field:
    group: str
    name: str
    kind: str  # bool | int | num | str | enum | list
    meta: Meta
    values: tuple[str, ...] = ()  # an enum's values
    enum: str = ""  # the named enum, '' for an inline `enum [...]`
    unit: str | None = None  # the catalog number's unit (`GiB`), None when plain
    default: Any = None  # the literal default (Fraction, str, bool), when has_default
    has_default: bool = False
    optional: bool = False  # may be absent (None) even where it applies
    bounds: tuple[tuple[str, Fraction], ...] = ()  # ("gt", 0), ("le", 99), ...
    when: When | None = None

    @property
    def path(self) -> str:
        return f"{self.group}.{self.name}"

    @property
    def required(self) -> bool:
        """An entry the field applies to must give it."""
        return not (self.has_default or self.optional)

    @property
    def fact_type(self):
        """'bool' | 'int' | 'num' | 'str' | ('enum', values), or None (lists are no facts)."""
        if self.kind == "enum":
            return ("enum", self.values)
        return None if self.kind == "list" else self.kind

    def python_default(self) -> Any:
        """The default as the catalog holds it (an int, a float, a string, a bool)."""
        value = self.default
        if isinstance(value, Fraction):
            return int(value) if self.kind == "int" else float(value)
        return value

    def signature(self) -> tuple:
        """Everything the pydantic model depends on (no locations, no reasons)."""
        return (self.name, self.kind, self.values, self.unit, self.has_default,
                self.python_default() if self.has_default else None, self.optional,
                tuple((op, str(v)) for op, v in self.bounds),
                (self.when.field, self.when.values, self.when.negated) if self.when else None)


@dataclass(frozen=True)
class Vocabulary:
    fields: tuple[Field, ...] = ()
    enums: dict[str, Enum] = field(default_factory=dict)

    @functools.cached_property
    def _index(self) -> dict[str, Field]:
        return {f.path: f for f in self.fields}

    @property
    def groups(self) -> tuple[str, ...]:
        """Groups with at least one field, in the order of their first field."""
        return tuple(dict.fromkeys(f.group for f in self.fields))

    def group(self, group: str) -> list[Field]:
        return [f for f in self.fields if f.group == group]

    def field(self, group: str, name: str) -> Field | None:
        return self._index.get(f"{group}.{name}")

    def default(self, path: str) -> Any:
        """A field's default as the catalog or query holds it (`query.headroom_pct` -> 10)."""
        found = self._index.get(path)
        if found is None or not found.has_default:
            raise KeyError(f"the vocabulary declares no default for '{path}'")
        return found.python_default()

    @property
    def memory_levels(self) -> tuple[str, ...]:
        found = self.enums.get(MEMORY_LEVEL_ENUM)
        return found.values if found else ()

    def enum_values(self, name: str) -> tuple[str, ...]:
        found = self.enums.get(name)
        return found.values if found else ()

    def signature(self, group: str) -> tuple:
        return tuple(f.signature() for f in self.group(group))


def of(kb) -> Vocabulary:
    """The vocabulary of a checked KB (the shipped one for a KB that has none)."""
    found = getattr(kb, "vocabulary", None) if kb is not None else None
    return found if isinstance(found, Vocabulary) else shipped()


@functools.lru_cache(maxsize=1)
def shipped() -> Vocabulary:
    """The shipped KB's vocabulary, for callers without a KB (`load_catalog(dirs)`,
    `GpuSpec`): parses the shipped core modules (lark), nothing else."""
    from kbsolve.diagnostics import DiagnosticSink, SourceCache
    from kbsolve.dsl.load import _display, shipped_root
    from kbsolve.dsl.parse import parse_module
    from kbsolve.dsl.vocab import build

    sink, sources, modules = DiagnosticSink(), SourceCache(), []
    for path in sorted((shipped_root() / "core").rglob("*.kb")):
        text = path.read_text(encoding="utf-8")
        name = _display(path)
        sources.add(name, text)
        modules.append(parse_module(text, name))
    vocabulary = build(modules, sink)
    sink.raise_if_errors(sources)
    return vocabulary
