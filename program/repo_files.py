"""The framework's own repository files and other audit data (kb/<framework>/audit.yaml,
next to the framework's declaration): files a framework resolves from its own
repository (LlamaFactory's examples/deepspeed/ds_z3_config.json stands for
deepspeed=z3), keys that set several options, and which option gives a query
fact. Read by the audit (audit/) and by --set (program/problem.py), checked when
read; a bad entry is a KB error (exit 2)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError, SourceCache, Span, did_you_mean
from kbsolve.dsl.kb import KnowledgeBase, Option
from kbsolve.program.program import link

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


NO_VALUE = object()  # what coerce returns for a value the option cannot take


def coerce(option: Option, raw: Any) -> Any:
    """A value as written, in the option's terms; NO_VALUE when it cannot be."""
    kind = option.type.kind
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        return True if text in _TRUE else False if text in _FALSE else NO_VALUE
    if kind == "num":
        if isinstance(raw, bool) or raw is None or isinstance(raw, (list, dict)):
            return NO_VALUE
        try:
            return Fraction(str(raw).strip())
        except (ValueError, ZeroDivisionError):
            return NO_VALUE
    if isinstance(raw, (list, dict)):
        return NO_VALUE
    if raw is None:
        return NO_VALUE
    return str(raw).lower() if isinstance(raw, bool) else str(raw)


FILE_NAME = "audit.yaml"


@dataclass(frozen=True)
class RepoFile:
    path: str
    options: dict[str, Any]  # option key -> value
    settings: dict[str, Any]  # raw keys of the file (launcher settings)
    because: str
    source: str


@dataclass(frozen=True)
class MultiKey:
    key: str
    options: tuple[str, ...]  # option keys, in the order a list value gives them
    because: str
    source: str


@dataclass(frozen=True)
class FixScope:
    """What a config's keys must show for `--fix` to write into it: `requires`
    (raw key -> value as written) all present, none of `refuses` present."""
    requires: dict[str, Any]
    refuses: tuple[str, ...]
    because: str
    source: str


@dataclass(frozen=True)
class RequiredKey:
    """A key the framework's parser raises without, when `requires` (raw key ->
    value as written) all hold in the config."""
    key: str
    requires: dict[str, Any]
    because: str
    source: str


@dataclass(frozen=True)
class LauncherNeeds:
    """A launcher that does nothing of its own without a key of the config (the
    `deepspeed` launcher without a DeepSpeed config: plain data parallelism)."""
    launcher: str
    key: str
    because: str
    source: str


@dataclass(frozen=True)
class OverrideForm:
    """How a launcher reads the arguments after the config file on its command line
    (`llamafactory-cli train cfg.yaml key=value`): `form` is key=value; a `--key`
    there is not read as an override."""
    launcher: str
    form: str
    because: str
    source: str


@dataclass(frozen=True)
class MediaDatasets:
    """Datasets with media columns (dataset_info.json): the stages that keep only
    the text, and the templates that have a multimodal plugin."""
    columns: tuple[str, ...]
    dataset_dir: str
    text_only_stages: tuple[str, ...]
    templates: frozenset[str]
    dropped_because: str
    dropped_source: str
    refused_because: str
    refused_source: str


@dataclass(frozen=True)
class Threshold:
    """The least gain, by the estimate, for which the audit recommends a change."""
    memory_gib: Fraction
    speed_pct: Fraction
    because: str
    source: str


@dataclass(frozen=True)
class RecipeLimit:
    """A recipe option whose value above `above` times the shipped example's (its
    `from`) is a stability risk (`kbsolve fix --symptom unstable`)."""
    option: str  # option key
    above: Fraction
    because: str
    source: str


