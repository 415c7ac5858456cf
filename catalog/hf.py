"""Models from Hugging Face config.json files, read through the KB's table of
readers by model_type (kb/catalog/hf_configs.yaml).

The table says, per model_type, which config.json keys hold each model field
(transformers' attribute_map aliases), the defaults and factors, and the
parameter count as expressions. This module applies it generically: it names
no architecture, no config key and no model field of its own.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

from kbsolve.catalog.schema import model_class
from kbsolve.dsl.vocab import Vocabulary
from kbsolve.catalog.yamlpos import MAX_BYTES, Positions, load_yaml, read_text
from kbsolve.dsl.memo import Kept
from kbsolve.diagnostics import (Diagnostic, DiagnosticSink, KbError, SourceCache, Span,
                                 did_you_mean)

HF_FILE = "hf_configs.yaml"
TOP = "hf_configs"
TOTAL = "params"  # the count term that is the total


# ---- the table -------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRule:
    """Where one field's value comes from."""

    keys: tuple[str, ...] = ()
    default: str | None = None  # an expression's text (parsed by _tree)
    factor: Fraction = Fraction(1)
    type: str = "int"
    min: int = 1
    optional: bool = False


@dataclass(frozen=True)
class Template:
    """LlamaFactory's chat template of the configs an entry reads (model.template):
    `name`, when the expression `when` (over the fields; none: always) holds."""

    name: str
    when: str | None
    source: str


@dataclass(frozen=True)
class Reader:
    """One model_type's reading, its `like` chain already merged in."""

    model_type: str
    names: tuple[str, ...]          # model_type and `also`
    fields: dict[str, FieldRule]
    count: dict[str, str]     # term -> expression text
    mlp: str | None
    because: str
    source: str
    span: Span | None = None
    template: Template | None = None


_PICKLED = "_readers_pickled"  # HfTable's readers as its pickle holds them


@dataclass(frozen=True)
class HfTable:
    """hf_configs' readers of a Hugging Face config, by model_type, and the fallback's name."""
    readers: dict[str, Reader] = field(default_factory=dict)  # by every name it reads
    fallback: str = ""

    # Pickled (the KB cache), the readers stay pickled until first read: a plan of a catalog
    # model reads none of them (~0.3-0.5 ms of every cold plan, issue 25)
    def __getstate__(self) -> dict:
        import pickle
        state = dict(self.__dict__)
        if "readers" in state:
            state[_PICKLED] = pickle.dumps(state.pop("readers"), protocol=pickle.HIGHEST_PROTOCOL)
        return state

    def __getattr__(self, name: str):
        """The readers, unpickled on first read (only attributes not found otherwise come
        here: `readers` has no class-level default)."""
        pickled = self.__dict__.get(_PICKLED)
        if name != "readers" or pickled is None:
            raise AttributeError(f"'HfTable' object has no attribute '{name}'")
        import pickle
        readers = pickle.loads(pickled)
        object.__setattr__(self, "readers", readers)  # frozen: set once
        del self.__dict__[_PICKLED]
        return readers

    def reader(self, *model_types: Any) -> Reader:
        """The reader of the first known model_type, else the fallback's."""
        for model_type in model_types:
            if isinstance(model_type, str) and model_type in self.readers:
                return self.readers[model_type]
        return self.readers[self.fallback]


_ENTRY_KEYS = {"model_type", "also", "like", "mlp", "because", "source", "fields", "count",
               "notes", "override", "template"}
_TEMPLATE_KEYS = {"name", "when", "source"}
_FIELD_KEYS = {"keys", "default", "factor", "type", "min", "optional"}
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b}
_CMP = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
        ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
        ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}
_LITERALS = {"true": True, "false": False}


# Clean tables read in this process, by every layer's (file name, text): a KB built
# again (packs, golden cases, a watch loop) merged the same readers each time
_TABLES = Kept(64)


def load_hf_table(paths: list[Path], sink: DiagnosticSink, sources: SourceCache) -> HfTable:
    """Read the table files, later ones layered on earlier ones (a model_type
    already read is replaced only with `override: "<reason>"`). A table read before
    from the same texts under the same names, without a problem, is taken again
    (its Readers are frozen and shared; the readers dict is the caller's own)."""
    texts: list[tuple[str, str] | KbError] = []
    for path in paths:
        try:
            texts.append((str(path), read_text(path, file=str(path))))
        except KbError as e:
            texts.append(e)
    key = tuple(texts) if not any(isinstance(t, KbError) for t in texts) else None
    table = _TABLES.get(key) if key is not None else None
    if table is not None:
        for file, text in key:
            sources.add(file, text)
        return HfTable(dict(table.readers), table.fallback)
    before = len(sink.items)
    table = _read_table(paths, texts, sink, sources)
    if key is not None and len(sink.items) == before:
        _TABLES.keep(key, HfTable(dict(table.readers), table.fallback))
    return table


