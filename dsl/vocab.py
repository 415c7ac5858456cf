"""The vocabulary: what a catalog entry and a query may say, as declared in the KB.

`kb/core/vocabulary.kb` declares, in the rule language, the fields of each
group (`field gpu.memory_gib: GiB { bound > 0 ... }`), the named value sets
those fields take (`enum gpu_vendor [...]`) and the memory levels; a rule pack
adds fields and extends enums (`extend enum gpu_vendor ["intel"] { ... }`).
This module holds the model (`Vocabulary`, `Field`, `Enum`) and builds it from
the parsed files (`field`, `enum`, `extend enum`). It is the language's: the
catalog sits above it (`catalog/schema.py` builds the pydantic models from it,
the catalogs are validated against it) and the language imports no catalog.

The vocabulary runs before the catalogs are validated and before the checker
reads `fact` declarations (each fact must name a declared field). It reports
its own errors; clauses, `because` and `source` are checked with every other
declaration by dsl/check.py. Nothing here imports lark or pydantic: a KB read
from the cache carries its vocabulary, and only `shipped()` (for callers
without a KB) parses files.
"""

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kbsolve.diagnostics import DiagnosticSink, Note, did_you_mean
from kbsolve.dsl.kb import Meta
from kbsolve.dsl.symbols import VOCABULARY
from kbsolve.dsl.types import UNITS, show_value as _show

if TYPE_CHECKING:  # the builder's input; a vocabulary from the KB cache needs no AST classes
    from kbsolve.dsl import ast

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
    """A vocabulary field: its group, kind, enum values, unit and default."""
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
    """The vocabulary's fields and named enums, indexed by path."""
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

    def fact_fields(self, group: str) -> list[str]:
        """The fields of `group` a rule may read as facts, in declaration order
        (bookkeeping and lists are no facts)."""
        return [f.name for f in self.group(group)
                if f.fact_type is not None and f.name not in BOOKKEEPING]


def of(kb) -> Vocabulary:
    """The vocabulary of a checked KB (the shipped one for a KB that has none)."""
    found = getattr(kb, "vocabulary", None) if kb is not None else None
    return found if isinstance(found, Vocabulary) else shipped()


@functools.lru_cache(maxsize=1)
def shipped() -> Vocabulary:
    """The shipped KB's vocabulary, for callers without a KB (`load_catalog(dirs)`,
    `GpuSpec`): parses the shipped core modules (lark), nothing else."""
    from kbsolve.diagnostics import SourceCache
    from kbsolve.dsl.load import _display, shipped_root
    from kbsolve.dsl.parse import parse_module

    sink, sources, modules = DiagnosticSink(), SourceCache(), []
    for path in sorted((shipped_root() / "core").rglob("*.kb")):
        text = path.read_text(encoding="utf-8")
        name = _display(path)
        sources.add(name, text)
        modules.append(parse_module(text, name))
    vocabulary = build(modules, sink)
    sink.raise_if_errors(sources)
    return vocabulary


_BOUNDS = {">": "gt", ">=": "ge", "<": "lt", "<=": "le"}


def build(modules: "list[ast.Module]", sink: DiagnosticSink) -> Vocabulary:
    return _Builder(sink).run(modules)


def _meta(decl: "ast.Decl", module: "ast.Module") -> Meta:
    def text(kind: str) -> str:
        clause = decl.clause(kind)
        return clause.args[0] if clause else ""
    return Meta(decl.span, module.name, text("doc"), text("because"), text("source"))