@dataclass
class AuditData:
    repository_files: list[RepoFile] = field(default_factory=list)
    keys: list[MultiKey] = field(default_factory=list)
    shape: dict[str, str] = field(default_factory=dict)  # fact path -> option key
    fix_scope: list[FixScope] = field(default_factory=list)
    threshold: Threshold | None = None
    advice_rules: dict[str, str] = field(default_factory=dict)  # rule id -> because
    logged_warnings: dict[str, str] = field(default_factory=dict)  # warning id -> because
    estimate_caveats: dict[str, str] = field(default_factory=dict)  # warning id -> because
    environment_tips: dict[str, str] = field(default_factory=dict)  # warning id -> because
    advice_tips: dict[str, str] = field(default_factory=dict)  # warning id -> because
    required_keys: list[RequiredKey] = field(default_factory=list)
    launcher_needs: list[LauncherNeeds] = field(default_factory=list)
    override_forms: list[OverrideForm] = field(default_factory=list)
    media: MediaDatasets | None = None
    recipe_limits: list[RecipeLimit] = field(default_factory=list)
    where: str = ""


def audit_data(kb: KnowledgeBase, framework: str) -> AuditData:
    """The framework's audit data (empty when it has none), read once per KB."""
    cache = kb.__dict__.setdefault("_audit_data", {})
    if framework not in cache:
        cache[framework] = _load(kb, framework)
    return cache[framework]


def side_yaml(kb: KnowledgeBase, framework: str, file_name: str,
              sections: dict[str, tuple[str, ...]] | None = None):
    """A framework's side YAML file (beside its framework.kb: audit.yaml, file_kinds.yaml,
    versions.yaml, accepted_keys.yaml), loaded with positions: (path, data, fail), or None
    when the framework has none. fail(message, at) is a KbError (code side-file) at the
    entry's line; the file must name its framework. With `sections` (section -> the
    fields of its entries, or of the section itself when it is a mapping) every top-level
    key must be a section and every field one of its section's: a misspelt name is an
    error with did-you-mean, never data left unread."""
    declared = Path(kb.frameworks[framework].meta.span.file)
    candidates = [declared] if declared.is_absolute() else \
        [Path(__file__).resolve().parents[1] / declared, declared]
    path = next((c.parent / file_name for c in candidates
                 if (c.parent / file_name).is_file()), None)
    if path is None:
        return None
    from kbsolve.catalog.yamlpos import load_yaml, read_text
    sources = SourceCache()
    data, positions = load_yaml(read_text(path), file=str(path), sources=sources)

    def fail(message: str, at: tuple = ()) -> KbError:
        while at and at not in positions:  # the nearest entry that has a place
            at = at[:-1]
        return KbError(Diagnostic(f"{message} ({file_name} of {framework})",
                                  positions.get(at, Span(str(path))), code="side-file"),
                       sources)

    if not isinstance(data, dict) or data.get("framework") != framework:
        raise fail(f"framework: must be {framework}")
    for key in data if sections is not None else ():
        if key != "framework" and key not in sections:
            raise fail(f"unknown section '{key}'{did_you_mean(str(key), sections)}", (key,))
        value = data[key]
        entries = [((key,), value)] if isinstance(value, dict) else \
            [((key, i), e) for i, e in enumerate(value)] if isinstance(value, list) else []
        for at, entry in entries:
            for name in entry if isinstance(entry, dict) and key != "framework" else ():
                if name not in sections[key]:
                    raise fail(f"{key}: unknown field '{name}'"
                               f"{did_you_mean(str(name), sections[key])}", at + (name,))
    return path, data, fail


_WHY = ("because", "source")
SECTIONS = {  # audit.yaml: section -> the fields of its entries
    "repository_files": ("path", "options", "settings") + _WHY,
    "keys": ("key", "options") + _WHY, "shape": ("fact", "option") + _WHY,
    "fix_scope": ("requires", "refuses") + _WHY, "advice_rules": ("rule",) + _WHY,
    "logged_warnings": ("warning",) + _WHY, "estimate_caveats": ("warning",) + _WHY,
    "environment_tips": ("warning",) + _WHY, "advice_tips": ("warning",) + _WHY,
    "override_forms": ("launcher", "form") + _WHY,
    "media_datasets": ("columns", "dataset_dir", "text_only_stages", "templates",
                       "dropped_because", "dropped_source", "refused_because", "refused_source"),
    "required_keys": ("key", "requires") + _WHY,
    "launcher_needs": ("launcher", "key") + _WHY, "recipe_limits": ("option", "above") + _WHY,
    "advice_threshold": ("memory_gib", "speed_pct") + _WHY}