def _read_table(paths: list[Path], texts: list, sink: DiagnosticSink,
                sources: SourceCache) -> HfTable:
    raw: dict[str, tuple[dict, tuple, Positions, Span]] = {}  # model_type -> entry
    owner: dict[str, str] = {}  # every name read -> its entry's model_type
    fallback, fallback_span = "", None
    for layer, (path, text) in enumerate(zip(paths, texts)):
        try:
            if isinstance(text, KbError):
                raise text
            data, pos = load_yaml(text[1], file=text[0], sources=sources)
        except KbError as e:
            sink.items.extend(e.diagnostics)
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            sink.error(f"expected a mapping with the key '{TOP}'", pos[()])
            continue
        for key in data:
            if key not in (TOP, "fallback"):
                sink.error(f"unknown top-level key '{key}'{did_you_mean(str(key), [TOP, 'fallback'])}",
                           pos[(key,)], hint=f"{HF_FILE} holds the keys '{TOP}' and 'fallback'")
        if "fallback" in data:
            fallback, fallback_span = data["fallback"], pos[("fallback",)]
        items = data.get(TOP) or []
        if not isinstance(items, list):
            sink.error(f"'{TOP}' must be a list of entries", pos[(TOP,)])
            continue
        for i, item in enumerate(items):
            at = (TOP, i)
            entry = _check_entry(item, at, pos, sink)
            if entry is None:
                continue
            names = [entry["model_type"], *entry.get("also", [])]
            replaces = "override" in entry
            for name in names:
                if name in owner and not (replaces and layer > 0):
                    sink.error(f"model_type '{name}' is read twice (already by the entry "
                               f"'{owner[name]}')", pos[at], hint='a rule pack replaces an '
                               'entry with override: "<reason>"' if layer else "")
                owner[name] = entry["model_type"]
            raw[entry["model_type"]] = (entry, at, pos, pos[at])
    readers: dict[str, Reader] = {}
    for model_type in raw:
        reader = _merge(model_type, raw, sink, [])
        if reader is not None:
            for name in reader.names:
                readers[name] = reader
    if paths and not (isinstance(fallback, str) and fallback in raw):
        sink.error(f"'fallback' must name an entry's model_type (got {fallback!r})"
                   f"{did_you_mean(str(fallback), list(readers))}", fallback_span or Span(str(paths[0])))
    return HfTable(readers, fallback if isinstance(fallback, str) else "")


def _check_entry(item: Any, at: tuple, pos: Positions, sink: DiagnosticSink) -> dict | None:
    if not isinstance(item, dict):
        sink.error(f"each entry under '{TOP}' must be a mapping", pos[at])
        return None
    ok = True
    for key in item:
        if key not in _ENTRY_KEYS:
            sink.error(f"unknown key '{key}'{did_you_mean(str(key), sorted(_ENTRY_KEYS))}",
                       pos[at + (key,)])
            ok = False
    for key in ("model_type", "because", "source"):
        if not (isinstance(item.get(key), str) and item[key].strip()):
            sink.error(f"an entry needs a non-empty '{key}' string", pos.get(at + (key,), pos[at]))
            ok = False
    for key in ("like", "mlp", "notes", "override"):
        if key in item and not (isinstance(item[key], str) and item[key].strip()):
            sink.error(f"'{key}' must be a non-empty string", pos[at + (key,)])
            ok = False
    also = item.get("also", [])
    if not (isinstance(also, list) and all(isinstance(a, str) and a for a in also)):
        sink.error("'also' must be a list of model_type names", pos[at + ("also",)])
        ok = False
    fields = item.get("fields", {})
    if not isinstance(fields, dict):
        sink.error("'fields' must map field names to readings", pos[at + ("fields",)])
        return None
    parsed_fields = {}
    for name, spec in fields.items():
        rule = _check_field(name, spec, at + ("fields", name), pos, sink)
        ok &= rule is not None
        parsed_fields[name] = rule
    count = item.get("count", {})
    if not isinstance(count, dict):
        sink.error("'count' must map term names to expressions", pos[at + ("count",)])
        return None
    parsed_count = {}
    for name, text in count.items():
        expr = _parse(text, pos[at + ("count", name)], sink)
        ok &= expr is not None
        parsed_count[name] = ast.unparse(expr) if expr is not None else ""
    template = _check_template(item.get("template"), at + ("template",), pos, sink) \
        if "template" in item else None
    ok &= template is not None or "template" not in item
    if not ok:
        return None
    return dict(item, fields=parsed_fields, count=parsed_count, template=template)


