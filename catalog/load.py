"""Loading catalog directories into a `Catalog`, and models from HF configs.

The first directory is the shipped catalog; later ones are rule packs layered
on top. A pack may replace an earlier entry only with `override: "<reason>"`.
All problems of all files are collected and raised as one `KbError`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from kbsolve.catalog.schema import catalog_models, missing_list, model_class
from kbsolve.catalog.vocab import Vocabulary
from kbsolve.catalog.yamlpos import MAX_BYTES, Positions, load_yaml, read_text
from kbsolve.diagnostics import (Diagnostic, DiagnosticSink, KbError, Note, SourceCache, Span,
                                 did_you_mean)


@dataclass(frozen=True)
class _Kind:
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


@dataclass(frozen=True)
class Catalog:
    """Entries by canonical name; lookups accept aliases, case-insensitively."""

    gpus: dict[str, Any] = field(default_factory=dict)  # entries of schema.model_class("gpu")
    models: dict[str, Any] = field(default_factory=dict)
    networks: dict[str, Any] = field(default_factory=dict)
    overrides: tuple[Override, ...] = ()

    def __post_init__(self) -> None:
        index = {k: {} for k in KINDS}
        for kind in KINDS.values():
            for name, entry in self.table(kind.kind).items():
                for key in (name, *entry.aliases):
                    index[kind.kind][key.lower()] = name
        object.__setattr__(self, "_index", index)

    def table(self, kind: str) -> dict[str, Any]:
        return {"gpu": self.gpus, "model": self.models, "network": self.networks}[kind]

    def names(self, kind: str) -> list[str]:
        """Canonical names and aliases of one kind, for suggestions."""
        return [k for name, e in self.table(kind).items() for k in (name, *e.aliases)]

    def lookup(self, kind: str, name: str, span: Span | None = None) -> Any:
        canonical = self._index[kind].get(str(name).lower())
        if canonical is None:
            label = KINDS[kind].label
            raise KbError(Diagnostic(f"unknown {label} '{name}'{did_you_mean(str(name), self.names(kind))}",
                                     span, hint=f"known {label}s: {', '.join(sorted(self.table(kind)))}"))
        return self.table(kind)[canonical]

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


# ---- loading -------------------------------------------------------------------


@dataclass
class _Parsed:
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
    for layer, d in enumerate(map(Path, dirs)):
        if not d.is_dir():
            sink.error("catalog directory not found", Span(str(d)))
            continue
        for kind in KINDS.values():
            path = d / kind.file
            if os.path.lexists(path):
                for parsed in _read_file(path, kind, schemas[kind.kind], layer, sink, sources):
                    _register(parsed, kind, tables[kind.kind], index[kind.kind], overrides, sink)
    sink.raise_if_errors(sources)
    return Catalog(gpus=tables["gpu"], models=tables["model"], networks=tables["network"],
                   overrides=tuple(overrides))


def _read_file(path: Path, kind: _Kind, schema: type, layer: int, sink: DiagnosticSink,
               sources: SourceCache) -> list[_Parsed]:
    try:
        data, pos = load_yaml(path, file=str(path), sources=sources)
    except KbError as e:
        sink.items.extend(e.diagnostics)
        return []
    if data is None:
        return []
    if not isinstance(data, dict):
        sink.error(f"expected a mapping with the key '{kind.top}'", pos[()])
        return []
    for key in data:
        if key != kind.top:
            sink.error(f"unknown top-level key '{key}'{did_you_mean(str(key), [kind.top])}",
                       pos[(key,)], hint=f"{kind.file} holds only the key '{kind.top}'")
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


# ---- Hugging Face config.json --------------------------------------------------

_HF_REQUIRED = {  # model field -> config.json key
    "layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
    "intermediate": "intermediate_size", "vocab": "vocab_size",
    "max_positions": "max_position_embeddings",
}
_HF_OPTIONAL = {
    "kv_heads": "num_key_value_heads", "head_dim": "head_dim",
    "experts_active": "num_experts_per_tok", "moe_intermediate": "moe_intermediate_size",
    "shared_experts": "n_shared_experts",
}
_HF_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")


def model_from_hf_config(path: str | os.PathLike, *, name: str | None = None,
                         max_bytes: int = MAX_BYTES, vocabulary: Vocabulary | None = None) -> Any:
    """Build an LLM model entry from a Hugging Face config.json (validated against
    `vocabulary`, the shipped one when None)."""
    from pydantic import ValidationError
    file = str(path)
    text = read_text(path, file=file, max_bytes=max_bytes)
    sources = SourceCache()
    sources.add(file, text)
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise KbError(Diagnostic(f"not valid JSON: {e.msg}", Span(file, e.lineno, e.colno)),
                      sources) from None
    except RecursionError:
        raise KbError(Diagnostic("JSON nested too deeply", Span(file)), sources) from None
    if not isinstance(cfg, dict):
        raise KbError(Diagnostic("expected a JSON object (a Hugging Face config.json)",
                                 Span(file, 1, 1)), sources)
    inner = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}

    def get(key: str) -> Any:  # top level first, then text_config
        return cfg[key] if cfg.get(key) is not None else inner.get(key)

    sink = DiagnosticSink()
    at = lambda key: _json_key_span(file, text, key)  # noqa: E731
    vals: dict[str, Any] = {}
    for fld, key in {**_HF_REQUIRED, **_HF_OPTIONAL}.items():
        v = get(key)
        if v is None:
            if fld in _HF_REQUIRED:
                sink.error(f"missing field '{key}' in Hugging Face config", Span(file))
            continue
        low = 0 if fld == "shared_experts" else 1
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            need = "a non-negative" if low == 0 else "a positive"
            sink.error(f"field '{key}' must be {need} integer (got {v!r})", at(key))
            continue
        vals[fld] = v
    for key in _HF_EXPERTS:
        v = get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                sink.error(f"field '{key}' must be a positive integer (got {v!r})", at(key))
            else:
                vals["experts"] = v
            break
    model_type, tied = get("model_type"), get("tie_word_embeddings") or False
    if not isinstance(model_type, str) or not model_type:
        sink.error("missing field 'model_type' in Hugging Face config", Span(file))
    if not isinstance(tied, bool):
        sink.error(f"field 'tie_word_embeddings' must be true or false (got {tied!r})",
                   at("tie_word_embeddings"))
    sink.raise_if_errors(sources)

    vals.setdefault("kv_heads", vals["heads"])
    spec_in = dict(vals, kind="llm", model_type=model_type, family=model_type,
                   tied_embeddings=tied, params_b=hf_param_count(vals, tied) / 1e9,
                   name=name or _str(cfg.get("_name_or_path")) or _name_from_path(file),
                   hf_id=_str(cfg.get("_name_or_path")) or str(Path(file).resolve().parent),
                   source=f"hf: {file}")
    try:
        return model_class("model", vocabulary).model_validate(spec_in)
    except ValidationError as e:
        hf = {**_HF_REQUIRED, **_HF_OPTIONAL, "experts": "num_experts"}
        for err in e.errors():
            key = hf.get(str(err["loc"][0]), "") if err["loc"] else ""
            msg = err["msg"].removeprefix("Value error, ")
            sink.error(f"{key}: {msg}" if key else msg, at(key) if key else Span(file))
        sink.raise_if_errors(sources)
        raise  # unreachable: every validation error was reported


def hf_param_count(v: dict[str, int], tied: bool) -> int:
    """Total parameters of a decoder-only transformer with SwiGLU MLPs (or MoE)."""
    hidden, heads, kv = v["hidden"], v["heads"], v.get("kv_heads", v["heads"])
    head_dim = v.get("head_dim") or hidden // heads
    attn = hidden * head_dim * (2 * heads + 2 * kv)          # q, o and k, v
    experts = v.get("experts", 1)
    if experts > 1:
        ffn = v.get("moe_intermediate") or v["intermediate"]
        mlp = (experts + v.get("shared_experts", 0)) * 3 * hidden * ffn + hidden * experts
    else:
        mlp = 3 * hidden * v["intermediate"]
    per_layer = attn + mlp + 2 * hidden                       # + two RMSNorms
    embed = v["vocab"] * hidden
    return v["layers"] * per_layer + embed * (1 if tied else 2) + hidden


def _name_from_path(file: str) -> str:
    p = Path(file).resolve()
    return (p.parent.name if p.name == "config.json" else p.stem) or "hf-model"


def _json_key_span(file: str, text: str, key: str) -> Span:
    m = re.search(rf'"{re.escape(key)}"\s*:', text)
    if not m:
        return Span(file)
    line = text.count("\n", 0, m.start()) + 1
    col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return Span(file, line, col, line, col + len(key) + 2)


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""