def _load(kb: KnowledgeBase, framework: str) -> AuditData:
    found = side_yaml(kb, framework, FILE_NAME, SECTIONS)
    if found is None:
        return AuditData()
    path, data, fail = found
    out = AuditData(where=str(path))
    for i, entry in enumerate(data.get("repository_files") or []):
        at = ("repository_files", i)
        _need(entry, ("path", "options", "because", "source"), fail, at)
        options = {}
        if not isinstance(entry["options"], dict):
            raise fail("options: a mapping of option names to values", at + ("options",))
        for name, value in entry["options"].items():
            here = at + ("options", name)
            key = _option(kb, framework, name, fail, here)  # before its value is read
            options[key] = _value(kb, framework, name, value, fail, here)
        out.repository_files.append(RepoFile(str(entry["path"]).strip("/"), options,
                                             dict(entry.get("settings") or {}),
                                             str(entry["because"]), str(entry["source"])))
    for i, entry in enumerate(data.get("keys") or []):
        at = ("keys", i)
        _need(entry, ("key", "options", "because", "source"), fail, at)
        out.keys.append(MultiKey(str(entry["key"]), tuple(
            _option(kb, framework, n, fail, at + ("options", i))
            for i, n in enumerate(entry["options"])),
            str(entry["because"]), str(entry["source"])))
    for i, entry in enumerate(data.get("shape") or []):
        at = ("shape", i)
        _need(entry, ("fact", "option", "because", "source"), fail, at)
        out.shape[str(entry["fact"])] = _option(kb, framework, entry["option"], fail,
                                                at + ("option",))
    for i, entry in enumerate(data.get("fix_scope") or []):
        at = ("fix_scope", i)
        _need(entry, ("because", "source"), fail, at)
        requires, refuses = entry.get("requires") or {}, entry.get("refuses") or []
        if not isinstance(requires, dict) or not isinstance(refuses, list) or \
                not (requires or refuses):
            raise fail("an entry needs requires (a mapping) or refuses (a list)", at)
        out.fix_scope.append(FixScope(dict(requires), tuple(str(k) for k in refuses),
                                      str(entry["because"]), str(entry["source"])))
    out.advice_rules = _named(data, "advice_rules", "rule", set(), framework, kb.rules, fail,
                              "a rule")
    out.logged_warnings = _named(data, "logged_warnings", "warning", set(out.advice_rules),
                                 framework, kb.warnings, fail,
                                 "neither a warning nor an advice rule")
    out.estimate_caveats = _named(data, "estimate_caveats", "warning", set(), framework,
                                  kb.warnings, fail, "a warning")
    out.environment_tips = _named(data, "environment_tips", "warning", set(), framework,
                                  kb.warnings, fail, "a warning")
    out.advice_tips = _named(data, "advice_tips", "warning", set(out.advice_rules), framework,
                             kb.warnings, fail, "neither a warning nor an advice rule")
    for i, entry in enumerate(data.get("required_keys") or []):
        at = ("required_keys", i)
        _need(entry, ("key", "because", "source"), fail, at)
        if not isinstance(entry.get("requires") or {}, dict):
            raise fail("requires is a mapping of keys to values as written", at)
        out.required_keys.append(RequiredKey(str(entry["key"]), dict(entry.get("requires") or {}),
                                             str(entry["because"]), str(entry["source"])))
    for i, entry in enumerate(data.get("launcher_needs") or []):
        at = ("launcher_needs", i)
        _need(entry, ("launcher", "key", "because", "source"), fail, at)
        out.launcher_needs.append(LauncherNeeds(str(entry["launcher"]), str(entry["key"]),
                                                str(entry["because"]), str(entry["source"])))
    media = data.get("media_datasets")
    if media is not None:
        fields = SECTIONS["media_datasets"]
        _need(media, fields, fail, ("media_datasets",))
        out.media = MediaDatasets(tuple(map(str, media["columns"])), str(media["dataset_dir"]),
                                  tuple(map(str, media["text_only_stages"])),
                                  frozenset(map(str, media["templates"])),
                                  *(str(media[f]) for f in fields[4:]))
    for i, entry in enumerate(data.get("override_forms") or []):
        at = ("override_forms", i)
        _need(entry, ("launcher", "form", "because", "source"), fail, at)
        if entry["form"] != "key=value":
            raise fail("override_forms: form must be key=value", at)
        out.override_forms.append(OverrideForm(str(entry["launcher"]), str(entry["form"]),
                                               str(entry["because"]), str(entry["source"])))
    for i, entry in enumerate(data.get("recipe_limits") or []):
        at = ("recipe_limits", i)
        _need(entry, ("option", "above", "because", "source"), fail, at)
        key = _option(kb, framework, entry["option"], fail, at + ("option",))
        if kb.options[key].source_expr is None:
            raise fail(f"{entry['option']} has no `from` (the example's value) to compare with",
                       at + ("option",))
        try:
            above = Fraction(str(entry["above"]))
        except (ValueError, ZeroDivisionError):
            raise fail("above: a number", at + ("above",)) from None
        out.recipe_limits.append(RecipeLimit(key, above, str(entry["because"]),
                                             str(entry["source"])))
    entry = data.get("advice_threshold")
    if entry is not None:
        at = ("advice_threshold",)
        _need(entry, ("because", "source"), fail, at)
        try:
            memory, speed = Fraction(str(entry["memory_gib"])), Fraction(str(entry["speed_pct"]))
        except (KeyError, ValueError, ZeroDivisionError):
            raise fail("advice_threshold needs memory_gib and speed_pct, numbers", at) from None
        if memory < 0 or speed < 0:
            raise fail("advice_threshold: memory_gib and speed_pct are at least 0",
                       at + ("memory_gib" if memory < 0 else "speed_pct",))
        out.threshold = Threshold(memory, speed, str(entry["because"]), str(entry["source"]))
    return out