class _Builder:
    def __init__(self, sink: DiagnosticSink):
        self.sink = sink
        self.enum_decls: "dict[str, ast.Decl]" = {}
        self.values: "dict[str, dict[str, ast.Decl]]" = {}  # enum -> value -> where it came from
        self.enums: dict[str, Enum] = {}
        self.fields: dict[str, Field] = {}
        self.field_decls: "dict[str, ast.Decl]" = {}

    def run(self, modules: "list[ast.Module]") -> Vocabulary:
        found = {kind: [] for kind in VOCABULARY}
        for module in modules:
            for decl in module.decls:
                if decl.kind not in VOCABULARY:
                    continue
                if module.framework is not None:
                    what = "an enum extension" if decl.kind == "extend" else f"a {decl.kind}"
                    self.sink.error(f"{what} must be declared in a core module (no 'for')",
                                    decl.name_span, code="needs-core",
                                    hint="the vocabulary belongs to every framework; put it "
                                         "in a module without 'for', such as kb/core/"
                                         "vocabulary.kb")
                    continue
                found[decl.kind].append((decl, module))
        for decl, module in found["enum"]:
            self._enum(decl, module)
        for decl, module in found["extend"]:
            self._extend(decl, module)
        for decl, module in found["field"]:
            self._field(decl, module)
        return Vocabulary(tuple(self.fields.values()), dict(self.enums))

    # ---- enums
    def _enum(self, decl: "ast.Decl", module: "ast.Module") -> None:
        name = decl.name
        first = self.enum_decls.get(name)
        if first is not None:
            self.sink.error(f"enum '{name}' is already defined", decl.name_span, code="duplicate",
                            notes=[Note("first defined here", first.name_span)],
                            hint=f"to add values, write: extend enum {name} [...]")
            return
        if name in UNITS:
            self.sink.error(f"enum '{name}' has the name of a unit", decl.name_span,
                            code="duplicate", hint="a field's type would be ambiguous; rename it")
            return
        self.enum_decls[name] = decl
        values = self._unique_values(decl, {})
        self.values[name] = values
        self.enums[name] = Enum(name, tuple(values), _meta(decl, module))

    def _unique_values(self, decl: "ast.Decl", known: "dict[str, ast.Decl]") -> "dict[str, ast.Decl]":
        values: "dict[str, ast.Decl]" = {}
        for value in decl.type.values:
            if value in values:
                self.sink.error(f"enum value '{value}' is listed twice", decl.type.span,
                                code="duplicate")
            elif value in known:
                self.sink.error(f"enum '{decl.name}' already has the value '{value}'",
                                decl.type.span, code="duplicate",
                                notes=[Note("declared here", known[value].type.span)])
            else:
                values[value] = decl
        return values

    def _extend(self, decl: "ast.Decl", module: "ast.Module") -> None:
        name = decl.name
        if name not in self.enums:
            close = did_you_mean(name, self.enums)
            self.sink.error(f"unknown enum '{name}'{close}", decl.name_span, code="unknown-enum",
                            hint="" if close else
                            "declare it first: enum NAME [\"a\", \"b\"] { ... }")
            return
        if name in CLOSED_ENUMS:
            self.sink.error(f"enum '{name}' cannot be extended: {CLOSED_ENUMS[name]}",
                            decl.name_span, code="domain")
            return
        added = self._unique_values(decl, self.values[name])
        if not added:
            return
        self.values[name].update(added)
        old = self.enums[name]
        self.enums[name] = Enum(name, old.values + tuple(added), old.meta,
                                old.extensions + ((tuple(added), _meta(decl, module)),))

    # ---- fields
    def _field(self, decl: "ast.Decl", module: "ast.Module") -> None:
        group, name = decl.target, decl.key
        if "." in name or group not in SOURCES:
            hint = f"fields belong to {', '.join(SOURCES[:-1])} or {SOURCES[-1]}: the " \
                   f"catalogs and the query" if "." not in name else ""
            self.sink.error(f"unknown fact group '{group}'{did_you_mean(group, SOURCES)}"
                            if "." not in name else f"a field is GROUP.NAME, not '{decl.name}'",
                            decl.name_span, code="unknown-fact", hint=hint)
            return
        first = self.field_decls.get(decl.name)
        if first is not None:
            self.sink.error(f"field '{decl.name}' is already defined", decl.name_span,
                            code="duplicate", notes=[Note("first defined here", first.name_span)])
            return
        if name in BOOKKEEPING and group != "query":
            self.sink.error(f"'{name}' is bookkeeping of every catalog entry, not a field",
                            decl.name_span, code="duplicate",
                            hint="bookkeeping: " + ", ".join(BOOKKEEPING))
            return
        typed = self._type(decl)
        if typed is None:
            return
        kind, values, enum, unit, bounds = typed
        bounds += self._bounds(decl, kind)
        optional = decl.clause("optional") is not None
        when = self._when(decl)
        spec = Field(group, name, kind, _meta(decl, module), values, enum, unit,
                     optional=optional, bounds=bounds, when=when)
        if decl.default is not None:
            default = self._default(decl, spec)
            if default is None:
                return
            spec = Field(group, name, kind, spec.meta, values, enum, unit, default, True,
                         optional, bounds, when)
            if optional:
                self.sink.error(f"field '{decl.name}' has a default and 'optional'",
                                decl.clause("optional").span, code="domain",
                                hint="a field with a default is never absent; drop 'optional'")
        elif group == "query" and not optional:
            self.sink.error(f"query field '{decl.name}' needs a default", decl.name_span,
                            code="no-default",
                            hint="a query fact has a value even when the user gives none")
            return
        self.field_decls[decl.name] = decl
        self.fields[decl.name] = spec

    def _type(self, decl: "ast.Decl"):
        """(kind, enum values, enum name, unit, bounds), or None after an error."""
        t = decl.type
        if t.kind in ("bool", "str"):
            return t.kind, (), "", None, ()
        if t.kind == "int" and not t.values:
            bounds = () if t.low is None else (("ge", t.low), ("le", t.high))
            if t.low is not None and t.low > t.high:
                self.sink.error(f"empty range {t.low}..{t.high}", t.span, code="domain")
                return None
            return "int", (), "", None, bounds
        if t.kind == "num" and not t.values:
            return "num", (), "", None, ()
        if t.kind == "enum":
            dupes = sorted({v for v in t.values if t.values.count(v) > 1})
            if dupes:
                self.sink.error(f"enum value '{dupes[0]}' is listed twice", t.span,
                                code="duplicate")
            return "enum", tuple(dict.fromkeys(t.values)), "", None, ()
        if t.kind == "unit":
            if t.unit in self.enums:
                return "enum", self.enums[t.unit].values, t.unit, None, ()
            if t.unit in UNITS:
                return "num", (), "", t.unit, ()
            close = did_you_mean(t.unit, list(self.enums) + list(UNITS))
            self.sink.error(f"unknown enum or unit '{t.unit}'{close}", t.span,
                            code="unknown-enum", hint="" if close or not self.enums else
                            "enums: " + ", ".join(self.enums) + "; or a unit such as GiB")
            return None
        if t.kind == "list" and t.values[0].kind == "str":
            return "list", (), "", None, ()
        self.sink.error("fields take bool, int, int A..B, num, str, a unit, an enum's name, "
                        "enum [...] or [str]", t.span, code="type")
        return None

    def _bounds(self, decl: "ast.Decl", kind: str) -> tuple:
        out = []
        for clause in decl.clauses_of("bound"):
            op, value = clause.args
            if kind not in ("int", "num"):
                self.sink.error(f"'bound' needs a number field; field '{decl.name}' is {kind}",
                                clause.span, code="type")
            elif op not in _BOUNDS:
                self.sink.error(f"a bound is <, <=, > or >=, not '{op}'", clause.span,
                                code="domain")
            else:
                out.append((_BOUNDS[op], value))
        return tuple(out)

    def _when(self, decl: "ast.Decl") -> When | None:
        from kbsolve.dsl import ast
        clause = decl.clause("when")
        if clause is None:
            return None
        expr = clause.args[0]
        shape = f'write e.g. when {decl.target}.kind == "llm" (or !=, in [...], not in [...])'
        if isinstance(expr, ast.Binary) and expr.op in ("==", "!=") and \
                isinstance(expr.right, ast.Str):
            subject, values, negated = expr.left, (expr.right,), expr.op == "!="
        elif isinstance(expr, ast.InSet) and all(isinstance(v, ast.Str) for v in expr.values):
            subject, values, negated = expr.operand, expr.values, expr.negated
        else:
            self.sink.error("a field's 'when' compares an enum field of its group with "
                            "strings", expr.span, code="domain", hint=shape)
            return None
        if not (isinstance(subject, ast.Ref) and len(subject.parts) == 2
                and subject.parts[0] == decl.target):
            self.sink.error(f"a field's 'when' reads a field of its own group "
                            f"({decl.target}.*)", subject.span, code="domain", hint=shape)
            return None
        other = self.fields.get(subject.dotted)
        if other is None or other.kind != "enum":
            earlier = [f.path for f in self.fields.values()
                       if f.group == decl.target and f.kind == "enum"]
            what = "is not an enum field" if other is not None else \
                "is not a field declared before this one"
            self.sink.error(f"'{subject.dotted}' {what}{did_you_mean(subject.dotted, earlier)}",
                            subject.span, code="unknown-fact",
                            hint="'when' reads an enum field declared earlier in the vocabulary")
            return None
        for lit in values:
            if lit.value not in other.values:
                self.sink.error(f"'{lit.value}' is not a value of {other.path}"
                                f"{did_you_mean(lit.value, other.values)}", lit.span,
                                code="enum-value",
                                hint="values: " + ", ".join(f'"{v}"' for v in other.values))
                return None
        return When(other.name, tuple(v.value for v in values), negated)

    def _default(self, decl: "ast.Decl", spec: Field):
        """The default literal's value after checking it against the field, else None."""
        from kbsolve.dsl import ast
        lit = decl.default
        what = f"field '{decl.name}'"
        if isinstance(lit, ast.Num):
            ok = spec.kind in ("int", "num") and (lit.unit is None or lit.unit == spec.unit)
            if ok and spec.kind == "int" and lit.value.denominator != 1:
                self.sink.error(f"{what} takes whole numbers, not {_show(lit.value)}", lit.span,
                                code="type")
                return None
            for op, bound in spec.bounds:
                holds = {"gt": lit.value > bound, "ge": lit.value >= bound,
                         "lt": lit.value < bound, "le": lit.value <= bound}[op]
                if ok and not holds:
                    self.sink.error(f"default {_show(lit.value)} is outside the bounds of {what}",
                                    lit.span, code="default-domain")
                    return None
            value = lit.value
        elif isinstance(lit, ast.Str):
            ok = spec.kind in ("str", "enum")
            if ok and spec.kind == "enum" and lit.value not in spec.values:
                self.sink.error(f"default '{lit.value}' is not a value of {what}"
                                f"{did_you_mean(lit.value, spec.values)}", lit.span,
                                code="default-domain",
                                hint="values: " + ", ".join(f'"{v}"' for v in spec.values))
                return None
            value = lit.value
        else:
            ok, value = spec.kind == "bool", lit.value
        if not ok:
            shown = spec.kind if spec.unit is None else f"a number in {spec.unit}"
            self.sink.error(f"default {_show(value)} does not fit {what}, which is {shown}",
                            lit.span, code="type")
            return None
        return value
