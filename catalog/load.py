"""Loading catalog directories into a `Catalog`, and models from HF configs.

The first directory is the shipped catalog; later ones are rule packs layered
on top. A pack may replace an earlier entry only with `override: "<reason>"`.
All problems of all files are collected and raised as one `KbError`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from kbsolve.catalog.hf import HF_FILE, HfTable, load_hf_table
from kbsolve.catalog.schema import catalog_models, missing_list, model_class
from kbsolve.dsl.vocab import Vocabulary
from kbsolve.catalog.yamlpos import Positions, load_yaml, read_text
from kbsolve.dsl.memo import Kept
from kbsolve.diagnostics import (Diagnostic, DiagnosticSink, KbError, Note, SourceCache, Span,
                                 did_you_mean)


@dataclass(frozen=True)
class _Kind:
    """One catalog kind: its name, its YAML file's top-level key and its label in messages."""
    kind: str      # "gpu"
    top: str       # top-level YAML key, "gpus"
    label: str     # for messages, "GPU"

    @property
    def file(self) -> str:
        return f"{self.top}.yaml"


# The catalog files kbsolve reads; what their entries may hold is the
# vocabulary's (kb/core/vocabulary.kb), turned into pydantic models by schema.py.
KINDS = {
    "gpu": _Kind("gpu", "gpus", "GPU"),
    "model": _Kind("model", "models", "model"),
    "network": _Kind("network", "networks", "network"),
}


@dataclass(frozen=True)
class Override:
    """A pack entry that replaced an earlier one, and why."""

    kind: str
    name: str
    reason: str
    span: Span | None
    replaced: str
    replaced_span: Span | None


# Catalog's tables a pickled catalog unpickles when first read (Catalog.__getattr__: fields
# without a class-level default only, which a normal lookup would find first)
LAZY = ("networks",)
# Tables a pickled catalog keeps pickled entry by entry (Entries): a plan reads one GPU and
# one model of ~25 and ~60, and unpickling them all was ~1.5 % of a cold plan's instructions
BY_ENTRY = ("gpus", "models")