def _check_template(spec: Any, at: tuple, pos: Positions,
                    sink: DiagnosticSink) -> Template | None:
    if not isinstance(spec, dict) or not all(isinstance(spec.get(k), str) and spec[k].strip()
                                             for k in ("name", "source")):
        sink.error("'template' must be a mapping with a 'name' and a 'source' (and an "
                   "optional 'when' expression)", pos[at])
        return None
    for key in spec:
        if key not in _TEMPLATE_KEYS:
            sink.error(f"template: unknown key '{key}'"
                       f"{did_you_mean(str(key), sorted(_TEMPLATE_KEYS))}", pos[at + (key,)])
            return None
    when = None
    if "when" in spec:
        tree = _parse(spec["when"], pos[at + ("when",)], sink)
        if tree is None:
            return None
        when = ast.unparse(tree)
    return Template(spec["name"], when, spec["source"])


def _check_field(name: Any, spec: Any, at: tuple, pos: Positions,
                 sink: DiagnosticSink) -> FieldRule | None:
    span = pos[at]
    if not isinstance(spec, dict):
        sink.error(f"field '{name}' must be a mapping (keys, default, factor, type, min, "
                   f"optional)", span)
        return None
    bad = [k for k in spec if k not in _FIELD_KEYS]
    for key in bad:
        sink.error(f"field '{name}': unknown key '{key}'"
                   f"{did_you_mean(str(key), sorted(_FIELD_KEYS))}", pos[at + (key,)])
    keys = spec.get("keys", [])
    if not (isinstance(keys, list) and all(isinstance(k, str) and k for k in keys)):
        sink.error(f"field '{name}': 'keys' must be a list of config.json keys", span)
        return None
    default = None
    if "default" in spec:
        default = _parse(str(spec["default"]) if not isinstance(spec["default"], bool)
                         else str(spec["default"]).lower(), pos[at + ("default",)], sink)
        if default is None:
            return None
    try:
        factor = Fraction(str(spec.get("factor", 1)))
    except (ValueError, ZeroDivisionError):
        sink.error(f"field '{name}': factor must be a number (got {spec['factor']!r})",
                   pos[at + ("factor",)])
        return None
    kind, least, optional = spec.get("type", "int"), spec.get("min", 1), spec.get("optional", False)
    if kind not in ("int", "bool") or isinstance(least, bool) or not isinstance(least, int) \
            or not isinstance(optional, bool) or factor <= 0:
        sink.error(f"field '{name}': type is int or bool, min an integer, optional true or "
                   f"false, factor positive", span)
        return None
    if bad:
        return None
    return FieldRule(tuple(keys), None if default is None else ast.unparse(default), factor,
                     kind, least, optional)


def _parse(text: Any, span: Span, sink: DiagnosticSink) -> ast.expr | None:
    if isinstance(text, bool):
        text = str(text).lower()
    if isinstance(text, (int, float)):
        text = str(text)
    if not isinstance(text, str):
        sink.error(f"expected an expression (got {text!r})", span)
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        sink.error(f"not a valid expression: {text!r} ({e.msg})", span)
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.Compare)):
            ops = [node.op] if isinstance(node, ast.BinOp) else node.ops
            if not all(type(op) in _OPS or type(op) in _CMP for op in ops):
                sink.error(f"{text!r}: only + - * // and comparisons are allowed", span)
                return None
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                sink.error(f"{text!r}: constants are whole numbers, true or false", span)
                return None
        elif not isinstance(node, (ast.Name, ast.Load, ast.IfExp, ast.BoolOp, ast.And, ast.Or,
                                   ast.UnaryOp, ast.Not, ast.USub, *_OPS, *_CMP)):
            sink.error(f"{text!r}: {type(node).__name__} is not allowed in a count expression",
                       span)
            return None
    return tree


