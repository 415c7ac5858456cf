"""From a config's keys to the KB's options, through each option's `emit`
clauses read backwards. Nothing here names a framework's option."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import KbError, Span
from kbsolve.dsl.ir import options_used
from kbsolve.dsl.kb import KnowledgeBase, Option
from kbsolve.program.evaluate import Evaluator
from kbsolve.audit.accepted_keys import value_effect
from kbsolve.program.repo_files import NO_VALUE as _NO_VALUE, coerce  # noqa: F401 (moved there)


@dataclass
class FlatFile:
    """One file of a config, flattened to dotted keys (see texts.flatten)."""

    rel: str
    values: dict[str, Any]
    spans: dict[str, Span] = field(default_factory=dict)


@dataclass
class Reading:
    values: dict[str, Any] = field(default_factory=dict)  # option key -> value
    where: dict[str, tuple[str, str]] = field(default_factory=dict)  # option -> (file, key)
    raw: dict[str, Any] = field(default_factory=dict)  # option key -> value as written
    used: set[tuple[str, str]] = field(default_factory=set)  # (target, key) read
    odd: list[tuple[str, str, Any]] = field(default_factory=list)  # (option, key, raw)
    outside: list[tuple[str, str, Any]] = field(default_factory=list)  # judged as written
    disagree: list[tuple[str, list[str]]] = field(default_factory=list)  # (option, "file: raw")
    effects: list[tuple[str, str, Any, Any]] = field(default_factory=list)  # (option, key, raw,
    #   ValueEffect): values the framework refuses or ignores (accepted_keys.yaml)
    aliased: list[tuple[str, str, Any, Any, str]] = field(default_factory=list)
    ambiguous: list[tuple[str, tuple]] = field(default_factory=list)

    def span(self, files: dict[str, FlatFile], option_key: str) -> str:
        target, key = self.where.get(option_key, ("", ""))
        file = files.get(target)
        if file is None:
            return ""
        return str(file.spans.get(key) or file.rel)


def read_options(kb: KnowledgeBase, framework: str, files: dict[str, FlatFile]) -> Reading:
    paths = {f.path for f in kb.frameworks[framework].files}
    reading = Reading()
    for option in kb.options_of(framework):
        _read_one(kb, option, files, paths, reading)
    _read_multi_keys(kb, framework, files, reading)
    for _, _, _, effect in reading.effects:
        for name, value in effect.read_as.items():
            reading.values[f"{framework}.{name}"] = coerce(kb.options[f"{framework}.{name}"],
                                                           value)
    return reading


def _read_multi_keys(kb: KnowledgeBase, framework: str, files: dict[str, FlatFile],
                     reading: Reading) -> None:
    """Keys that set several options (kb/<framework>/audit.yaml `keys`): a scalar
    sets each, a list sets them in order; an option's own key wins."""
    from kbsolve.audit.audit_data import audit_data
    main_name = next((f.name for f in kb.frameworks[framework].files if f.kind == "yaml"), "")
    main = files.get(main_name)
    if main is None:
        return
    for multi in audit_data(kb, framework).keys:
        if multi.key not in main.values:
            continue
        raw = main.values[multi.key]
        parts = list(raw) if isinstance(raw, (list, tuple)) else [raw] * len(multi.options)
        reading.used.add((main_name, multi.key))
        if len(parts) != len(multi.options):
            reading.odd.append((multi.options[0], multi.key, raw))
            continue
        for key, part in zip(multi.options, parts):
            if key in reading.where:
                continue
            option = kb.options[key]
            value = coerce(option, part)
            reading.where[key] = (main_name, multi.key)
            reading.raw[key] = raw
            if value is _NO_VALUE or not _in_domain(option, value):
                reading.odd.append((key, multi.key, raw))
                continue
            reading.values[key] = value


def _by_static_emits(kb: KnowledgeBase, option: Option, files: dict[str, FlatFile],
                     candidates: list) -> list:
    """The values whose fixed emits (`emit deepspeed "..." = ... when ...`) best
    agree with what the files hold; only emits that tell the values apart count."""
    defaults = {o.key: o.default for o in kb.options_of(option.framework)}
    evaluator = Evaluator(kb, option.framework, {})
    signs = []  # (key present?, {value: emit wanted?})
    for static in kb.emits:
        file = files.get(static.target)
        if static.framework != option.framework or file is None or static.when is None \
                or options_used(static.when) != {option.key}:
            continue
        try:
            wanted = {v: bool(evaluator.run(static.when, {**defaults, option.key: v}))
                      for v in candidates}
        except KbError:
            continue
        if len(set(wanted.values())) > 1:
            signs.append((static.key in file.values, wanted))
    misses = {v: sum(present != wanted[v] for present, wanted in signs) for v in candidates}
    best = min(misses.values())
    return [v for v in candidates if misses[v] == best]