class Entries(Mapping):
    """A catalog table from the KB cache: every name in the table's order, each entry
    unpickled when first read. Its pickle is the entries' still-pickled states and their
    classes' keys (catalog/_models.py), each key once."""

    __slots__ = ("keys_", "pickled", "read")

    def __init__(self, keys: tuple, pickled: dict[str, tuple[int, bytes]]):
        self.keys_ = keys  # class keys; an entry's index -1: pickled whole
        self.pickled = pickled
        self.read: dict[str, Any] = {}

    @classmethod
    def of(cls, table: Mapping) -> "Entries":
        if isinstance(table, Entries):
            return table
        import pickle
        from kbsolve.catalog._models import parts
        keys: dict[tuple, int] = {}
        pickled = {}
        for name, entry in table.items():
            split = parts(entry)
            if split is None:
                pickled[name] = (-1, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
            else:
                index = keys.setdefault(split[0], len(keys))
                pickled[name] = (index, pickle.dumps(split[1], protocol=pickle.HIGHEST_PROTOCOL))
        return cls(tuple(keys), pickled)

    def __reduce__(self):
        return Entries, (self.keys_, self.pickled)

    def __getitem__(self, name: str):
        entry = self.read.get(name)
        if entry is None:
            import pickle
            index, data = self.pickled[name]
            entry = pickle.loads(data)
            if index >= 0:
                from kbsolve.catalog._models import rebuilt
                entry = rebuilt(self.keys_[index], entry)
            self.read[name] = entry
        return entry

    def __iter__(self):
        return iter(self.pickled)

    def __len__(self) -> int:
        return len(self.pickled)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


@dataclass(frozen=True)
class Catalog:
    """Entries by canonical name; lookups accept aliases, case-insensitively."""

    gpus: dict[str, Any] = field(default_factory=dict)  # entries of schema.model_class("gpu")
    models: dict[str, Any] = field(default_factory=dict)
    networks: dict[str, Any] = field(default_factory=dict)
    overrides: tuple[Override, ...] = ()
    hf: HfTable | None = None  # how a config.json is read (hf_configs.yaml), None when no layer has one
    generic_gpu: "GenericGpu | None" = None  # gpus.yaml `generic`: an unlisted card

    def __post_init__(self) -> None:
        index = {k: {} for k in KINDS}
        for kind in KINDS.values():
            for name, entry in self.table(kind.kind).items():
                for key in (name, *entry.aliases):
                    index[kind.kind][key.lower()] = name
        object.__setattr__(self, "_index", index)

    # A pickled catalog (the KB cache) keeps LAZY pickled until first read: a single-node
    # plan reads no network, and unpickling the networks built their pydantic class (~1 ms
    # of a cold plan; issue 25)
    def __getstate__(self) -> dict:
        import pickle
        state = dict(self.__dict__)
        pickled = dict(state.pop("_pickled", {}))
        for name in LAZY:
            if name in state:
                pickled[name] = pickle.dumps(state.pop(name), protocol=pickle.HIGHEST_PROTOCOL)
        state["_pickled"] = pickled
        for name in BY_ENTRY:
            state[name] = Entries.of(state[name])
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __getattr__(self, name: str):
        """A LAZY table still pickled, unpickled on first read."""
        pickled = self.__dict__.get("_pickled")
        if not pickled or name not in pickled:
            raise AttributeError(f"'Catalog' object has no attribute '{name}'")
        import pickle
        value = self.__dict__[name] = pickle.loads(pickled[name])
        return value

    def table(self, kind: str) -> dict[str, Any]:
        return getattr(self, {"gpu": "gpus", "model": "models", "network": "networks"}[kind])

    def names(self, kind: str) -> list[str]:
        """Canonical names and aliases of one kind, for suggestions."""
        return [k for name, e in self.table(kind).items() for k in (name, *e.aliases)]

    def lookup(self, kind: str, name: str, span: Span | None = None) -> Any:
        canonical = self._index[kind].get(str(name).lower())
        if canonical is None:
            label = KINDS[kind].label
            raise KbError(Diagnostic(f"unknown {label} '{name}'{self.suggest(kind, str(name))}",
                                     span, hint=f"known {label}s: {', '.join(sorted(self.table(kind)))}"))
        return self.table(kind)[canonical]

    def suggest(self, kind: str, name: str) -> str:
        """did_you_mean over the names and aliases of one kind: two entries equally
        close are ambiguous, and entries of another size are listed with their size."""
        table = self.table(kind)
        owners = {key: entry for entry, e in table.items() for key in (entry, *e.aliases)}
        sizes = {entry: _size_in_words(kind, e) for entry, e in table.items()}
        return did_you_mean(name, owners, canonical=owners,
                            describe={k: v for k, v in sizes.items() if v})

    def find(self, kind: str, name: str) -> Any | None:
        """The entry a name or alias names, or None."""
        canonical = self._index[kind].get(str(name).lower())
        return None if canonical is None else self.table(kind)[canonical]

    def variant(self, kind: str, name: str,
                suffixes: Sequence[str]) -> tuple[Any, str, list[str]] | None:
        """(entry, base, suffixes removed) for a name that is a listed one plus variant
        suffixes (meta-llama/Meta-Llama-3-8B-Instruct: -Instruct of
        meta-llama/Meta-Llama-3-8B), ignoring case; tried as written, then as the
        repository name after the last '/'. None when nothing is left to find."""
        base, removed = str(name).strip(), []
        while True:
            cut = next((s for s in suffixes if len(base) > len(s) and
                        base.lower().endswith(s.lower())), None)
            if cut is None:
                break
            removed.insert(0, base[-len(cut):])
            base = base[:-len(cut)]
        if not removed:
            return None
        for candidate in dict.fromkeys((base, base.rsplit("/", 1)[-1])):
            entry = self.find(kind, candidate)
            if entry is not None:
                return entry, candidate, removed
        return None

    def gpu(self, name: str, span: Span | None = None) -> Any:
        return self.lookup("gpu", name, span)

    def model(self, name: str, span: Span | None = None) -> Any:
        return self.lookup("model", name, span)

    def network(self, name: str, span: Span | None = None) -> Any:
        return self.lookup("network", name, span)

    def resolved_alias_note(self, name: str, kind: str = "gpu") -> str:
        """The entry's alias note when `name` is an alias, else ''."""
        entry = self.lookup(kind, name)
        if str(name).lower() == entry.name.lower():
            return ""
        return getattr(entry, "alias_note", "")


def _size_in_words(kind: str, entry: Any) -> str:
    """What tells entries of one family apart, for suggestions: a GPU's memory, a
    model's parameter count."""
    if kind == "gpu" and getattr(entry, "memory_gib", None):
        return f"{entry.memory_gib:g} GiB"
    if kind == "model" and getattr(entry, "params_b", None):
        return f"{entry.params_b:g}B parameters"
    return ""


@dataclass(frozen=True)
class GenericGpu:
    """gpus.yaml `generic`: the figures assumed for a GPU the catalog does not list
    (--gpus 2x16GB, or what a --gpu-spec file leaves out), and why."""

    assume: dict[str, Any]
    reported: float  # the fraction of a datasheet "N GB" that nvidia-smi shows
    because: str
    source: str
    span: Span | None = None

    def entry(self, given: dict[str, Any], vocabulary: Vocabulary | None = None) -> Any:
        """A GPU entry from the fields `given` (name, memory_gib, ...), the others
        assumed; a bad field is a KbError naming it."""
        from pydantic import ValidationError
        data = {**self.assume, **self._stated(given), **given}
        try:
            return model_class("gpu", vocabulary).model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            guessed = sorted(set(self.assume) - set(given))
            tail = f" (assumed for an unlisted GPU: {', '.join(guessed)}; state them)" \
                if guessed else ""
            raise KbError(Diagnostic(f"{where + ': ' if where else ''}{msg}{tail}")) from None

    def assumed(self, given: dict[str, Any]) -> list[tuple[str, Any]]:
        """(field, value) of each assumption an entry built from `given` rests on."""
        stated = self._stated(given)
        return [(k, v) for k, v in self.assume.items() if k not in given and k not in stated]

    def _stated(self, given: dict[str, Any]) -> dict[str, bool]:
        """An assumed `F_known: false` is true once `given` states F (a spec's bf16)."""
        return {k: True for k in self.assume
                if k.endswith("_known") and k.removesuffix("_known") in given}


_GENERIC_KEYS = ("assume", "datasheet_gb_reported", "because", "source", "override")


def _generic_gpu(raw: Any, at: tuple, pos: Positions, schema: type, sink: DiagnosticSink,
                 earlier: "GenericGpu | None", layer: int) -> "GenericGpu | None":
    """Check gpus.yaml `generic`: its fields must make a valid GPU with any memory."""
    from pydantic import ValidationError
    if not isinstance(raw, dict):
        sink.error("'generic' must be a mapping (assume, datasheet_gb_reported, because, "
                   "source)", pos[at])
        return None
    for key in raw:
        if key not in _GENERIC_KEYS:
            sink.error(f"generic: unknown key '{key}'{did_you_mean(str(key), _GENERIC_KEYS)}",
                       pos.get(at + (key,), pos[at]))
    missing = [k for k in ("assume", "datasheet_gb_reported", "because", "source")
               if k not in raw]
    if missing:
        sink.error(f"generic is missing {missing_list(missing)}", pos[at])
        return None
    if earlier is not None and layer > 0 and not raw.get("override"):
        sink.error("a second 'generic' GPU replaces the earlier one only with override: "
                   "\"<reason>\"", pos[at], notes=[Note("first defined here", earlier.span)])
        return None
    assume, reported = raw["assume"], raw["datasheet_gb_reported"]
    if not isinstance(assume, dict) or any(k in assume for k in ("name", "memory_gib", "source")):
        sink.error("generic.assume: a mapping of GPU fields other than name, memory_gib and "
                   "source", pos.get(at + ("assume",), pos[at]))
        return None
    if isinstance(reported, bool) or not isinstance(reported, (int, float)) \
            or not 0 < reported <= 1:
        sink.error(f"generic.datasheet_gb_reported: a fraction in (0, 1] (got {reported!r})",
                   pos.get(at + ("datasheet_gb_reported",), pos[at]))
        return None
    try:
        schema.model_validate({**assume, "name": "generic", "memory_gib": 1,
                               "source": str(raw["source"])})
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            sink.error(f"generic.assume: {'.'.join(map(str, loc))}: "
                       f"{err['msg'].removeprefix('Value error, ')}",
                       pos.get(at + ("assume",) + loc[:1], pos[at]))
        return None
    return GenericGpu(dict(assume), float(reported), str(raw["because"]), str(raw["source"]),
                      pos[at])


# ---- loading -------------------------------------------------------------------


@dataclass
class _Parsed:
    """One catalog entry as read from a layer, with where its names and reason were written."""
    spec: Any  # a CatalogEntry
    layer: int
    keys: list[tuple[str, Span]]  # name and aliases with where each was written
    reason: str | None            # override reason, None when absent
    reason_span: Span | None


def load_catalog(dirs: Sequence[str | os.PathLike],
                 vocabulary: Vocabulary | None = None) -> Catalog:
    """Load and layer catalog directories; raise one KbError with every problem.
    Entries are validated against `vocabulary` (the shipped one when None)."""
    sink, sources = DiagnosticSink(), SourceCache()
    schemas = catalog_models(vocabulary)
    tables: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    index: dict[str, dict[str, tuple[_Parsed, Span]]] = {k: {} for k in KINDS}
    overrides: list[Override] = []
    generic: GenericGpu | None = None
    hf_files: list[Path] = []
    for layer, d in enumerate(map(Path, dirs)):
        if not d.is_dir():
            sink.error("catalog directory not found", Span(str(d)))
            continue
        if os.path.lexists(d / HF_FILE):
            hf_files.append(d / HF_FILE)
        for kind in KINDS.values():
            path = d / kind.file
            if os.path.lexists(path):
                extra: dict[str, tuple] = {}
                for parsed in _read_file(path, kind, schemas[kind.kind], layer, sink, sources,
                                         extra):
                    _register(parsed, kind, tables[kind.kind], index[kind.kind], overrides, sink)
                if "generic" in extra:
                    generic = _generic_gpu(*extra["generic"], schemas["gpu"], sink, generic,
                                           layer) or generic
    hf = load_hf_table(hf_files, sink, sources) if hf_files else None
    sink.raise_if_errors(sources)
    return Catalog(gpus=tables["gpu"], models=tables["model"], networks=tables["network"],
                   overrides=tuple(overrides), generic_gpu=generic, hf=hf)


_EXTRA_KEYS = {"gpu": ("generic",)}  # top-level keys besides the entries' list


# Clean files read in this process, by (file name, text, kind, entry class, layer): a
# KB built again (packs, golden cases, a watch loop) validated the same entries each time
_FILES = Kept(256)


def _read_file(path: Path, kind: _Kind, schema: type, layer: int, sink: DiagnosticSink,
               sources: SourceCache, extra: dict | None = None) -> list[_Parsed]:
    """The entries of one file. A file read before with the same text under the same name,
    without a problem, is not parsed again: the caller gets copies of its entries."""
    file = str(path)
    try:
        text = read_text(path, file=file)
    except KbError as e:
        sink.items.extend(e.diagnostics)
        return []
    key = (file, text, kind.kind, schema, layer)
    kept = _FILES.get(key)
    if kept is None:
        before, found = len(sink.items), {}
        parsed = _parse_file(text, file, kind, schema, layer, sink, sources, found)
        if len(sink.items) != before:
            if extra is not None:
                extra.update(found)
            return parsed
        kept = _FILES.keep(key, (parsed, found))
    else:
        sources.add(file, text)
    parsed, found = kept
    if extra is not None:
        extra.update({k: (copy.deepcopy(value), at, pos) for k, (value, at, pos) in found.items()})
    return [_own(p) for p in parsed]


def _own(p: _Parsed) -> _Parsed:
    """A copy of a kept entry the caller may change (_register sets its override)."""
    spec = copy.copy(p.spec)
    for name, value in list(spec.__dict__.items()):
        if isinstance(value, (list, dict)):
            spec.__dict__[name] = copy.deepcopy(value)
    spec._field_spans = dict(p.spec._field_spans)
    return _Parsed(spec, p.layer, list(p.keys), p.reason, p.reason_span)


def _parse_file(text: str, file: str, kind: _Kind, schema: type, layer: int,
                sink: DiagnosticSink, sources: SourceCache, extra: dict) -> list[_Parsed]:
    try:
        data, pos = load_yaml(text, file=file, sources=sources)
    except KbError as e:
        sink.items.extend(e.diagnostics)
        return []
    if data is None:
        return []
    if not isinstance(data, dict):
        sink.error(f"expected a mapping with the key '{kind.top}'", pos[()])
        return []
    allowed = (kind.top, *_EXTRA_KEYS.get(kind.kind, ()))
    for key in data:
        if key in allowed and key != kind.top:
            extra[key] = (data[key], (key,), pos)
        elif key != kind.top:
            sink.error(f"unknown top-level key '{key}'{did_you_mean(str(key), allowed)}",
                       pos[(key,)], hint=f"{kind.file} holds only the key"
                                         f"{'s' if len(allowed) > 1 else ''} "
                                         f"{', '.join(repr(k) for k in allowed)}")
    items = data.get(kind.top)
    if items is None:
        return []
    if not isinstance(items, list):
        sink.error(f"'{kind.top}' must be a list of entries", pos[(kind.top,)])
        return []
    out = []
    for i, item in enumerate(items):
        parsed = _parse_entry(item, (kind.top, i), kind, schema, layer, pos, sink)
        if parsed is not None:
            out.append(parsed)
    return out


def _parse_entry(item: Any, at: tuple, kind: _Kind, schema: type, layer: int, pos: Positions,
                 sink: DiagnosticSink) -> _Parsed | None:
    from pydantic import ValidationError
    if not isinstance(item, dict):
        sink.error(f"each entry under '{kind.top}' must be a mapping", pos[at])
        return None
    raw = dict(item)
    has_override = "override" in raw
    reason = raw.pop("override", None)
    name = raw.get("name")
    shown = f"{kind.label} '{name}'" if isinstance(name, str) and name else f"{kind.label} #{at[1] + 1}"
    try:
        spec = schema.model_validate(raw)
    except ValidationError as e:
        errs = e.errors()
        missing = [str(err["loc"][0]) for err in errs if err["type"] == "missing"]
        if missing:  # one diagnostic for all missing fields of an entry
            sink.error(f"{shown} is missing required {missing_list(missing)}", pos[at])
        for err in errs:
            if err["type"] != "missing":
                _report(err, shown, at, schema, pos, sink)
        return None
    spec._span = pos[at]
    spec._field_spans = {f: pos[at + (f,)] for f in raw if at + (f,) in pos}
    reason_span = pos.get(at + ("override",))
    if has_override and not (isinstance(reason, str) and reason.strip()):
        sink.error(f"override on {shown} needs a non-empty reason string", reason_span,
                   hint='write e.g. override: "vendor errata lowers the bandwidth"')
        return None
    keys = [(spec.name, pos[at + ("name",)])]
    keys += [(a, pos[at + ("aliases", j)]) for j, a in enumerate(spec.aliases)]
    return _Parsed(spec, layer, keys, reason if has_override else None, reason_span)


def _report(err: dict, shown: str, at: tuple, schema: type, pos: Positions,
            sink: DiagnosticSink) -> None:
    """One pydantic error as a diagnostic at the offending key (or the entry)."""
    loc = tuple(err["loc"])
    span = next(pos[at + loc[:n]] for n in range(len(loc), -1, -1) if at + loc[:n] in pos)
    where = ".".join(map(str, loc))
    msg = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    if err["type"] == "extra_forbidden":
        sink.error(f"{shown}: unknown field '{where}'"
                   f"{did_you_mean(where, [*schema.model_fields, 'override'])}", span)
    elif err["type"] == "value_error":  # model-level messages name the entry themselves
        sink.error(f"{shown}: {msg}" if loc else msg, span)
    else:
        if isinstance(got, (str, int, float, bool)) or got is None:
            msg += f" (got {got!r})"
        if err["type"] == "literal_error" and isinstance(got, str):
            msg += did_you_mean(got, err.get("ctx", {}).get("expected", "").replace("'", "")
                                .replace(" or ", ", ").split(", "))
        sink.error(f"{shown}: {where}: {msg}", span)


def _register(p: _Parsed, kind: _Kind, table: dict, index: dict, overrides: list,
              sink: DiagnosticSink) -> None:
    """Add one entry, enforcing unique names/aliases and explicit overrides."""
    label, name = kind.label, p.spec.name
    replaced: dict[str, _Parsed] = {}
    ok = True
    seen_here: dict[str, Span] = {}
    for key, span in p.keys:
        low = key.lower()
        if low in seen_here:
            sink.error(f"{label} '{name}' lists '{key}' twice (names and aliases ignore case)", span,
                       notes=[Note("first listed here", seen_here[low])])
            ok = False
            continue
        seen_here[low] = span
        hit = index.get(low)
        if hit is None:
            continue
        other, other_span = hit
        if other.layer < p.layer and p.reason is not None:
            replaced[other.spec.name] = other
            continue
        hint = "" if other.layer == p.layer else \
            'to replace the earlier entry, add override: "<reason>" to this one'
        sink.error(f"duplicate {label} name or alias '{key}' (already used by {label} "
                   f"'{other.spec.name}')", span, notes=[Note("first defined here", other_span)],
                   hint=hint)
        ok = False
    if ok and p.reason is not None and not replaced:
        sink.error(f"override on {label} '{name}' replaces nothing: no earlier {label} has "
                   f"this name or one of its aliases", p.reason_span)
        ok = False
    if not ok:
        return
    for old in replaced.values():
        table.pop(old.spec.name, None)
        for key, _ in old.keys:
            index.pop(key.lower(), None)
        overrides.append(Override(kind.kind, name, p.reason, p.reason_span, old.spec.name,
                                  old.spec.span))
    if p.reason is not None:
        p.spec._override = p.reason
    table[name] = p.spec
    for key, span in p.keys:
        index[key.lower()] = (p, span)