def _merge(model_type: str, raw: dict, sink: DiagnosticSink, chain: list[str]) -> Reader | None:
    entry, at, pos, span = raw[model_type]
    if model_type in chain:
        sink.error(f"'like' goes round in a circle: {' -> '.join(chain + [model_type])}", span)
        return None
    fields: dict[str, FieldRule] = {}
    count: dict[str, str] = {}
    mlp, template = None, None
    parent = entry.get("like")
    if parent is not None:
        if parent not in raw:
            sink.error(f"'like' names no entry: '{parent}'{did_you_mean(parent, list(raw))}",
                       pos[at + ("like",)])
            return None
        base = _merge(parent, raw, sink, chain + [model_type])
        if base is None:
            return None
        fields, count, mlp, template = dict(base.fields), dict(base.count), base.mlp, \
            base.template
    fields.update(entry["fields"])
    count.update(entry["count"])
    reader = Reader(model_type, (model_type, *entry.get("also", [])), fields, count,
                    entry.get("mlp", mlp), entry["because"], entry["source"], span,
                    entry.get("template") or template)
    if not chain:  # names are checked once, on the merged entry
        if TOTAL not in count:
            sink.error(f"model_type '{model_type}' has no count term '{TOTAL}'", span)
            return None
        known = set(fields) | set(count) | set(_LITERALS)
        conditions = {"when": reader.template.when} \
            if reader.template and reader.template.when else {}
        for where, exprs in (("count", count), ("fields", {n: r.default for n, r in fields.items()
                                                            if r.default is not None}),
                             ("template", conditions)):
            for name, expr in exprs.items():
                for node in ast.walk(_tree(expr)):
                    if isinstance(node, ast.Name) and node.id not in known:
                        loc = pos.get(at + (where, name), span)
                        sink.error(f"model_type '{model_type}': {where} '{name}' reads "
                                   f"'{node.id}', which is no field or count term"
                                   f"{did_you_mean(node.id, sorted(known))}", loc)
                        return None
        if set(fields) & set(count):
            sink.error(f"model_type '{model_type}': {sorted(set(fields) & set(count))} are "
                       f"both fields and count terms", span)
            return None
    return reader


@functools.lru_cache(maxsize=1024)
def _tree(text: str) -> ast.expr:
    """A checked expression's tree (the table holds the text: it compares and pickles)."""
    return ast.parse(text, mode="eval").body


@functools.lru_cache(maxsize=4)
def _table_at(path: str, mtime: float) -> HfTable:
    sink, sources = DiagnosticSink(), SourceCache()
    table = load_hf_table([Path(path)], sink, sources)
    sink.raise_if_errors(sources)
    return table


def shipped_table() -> HfTable:
    """The shipped KB's table (kb/catalog/hf_configs.yaml)."""
    from kbsolve.dsl.load import shipped_root
    path = shipped_root() / "catalog" / HF_FILE
    return _table_at(str(path), path.stat().st_mtime)


# ---- evaluating a reading ---------------------------------------------------------


class _Absent:
    """An optional field the config does not give."""


ABSENT = _Absent()


class _Cycle(Exception):
    pass


