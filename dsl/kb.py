"""The checked knowledge base: immutable, typed, every item with its location.

Options, rules and terms are keyed by `framework.name`; lets by `scope.name`
where the scope is a framework or `core`.
"""

# Annotations evaluated (no `from __future__ import annotations`): dataclasses reads a
# string annotation with a regex three times a field (ClassVar, InitVar, KW_ONLY), ~2 ms
# of a cold plan's imports over this module's 200 fields (issue 25); diagnostics.py and
# dsl/ir.py likewise.
import functools
import pickle
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.collector import paused
from kbsolve.diagnostics import Span, compact_spans
from kbsolve.dsl.ir import Node
from kbsolve.dsl.types import Type


_BOUND_HOLDS = {"gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
                "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}
_BOUND_SIGN = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def within_bounds(value: Any, bounds: tuple, integral: bool) -> bool:
    """A number (whole when `integral`) that meets every (op, limit) of `bounds`."""
    if not isinstance(value, (int, Fraction)) or isinstance(value, bool):
        return False
    whole = not integral or Fraction(value).denominator == 1
    return whole and all(_BOUND_HOLDS[op](value, limit) for op, limit in bounds)


@dataclass(frozen=True)
class Meta:
    """What every declaration carries: where, why, from what source."""

    span: Span
    module: str
    doc: str = ""
    because: str = ""
    source: str = ""
    versions: str = ""


@dataclass(frozen=True)
class OutputFile:
    """A file the framework reads: its kind, path and the plans it is written for."""
    name: str
    kind: str  # yaml | json | env | params | args | script | requirements
    path: str
    span: Span
    condition: Node | None = None  # written only for plans where it holds


@dataclass(frozen=True)
class Launch:
    """A launch command and the condition under which a plan uses it."""
    command: str
    condition: Node | None
    span: Span


@dataclass(frozen=True)
class Framework:
    """A framework: its models, task option, version, files and launch commands."""
    name: str
    meta: Meta
    models: tuple[str, ...]
    task_option: str
    version: str
    unknown_keys: str
    files: tuple[OutputFile, ...]
    launches: tuple[Launch, ...]
    peak: Node | None = None  # the job's peak FLOP/s, for MFU
    tier: int = 1  # without --framework, the lowest tier that trains the model's kind plans


@dataclass(frozen=True)
class Emit:
    """Where an option is written in the framework's files, and how its values map."""
    target: str
    key: str
    value_map: tuple[tuple[Any, Any], ...] | None  # (option value, written value or None=omit)
    span: Span


@dataclass(frozen=True)
class Alias:
    """An old or wrong key name of an option (read in users' configs), with its note."""
    old: str
    note: str
    span: Span


@dataclass(frozen=True)
class ValueAlias:
    """An option value's old spelling and the value it now means."""
    old: Any
    new: Any
    note: str
    span: Span


# A launch template's `{file}` or `{PARAM}`; `${X}` is the shell's own.
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Option:
    """A framework option: its type, domain or bounds and default."""
    framework: str
    name: str
    type: Type
    domain: tuple | None  # finite values, or None for free options
    low: Fraction | None
    high: Fraction | None
    default: Any
    meta: Meta
    emits: tuple[Emit, ...] = ()
    aliases: tuple[Alias, ...] = ()
    value_aliases: tuple[ValueAlias, ...] = ()
    when: Node | None = None
    source_expr: Node | None = None  # `from`: the value follows this expression
    origin: str = ""
    inert: str = ""  # why no value of it moves memory, speed, a file, a rule or a warning
    passthrough: bool = False  # kept and emitted as given, never decided nor read (inert says why)
    bounds: tuple = ()  # (("ge", 1),): the set is where the search looks; any number within is valid

    def accepts(self, value: Any) -> bool:
        """Whether the framework takes `value`: a value of the domain, or, for a set
        opened by `bound`, any number of the option's type within the bounds."""
        if self.bounds:
            return within_bounds(value, self.bounds, self.type.integral)
        if self.domain is not None:
            return value in self.domain
        if self.low is not None:
            return self.low <= value <= self.high
        return True

    def valid_values(self) -> str:
        """The values it takes, in words (for refusals)."""
        if self.bounds:
            kind = "whole numbers" if self.type.integral else "numbers"
            return f"{kind} " + " and ".join(f"{_BOUND_SIGN[op]} {limit}"
                                             for op, limit in self.bounds)
        if self.domain is not None:
            return ", ".join(str(v) for v in self.domain)
        return f"{self.low}..{self.high}" if self.low is not None else "any value"

    @property
    def key(self) -> str:
        return f"{self.framework}.{self.name}"

    @property
    def is_free(self) -> bool:
        """Free options (str, plain num/int) are never decided by the solver."""
        return self.domain is None and self.low is None and self.type.kind != "bool"


@dataclass(frozen=True)
class NoKey:
    """A config key the framework has no option for, and why it is accepted if it is."""
    framework: str
    key: str
    meta: Meta
    accepted: str = ""  # the parser takes the key (why), but nothing reads it here


@dataclass(frozen=True)
class Role:
    """`role NAME = KIND ENTITY` or `role NAME = [numbers]`: the entity (its full key)
    or numbers that play a part Python relies on (roles.py)."""

    scope: str  # a framework, or core: the default every framework shares
    name: str
    kind: str  # let | option | memory | ... | values
    target: str  # the entity's key (framework.name, core.name, or a fact's name); "" for values
    values: tuple = ()
    meta: Meta = None


@dataclass(frozen=True)
class Silence:
    """`silence "CODE"`: the pack that declares it hides that warning of `kb check
    --deep` in its own files (meta.span.file is in the pack)."""
    code: str
    meta: Meta


@dataclass(frozen=True)
class Fact:
    """A fact's path, type and the scale from its catalog unit to base units."""
    path: str
    type: Type
    scale: Fraction  # catalog value times scale gives base units
    meta: Meta


@dataclass(frozen=True)
class Let:
    """A named expression in a scope, with its checked type."""
    scope: str
    name: str
    expr: Node
    type: Type
    meta: Meta

    @property
    def key(self) -> str:
        return f"{self.scope}.{self.name}"


@dataclass(frozen=True)
class Rule:
    """A hard rule (require or forbid) over options and facts."""
    framework: str
    id: str
    kind: str  # require | forbid
    expr: Node
    meta: Meta

    @functools.cached_property
    def constraint(self) -> Node:
        """The condition that must hold (forbid negated); one node per rule, so
        that caches keyed by node identity hit."""
        from kbsolve.dsl.ir import Op
        from kbsolve.dsl.types import BOOL
        return self.expr if self.kind == "require" else Op("not", (self.expr,), BOOL,
                                                           self.meta.span)


@dataclass(frozen=True)
class Warning_:
    """A warning over options and facts, and why a plan may still accept it."""
    framework: str
    id: str
    expr: Node
    meta: Meta
    accepted: str = ""  # why a plan may still choose what the warning is about


@dataclass(frozen=True)
class OptIn:
    """A change to what is learned (numerics, recipe) or an unrequested library:
    the solver takes it only when the user pins it or allows it (--allow)."""
    framework: str
    name: str
    group: str  # a value of the vocabulary's enum optin_group
    expr: Node  # true when the configuration makes the change
    meta: Meta

    @property
    def key(self) -> str:
        return f"{self.framework}.{self.name}"

    @functools.cached_property
    def rule(self) -> "Rule":
        """The constraint a query adds while the change is neither pinned nor allowed."""
        return Rule(self.framework, f"ALLOW_{self.name}", "forbid", self.expr, self.meta)


@dataclass(frozen=True)
class Preference:
    """A weighted preference among equal plans, in its tier."""
    framework: str
    id: str
    expr: Node
    weight: Fraction
    tier: int
    meta: Meta


@dataclass(frozen=True)
class MemoryTerm:
    """A named memory term: its expression, level (allocated, reserved, device) and location."""
    framework: str
    name: str
    expr: Node
    level: str  # allocated | reserved | device
    location: str  # gpu | host
    meta: Meta


@dataclass(frozen=True)
class SpeedTerm:
    """A named speed term: a time or a factor."""
    framework: str
    name: str
    expr: Node
    kind: str  # time | factor
    meta: Meta


@dataclass(frozen=True)
class WorkTerm:
    """A named term of the work a step does (for throughput)."""
    framework: str
    name: str
    expr: Node
    meta: Meta


@dataclass(frozen=True)
class StaticEmit:
    """A value written into a framework file when its condition holds."""
    framework: str
    target: str
    key: str
    value: Node
    when: Node | None
    meta: Meta


@dataclass(frozen=True)
class Category:
    """An audit checklist's category: its titles and points."""
    framework: str
    id: str
    title_en: str
    title_zh: str
    points: int
    meta: Meta


@dataclass(frozen=True)
class Check:
    """An audit check: its category, titles, points, priority and when it applies."""
    framework: str
    id: str
    category: str
    title_en: str
    title_zh: str
    points: int
    priority: str
    applies: Node | None
    enabled: Node
    recommend: tuple[tuple[str, Any], ...]
    advice_en: str
    advice_zh: str
    group: str
    judges: tuple[str, ...]
    needs_code: str
    meta: Meta


@dataclass(frozen=True)
class Detector:
    """The signs that a project uses a framework (imports, CLIs, YAML keys, paths, ...)."""
    framework: str
    imports: tuple[str, ...]
    clis: tuple[str, ...]
    yaml_keys: tuple[tuple[str, Any], ...]
    paths: tuple[str, ...]
    dependencies: tuple[str, ...]
    remotes: tuple[str, ...]
    meta: Meta


@dataclass(frozen=True)
class Expectation:
    """One `expect` of a DSL test, checked: memory bounds in bytes."""

    kind: str  # feasible | infeasible | warning | no_warning | memory | holds
    names: tuple[str, ...]
    low: Fraction | None
    high: Fraction | None
    span: Span


@dataclass(frozen=True)
class Test:
    """A KB test: its facts, pins, expectations and checks."""
    framework: str
    name: str
    given: tuple[tuple[str, Any], ...]
    pins: tuple[tuple[str, Any], ...]
    expectations: tuple[Expectation, ...]
    checks: tuple[Node, ...]  # checked forms of `expect EXPR`, in order
    meta: Meta


compact_spans(Meta, Emit, Alias, ValueAlias)  # ~2,900 in a plan's scopes, read by diagnostics

# Tables no plan reads (the KB's own tests; the audit's checklist): a pickled KB holds each
# as a pickle of its own, unpickled on first use, so that a plan from the KB cache does not
# build their objects (issue 25: tests and checks are ~40 % of the cached KB's objects)
LAZY_TABLES = ("tests", "checks")

# Tables whose every entry belongs to one scope (its framework; a let's scope, which may be
# core): a pickled KB holds each scope's entries of all of them as one pickle, so that a plan,
# which reads one framework and core, unpickles only those (KnowledgeBase.scoped; issue 25:
# a diffusion plan unpickled LlamaFactory's entries too, the biggest third of the cache)
SCOPED_TABLES = ("options", "nokeys", "lets", "rules", "warnings", "preferences", "memory",
                 "speed", "work", "emits", "optins")
CORE = "core"  # the scope every framework reads
_FORMULAS = ("expr", "when", "source_expr", "value")  # the entries' fields that hold nodes


def _loads(data: bytes):
    """Unpickled without garbage collection passes (dsl/cache.py: new objects, no garbage)."""
    with paused():
        return pickle.loads(data)


def _carried(data, protocol: int):
    """A still-pickled table's bytes (or a view of the KB cache's file) as pickle
    `protocol` carries them: a buffer from protocol 5 on, which a pickler given a
    buffer_callback keeps out of the stream (dsl/cache.py), else bytes."""
    return pickle.PickleBuffer(data) if protocol >= 5 else bytes(data)


class Pickled:
    """A table of a pickled KB, still pickled (KnowledgeBase.__setstate__)."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data  # bytes, or a view of the KB cache's file

    def __reduce_ex__(self, protocol):
        return Pickled, (_carried(self.data, protocol),)


class Scoped:
    """The SCOPED_TABLES of a pickled KB, still pickled: one pickle per scope of
    {table: [(key, entry), ...]} (emits: key None), each table's order as the scope of
    each entry, and the scopes each scope's formulas read (itself and core included)."""

    __slots__ = ("order", "chunks", "reads", "loaded", "views")

    def __init__(self, order: dict, chunks: dict, reads: dict):
        self.order = order  # table -> tuple of scopes, one per entry
        self.chunks = chunks  # scope -> bytes, or a view of the KB cache's file
        self.reads = reads  # scope -> tuple of scopes
        self.loaded: dict[str, dict] = {}  # scope -> its unpickled {table: [(key, entry)]}
        self.views: dict[str, KnowledgeBase] = {}  # framework -> KnowledgeBase.scoped's

    def __reduce_ex__(self, protocol):
        chunks = {scope: _carried(data, protocol) for scope, data in self.chunks.items()}
        return Scoped, (self.order, chunks, self.reads)

    @classmethod
    def of(cls, tables: dict) -> "Scoped":
        """Split the tables (name -> dict, or emits' tuple) by scope."""
        from kbsolve.dsl.ir import LetRef, MemorySum, OptionRef, walk
        order, parts, reads = {}, {}, {}
        for name in SCOPED_TABLES:
            table = tables[name]
            pairs = table.items() if isinstance(table, dict) else ((None, e) for e in table)
            scopes = []
            for key, entry in pairs:
                scope = _scope(entry)
                scopes.append(scope)
                parts.setdefault(scope, {}).setdefault(name, []).append((key, entry))
                read = reads.setdefault(scope, {scope, CORE})
                for node in (getattr(entry, f, None) for f in _FORMULAS):
                    if node is None or isinstance(node, (str, bool, int, Fraction)):
                        continue
                    for n in walk(node):
                        if isinstance(n, LetRef):
                            read.add(n.let.split(".", 1)[0])
                        elif isinstance(n, OptionRef):
                            read.add(n.option.split(".", 1)[0])
                        elif isinstance(n, MemorySum):
                            read.add(n.framework)
            order[name] = tuple(scopes)
        closed = {}
        for scope in reads:  # what a scope reads, through what those read
            seen, todo = set(), [scope]
            while todo:
                current = todo.pop()
                if current not in seen:
                    seen.add(current)
                    todo += reads.get(current, ())
            closed[scope] = tuple(sorted(seen))
        canon: dict = {}
        chunks = {scope: pickle.dumps(_shared(part, canon, set()),
                                      protocol=pickle.HIGHEST_PROTOCOL)
                  for scope, part in parts.items()}
        return cls(order, chunks, closed)

    def tables(self, scopes=None) -> dict:
        """The tables, each in its own order: every entry, or those of `scopes`."""
        wanted = set(self.chunks if scopes is None else scopes) & set(self.chunks)
        for scope in sorted(wanted - set(self.loaded)):
            self.loaded[scope] = _loads(self.chunks[scope])
        out = {}
        for name in SCOPED_TABLES:
            entries = {scope: iter(self.loaded[scope].get(name, ())) for scope in wanted}
            pairs = [next(entries[scope]) for scope in self.order[name] if scope in wanted]
            out[name] = tuple(e for _, e in pairs) if name == "emits" else dict(pairs)
        return out


_SHARED = (str, Fraction, Type)  # immutable values a scope's pickle holds once each


def _shared(value, canon: dict, seen: set):
    """`value` with each str, Fraction and Type in it replaced by the first equal one
    met (`canon`), its holders rewritten in place (equal immutable values: nothing reads
    differently), so that a scope's pickle holds each value once and unpickling builds
    fewer objects (issue 25: 888 Types of 48 values, 3,123 strings of 1,565 in a
    diffusion plan's scopes)."""
    kind = type(value)
    if kind in _SHARED:
        found = canon.get((kind, value))
        if found is None:
            found = canon[(kind, value)] = value
            if kind is Type:  # its own strings shared too
                fields = value.__dict__
                for name, v in fields.items():
                    fields[name] = _shared(v, canon, seen)
        return found
    if kind is tuple:
        items = tuple([_shared(v, canon, seen) for v in value])
        return value if all(a is b for a, b in zip(items, value)) else items
    if id(value) in seen:
        return value
    seen.add(id(value))
    if kind is list:
        value[:] = [_shared(v, canon, seen) for v in value]
    elif kind is dict:
        for key, v in value.items():
            value[key] = _shared(v, canon, seen)
    elif hasattr(type(value), "__dataclass_fields__") and not isinstance(value, type):
        fields = value.__dict__  # a declaration, node, span or meta (frozen dataclasses)
        for name, v in fields.items():
            fields[name] = _shared(v, canon, seen)
    return value


def _scope(entry) -> str:
    return entry.scope if isinstance(entry, Let) else entry.framework


@dataclass(frozen=True)
class KnowledgeBase:
    """The checked KB: every declaration by kind and key, frozen and shared read-only."""
    frameworks: dict[str, Framework]
    options: dict[str, Option]
    nokeys: dict[str, NoKey]
    facts: dict[str, Fact]
    lets: dict[str, Let]
    rules: dict[str, Rule]
    warnings: dict[str, Warning_]
    preferences: dict[str, Preference]
    memory: dict[str, MemoryTerm]
    speed: dict[str, SpeedTerm]
    work: dict[str, WorkTerm]
    emits: tuple[StaticEmit, ...]
    categories: dict[str, Category]
    checks: dict[str, Check]
    detectors: dict[str, Detector]
    tests: dict[str, Test]
    optins: dict[str, OptIn] = field(default_factory=dict)
    files: tuple[tuple[str, str], ...] = ()  # (path, sha256)
    catalog: Any = None
    modules: tuple[str, ...] = field(default=())
    vocabulary: Any = None  # catalog.vocab.Vocabulary: what catalog entries and queries hold
    silences: tuple[Silence, ...] = ()  # warnings a pack silences, by code
    roles: dict[str, Role] = field(default_factory=dict)  # scope.name -> role (roles.py)

    def __getstate__(self) -> dict:
        """Pickled without the evaluator's caches (program/evaluate.py) and the linked
        Programs (program/program.py); LAZY_TABLES each
        as a pickle of its own (one never read since this KB was unpickled stays as read),
        SCOPED_TABLES as one pickle per scope (Scoped)."""
        hidden = ("_evaluation", "_linked", "_pickled", "_scoped")
        state = {k: v for k, v in self.__dict__.items() if k not in hidden}
        pending = self.__dict__.get("_pickled", {})
        for name in LAZY_TABLES:
            if name in state:
                state[name] = Pickled(pickle.dumps(state[name], protocol=pickle.HIGHEST_PROTOCOL))
            elif name in pending:
                state[name] = Pickled(pending[name])
        if "_scoped" in self.__dict__:  # unpickled: passed on as read (the tables are its)
            for name in SCOPED_TABLES:
                state.pop(name, None)
            state["_scoped"] = self.__dict__["_scoped"]
        else:
            state["_scoped"] = Scoped.of({name: state.pop(name) for name in SCOPED_TABLES})
        return state

    def __setstate__(self, state: dict) -> None:
        pending = {name: state.pop(name).data for name in LAZY_TABLES
                   if isinstance(state.get(name), Pickled)}
        self.__dict__.update(state)
        if pending:
            self.__dict__["_pickled"] = pending

    def __getattr__(self, name: str):
        """A table __setstate__ left pickled, unpickled on its first use (only attributes
        not found otherwise come here); the scoped tables all at once, every scope's."""
        scoped = self.__dict__.get("_scoped")
        if scoped is not None and name in SCOPED_TABLES:
            for table, value in scoped.tables().items():
                object.__setattr__(self, table, value)  # frozen: set once
            return self.__dict__[name]
        pending = self.__dict__.get("_pickled")
        if not pending or name not in pending:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        value = _loads(pending[name])
        object.__setattr__(self, name, value)  # frozen: set once, as the cached tables are
        pending.pop(name, None)
        return value

    def scoped(self, framework: str) -> "KnowledgeBase":
        """The KB a query of `framework` reads: the scoped tables hold that framework's
        entries and those of the scopes its formulas read (core), in the KB's order; every
        other field is this KB's. This KB itself when its tables are not pickled (built in
        this process, or read whole). Kept: the same framework gives the same KB."""
        scoped = self.__dict__.get("_scoped")
        if scoped is None or framework not in scoped.reads or \
                any(name in self.__dict__ for name in SCOPED_TABLES):
            return self
        view = scoped.views.get(framework)
        if view is None:
            view = object.__new__(type(self))
            state = {k: v for k, v in self.__dict__.items()
                     if k not in ("_evaluation", "_linked", "_pickled", "_scoped")}
            state.update(scoped.tables(scoped.reads[framework]))
            if self.__dict__.get("_pickled"):
                state["_pickled"] = dict(self.__dict__["_pickled"])  # its own, popped on use
            view.__dict__.update(state)
            scoped.views[framework] = view
        return view

    def formulas(self):
        """Every checked formula of the KB, lets included."""
        for table in (self.rules, self.warnings, self.optins, self.preferences, self.memory,
                      self.speed, self.work, self.lets):
            for item in table.values():
                yield item.expr
        for option in self.options.values():
            yield from (n for n in (option.when, option.source_expr) if n is not None)
        for emit in self.emits:
            yield from (n for n in (emit.value, emit.when) if n is not None)
        for check in self.checks.values():
            yield from (n for n in (check.applies, check.enabled) if n is not None)
        for framework in self.frameworks.values():
            yield from (launch.condition for launch in framework.launches if launch.condition)
            if framework.peak is not None:
                yield framework.peak
        for test in self.tests.values():
            yield from test.checks

    def options_of(self, framework: str) -> list[Option]:
        return [o for o in self.options.values() if o.framework == framework]

    def of(self, table: dict, framework: str) -> list:
        return [item for item in table.values() if item.framework == framework]