def _need(entry, fields: tuple[str, ...], fail, at: tuple) -> None:
    if not isinstance(entry, dict):
        raise fail("an entry must be a mapping", at)
    missing = [f for f in fields if not entry.get(f)]
    if missing:
        raise fail(f"entry lacks {', '.join(missing)}", at)


def _option(kb: KnowledgeBase, framework: str, name, fail, at: tuple) -> str:
    key = f"{framework}.{name}"
    if key not in kb.options:
        raise fail(f"'{name}' is not an option of {framework}"
                   f"{did_you_mean(str(name), [o.name for o in link(kb, framework).options])}", at)
    return key


def _value(kb: KnowledgeBase, framework: str, name: str, raw, fail, at: tuple):
    option = kb.options[f"{framework}.{name}"]
    value = coerce(option, raw)
    if value is NO_VALUE or not option.accepts(value):
        raise fail(f"{name}: {raw!r} is not a value of the option", at)
    return value


def repository_file(kb: KnowledgeBase, framework: str, value: str) -> RepoFile | None:
    """The framework's own file that a config's path names, if the KB knows it."""
    wanted = posixpath.normpath(value.strip()).lstrip("./") if value.strip() else ""
    for entry in audit_data(kb, framework).repository_files:
        if wanted == entry.path or wanted.endswith("/" + entry.path):
            return entry
    return None


def _named(data: dict, section: str, field_name: str, also: set, framework: str, declared,
           fail, what: str) -> dict[str, str]:
    """An audit.yaml list of {FIELD: id, because, source} naming declarations of the
    framework (or `also`): id -> because."""
    found: dict[str, str] = {}
    for i, entry in enumerate(data.get(section) or []):
        at = (section, i)
        _need(entry, (field_name, "because", "source"), fail, at)
        name = str(entry[field_name])
        if f"{framework}.{name}" not in declared and name not in also:
            not_ = what if what.startswith("neither") else f"not {what}"
            raise fail(f"'{name}' is {not_} of {framework}"
                       f"{did_you_mean(name, _names_of(declared, framework) | also)}",
                       at + (field_name,))
        found[name] = str(entry["because"])
    return found


def _names_of(declared, framework: str) -> set[str]:
    prefix = framework + "."
    return {key[len(prefix):] for key in declared if key.startswith(prefix)}