class _Reading:
    """Values of one reader's fields and count terms. `lookup(rule, name)` gives
    a field's raw value (None when not given); every missing or bad field is
    recorded, and a stand-in lets the rest be evaluated."""

    def __init__(self, reader: Reader, lookup: Callable[[FieldRule, str], tuple[Any, str]],
                 canonical: bool = False):
        self.reader, self.lookup = reader, lookup
        self.canonical = canonical  # values are the model's own: no factors apply
        self.values: dict[str, Any] = {}
        self.missing: dict[str, str] = {}   # key (or field) -> field
        self.bad: list[tuple[str, str]] = []  # (key, message)
        self._busy: list[str] = []

    def value(self, name: str) -> Any:
        if name in _LITERALS:
            return _LITERALS[name]
        if name in self.values:
            return self.values[name]
        if name in self._busy:
            raise _Cycle(" -> ".join(self._busy + [name]))
        self._busy.append(name)
        try:
            found = self._field(name) if name in self.reader.fields else \
                self._whole(name, self.eval(_tree(self.reader.count[name])))
        finally:
            self._busy.pop()
        self.values[name] = found
        return found

    def _field(self, name: str) -> Any:
        rule = self.reader.fields[name]
        raw, key = self.lookup(rule, name)
        if raw is not None:
            return self._checked(rule, raw, key, name)
        if rule.default is not None:
            return self._whole(name, self.eval(_tree(rule.default)))
        if rule.optional:
            return ABSENT
        self.missing[rule.keys[0] if rule.keys else name] = name
        return False if rule.type == "bool" else Fraction(1)

    def _checked(self, rule: FieldRule, raw: Any, key: str, name: str) -> Any:
        if rule.type == "bool":
            if isinstance(raw, bool):
                return raw
            self.bad.append((key, f"field '{key}' must be true or false (got {raw!r})"))
            return False
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < rule.min:
            need = "a positive" if rule.min == 1 else "a non-negative" if rule.min == 0 else \
                f"an integer of at least {rule.min}: a"
            self.bad.append((key, f"field '{key}' must be {need} integer (got {raw!r})"))
            return Fraction(max(rule.min, 1))
        value = Fraction(raw) * (1 if self.canonical else rule.factor)
        if value.denominator != 1:
            self.bad.append((key, f"field '{key}' ({raw}) times {rule.factor} is not a whole "
                                  f"number, as model_type '{self.reader.model_type}' reads it"))
            return Fraction(max(rule.min, 1))
        return value

    def _whole(self, name: str, value: Any) -> Any:
        if isinstance(value, Fraction) and value.denominator != 1:
            raise ValueError(f"'{name}' came out as {value}, not a whole number")
        return value

    def eval(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return Fraction(node.value)
        if isinstance(node, ast.Name):
            return self.value(node.id)
        if isinstance(node, ast.BoolOp):
            values = [self.eval(v) for v in node.values[:1]]
            for v in node.values[1:]:
                last = values[-1]
                present = last is not ABSENT and bool(last)
                if isinstance(node.op, ast.Or) and present or \
                        isinstance(node.op, ast.And) and not present:
                    break
                values.append(self.eval(v))
            return values[-1]
        if isinstance(node, ast.UnaryOp):
            operand = self._present(self.eval(node.operand), node.operand)
            return not operand if isinstance(node.op, ast.Not) else -operand
        if isinstance(node, ast.IfExp):
            test = self.eval(node.test)
            return self.eval(node.body) if test is not ABSENT and test else self.eval(node.orelse)
        if isinstance(node, ast.BinOp):
            a = self._present(self.eval(node.left), node.left)
            b = self._present(self.eval(node.right), node.right)
            if isinstance(node.op, ast.FloorDiv) and b == 0:
                raise ValueError(f"'{ast.unparse(node)}' divides by zero")
            return Fraction(_OPS[type(node.op)](a, b))
        if isinstance(node, ast.Compare):
            left = self._present(self.eval(node.left), node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self._present(self.eval(right_node), right_node)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        raise ValueError(f"cannot evaluate {ast.unparse(node)}")  # _parse admits no other node

    def _present(self, value: Any, node: ast.expr) -> Any:
        if value is ABSENT:  # an optional field used without an `or` fallback: required here
            name = node.id if isinstance(node, ast.Name) else ast.unparse(node)
            rule = self.reader.fields.get(name)
            self.missing[rule.keys[0] if rule and rule.keys else name] = name
            return Fraction(1)
        return value


# ---- config.json -------------------------------------------------------------------


def model_from_hf_config(path: str | os.PathLike, *, name: str | None = None,
                         max_bytes: int = MAX_BYTES, vocabulary: Vocabulary | None = None,
                         table: HfTable | None = None) -> Any:
    """Build an LLM model entry from a Hugging Face config.json, read as the
    table says for its model_type (the shipped table when None), validated
    against `vocabulary` (the shipped one when None)."""
    from pydantic import ValidationError
    table = table or shipped_table()
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

    def lookup(rule: FieldRule, _name: str) -> tuple[Any, str]:
        for key in rule.keys:
            if get(key) is not None:
                return get(key), key
        return None, ""

    sink = DiagnosticSink()
    at = lambda key: _json_key_span(file, text, key)  # noqa: E731
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        sink.error("missing field 'model_type' in Hugging Face config", Span(file))
        model_type = ""
    reader = table.reader(model_type, inner.get("model_type"))
    schema = model_class("model", vocabulary)
    reading = _Reading(reader, lookup)
    spec_in: dict[str, Any] = {}
    params = _evaluate(reading, schema, spec_in, file, sink)
    for key, message in reading.bad:
        sink.error(message, at(key))
    if reading.missing:
        sink.items.append(_missing(reading, model_type or reader.model_type, file))
    try:
        params_b = int(params) / 1e9
    except OverflowError:
        sink.error("the config's sizes give more parameters than a number can hold", Span(file))
    sink.raise_if_errors(sources)
    hf_id = _str(cfg.get("_name_or_path"))
    spec_in.update(kind="llm", model_type=model_type, family=model_type,
                   params_b=params_b,
                   name=name or hf_id or _name_from_path(file),
                   hf_id=hf_id or str(Path(file).resolve().parent), source=f"hf: {file}")
    if reader.mlp is not None:
        spec_in["mlp"] = reader.mlp
    template = _template(reading)
    if template is not None:
        spec_in["template"] = template
    try:
        return schema.model_validate(spec_in)
    except ValidationError as e:
        for err in e.errors():
            fld = str(err["loc"][0]) if err["loc"] else ""
            rule = reader.fields.get(fld)
            key = next((k for k in (rule.keys if rule else ()) if get(k) is not None), "")
            msg = err["msg"].removeprefix("Value error, ")
            sink.error(f"{key}: {msg}" if key else msg, at(key) if key else Span(file))
        sink.raise_if_errors(sources)
        raise  # unreachable: every validation error was reported


def _evaluate(reading: _Reading, schema: type, spec_in: dict, file: str,
              sink: DiagnosticSink) -> Fraction:
    """The model fields the reader gives (into spec_in) and the total count."""
    try:
        for fld in reading.reader.fields:
            if fld in schema.model_fields:
                value = reading.value(fld)
                if value is not ABSENT:
                    spec_in[fld] = int(value) if isinstance(value, Fraction) else value
        params = reading.value(TOTAL)
    except (_Cycle, ValueError) as e:
        sink.error(f"model_type '{reading.reader.model_type}' cannot be counted: {e}",
                   Span(file), hint=f"see {reading.reader.span or HF_FILE}")
        return Fraction(0)
    if not reading.missing and not reading.bad and params <= 0:
        sink.error(f"the parameter count of this config comes out as {params}", Span(file))
    return params


def _template(reading: _Reading) -> str | None:
    """The entry's chat template when its condition holds for this config."""
    template = reading.reader.template
    if template is None:
        return None
    if template.when is not None:
        try:
            holds = reading.eval(_tree(template.when))
        except (_Cycle, ValueError):
            return None
        if holds is ABSENT or not holds:
            return None
    return template.name


def _missing(reading: _Reading, model_type: str, file: str) -> Diagnostic:
    keys = list(reading.missing)
    fields = list(dict.fromkeys(reading.missing.values()))
    listed = " and ".join(", ".join(f"'{k}'" for k in keys).rsplit(", ", 1))
    them = "it" if len(keys) == 1 else "them"
    aliases = [f"{f} from {' or '.join(reading.reader.fields[f].keys)}" for f in fields
               if f in reading.reader.fields and len(reading.reader.fields[f].keys) > 1]
    return Diagnostic(
        f"missing field{'s' if len(keys) > 1 else ''} {listed} in Hugging Face config "
        f"(model_type '{model_type}' needs {them} for {', '.join(fields)})", Span(file),
        hint=f"model_type '{model_type}' reads {'; '.join(aliases)}" if aliases else "")


def hf_param_count(v: dict[str, Any], tied: bool | None = None,
                   table: HfTable | None = None) -> int:
    """Total parameters of a model given by its catalog fields (`v`, by model
    field name; its model_type picks the reader), counted as the table says."""
    table = table or shipped_table()
    reader = table.reader(v.get("model_type"))
    given = dict(v)
    if tied is not None:
        given["tied_embeddings"] = tied

    def lookup(_rule: FieldRule, name: str) -> tuple[Any, str]:
        value = given.get(name)
        return (int(value) if isinstance(value, float) and value.is_integer() else value), name

    reading = _Reading(reader, lookup, canonical=True)
    try:
        params = reading.value(TOTAL)
    except (_Cycle, ValueError) as e:
        raise KbError(Diagnostic(f"model_type '{reader.model_type}' cannot be counted: {e}")) \
            from None
    if reading.missing or reading.bad:
        raise KbError(Diagnostic(f"cannot count the parameters of model "
                                 f"'{v.get('name', '?')}': "
                                 + "; ".join([f"no value for {', '.join(reading.missing)}"]
                                             * bool(reading.missing)
                                             + [m for _, m in reading.bad])))
    return int(params)


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