def _read_one(kb: KnowledgeBase, option: Option, files: dict[str, FlatFile], paths: set,
              reading: Reading) -> None:
    flag_files = {f.name for f in kb.frameworks[option.framework].files if f.kind == "args"}
    candidates: list | None = list(option.domain) if option.domain is not None else None
    present = False
    first: list | None = None  # the candidates the first file holding the option leaves
    seen: list[str] = []
    for emit in option.emits:
        if present and first is None:
            first = list(candidates) if candidates is not None else None
        file = files.get(emit.target)
        if file is None:
            continue
        mapping = dict(emit.value_map) if emit.value_map is not None else None
        if emit.key not in file.values:
            if mapping and None in mapping.values() and candidates is not None:
                candidates = [c for c in candidates if mapping.get(c, c) is None]
            continue
        raw = file.values[emit.key]
        seen.append(f"{file.rel}: {raw}")
        reading.used.add((emit.target, emit.key))
        effect = value_effect(kb, option.framework, emit.key, raw)
        if effect is not None:  # refused: nothing is read; ignored: as the framework reads it
            reading.where[option.key] = (emit.target, emit.key)
            reading.raw[option.key] = raw
            reading.effects.append((option.key, emit.key, raw, effect))
            return
        if not present:
            reading.where[option.key] = (emit.target, emit.key)
            reading.raw[option.key] = raw
        present = True
        if mapping is not None and candidates is not None:
            kept = [c for c in candidates if _written(mapping.get(c, c), raw, paths, option)
                    or (mapping.get(c, c) is None and _spelt_out(option, emit.target, flag_files,
                                                                  c)
                        and _written(c, raw, paths, option))]  # a default, spelt out
            alias = None if kept else _value_alias(option, raw)
            if alias is not None:
                if str(alias.new) != str(raw):  # the value itself, spelt as the KB's: no word
                    reading.aliased.append((option.key, emit.key, raw, alias.new, alias.note))
                kept = [c for c in candidates if c == alias.new]
            candidates = kept
            continue
        if mapping is not None and candidates is None:  # no domain: the map read backwards
            back = [k for k, out in mapping.items() if _written(out, raw, paths, option)]
            if len(back) == 1:
                candidates = back
                continue
        value = coerce(option, raw)
        if value is not _NO_VALUE and not _in_domain(option, value) and \
                _as_written(option, value):
            reading.outside.append((option.key, emit.key, raw))
            reading.values[option.key] = value
            return
        if value is _NO_VALUE or not _in_domain(option, value):
            alias = _value_alias(option, raw)
            if alias is None:
                reading.odd.append((option.key, emit.key, raw))
                return
            reading.aliased.append((option.key, emit.key, raw, alias.new, alias.note))
            value = alias.new
        beyond = option.domain is not None and value not in option.domain  # bound-valid
        candidates = [value] if candidates is None or beyond else \
            [c for c in candidates if c == value]
    if not present:
        return
    if not candidates and first:  # the files disagree: the main file's value, as written
        reading.disagree.append((option.key, seen))
        candidates = first
    if not candidates:
        reading.odd.append((option.key, reading.where[option.key][1], reading.raw[option.key]))
        return
    if len(candidates) > 1:
        candidates = _by_static_emits(kb, option, files, candidates)
    if len(candidates) > 1:
        reading.ambiguous.append((option.key, tuple(candidates)))
    reading.values[option.key] = option.default if option.default in candidates \
        else candidates[0]


def _spelt_out(option: Option, target: str, flag_files: set[str], value: Any = None) -> bool:
    """Whether writing a value the KB omits (`map { false: omit }`) means that value:
    for a bool (false is the framework's own default), for any flag, and for an
    enum's named value (LlamaFactory's `quantization_method: bnb`, its own default's
    name); not for a value standing for Python's None (LlamaFactory's
    quantization_bit 0, an enum's "none" or "")."""
    return option.type.kind == "bool" or target in flag_files or \
        (option.type.kind == "enum" and str(plain(value)) not in ("none", ""))


def _as_written(option: Option, value: Any) -> bool:
    """A number outside the option's search domain that the formulas can still
    take as written (micro-batch 3 where the planner tries 1, 2, 4, ...): of the
    option's type (whole when it is integral), not below the domain's least value."""
    if option.type.kind != "num" or not isinstance(value, Fraction):
        return False
    if option.type.integral and value.denominator != 1:
        return False
    least = min(option.domain) if option.domain else option.low
    return least is None or value >= least


def _in_domain(option: Option, value: Any) -> bool:
    return option.accepts(value)


def _written(out: Any, raw: Any, paths: set, option: Option) -> bool:
    """Whether the value an emit writes matches what the user wrote."""
    if out is None:
        return False
    if isinstance(out, str) and out in paths:  # a reference to another file
        return isinstance(raw, str) and raw.strip() != ""
    if isinstance(out, (list, tuple)) or isinstance(raw, (list, tuple)):
        return _as_list(out) == _as_list(raw)  # a one-item list is its item
    if isinstance(out, bool) or isinstance(raw, bool):
        return isinstance(out, bool) and isinstance(raw, bool) and out == raw
    if isinstance(out, (int, float, Fraction)):
        try:
            return Fraction(str(raw)) == Fraction(out)
        except (ValueError, ZeroDivisionError):
            return False
    return str(out) == str(raw)


def _as_list(value: Any) -> list[str]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return [str(item) for item in items]


def _value_alias(option: Option, raw: Any):
    for alias in option.value_aliases:
        if alias.old == raw or str(alias.old).lower() == str(raw).lower():
            return alias
    return None


def written_value(option: Option, target: str, value: Any) -> tuple[str, Any] | None:
    """(key, value as the file holds it) for an option value; None when omitted."""
    for emit in option.emits:
        if emit.target != target:
            continue
        mapping = dict(emit.value_map) if emit.value_map is not None else {}
        out = mapping.get(value, value)
        return None if out is None else (emit.key, plain(out))
    return None


def plain(value: Any) -> Any:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value
