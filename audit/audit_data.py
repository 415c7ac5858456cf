"""The KB's audit data (kb/<framework>/audit.yaml, next to the framework's
declaration): files a framework resolves from its own repository, keys that
set several options, and which option gives a query fact that several options
are tied to. Checked when read; a bad entry is a KB error (exit 2)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbsolve.audit.mapping import FlatFile, coerce, plain, written_value
from kbsolve.diagnostics import Diagnostic, KbError, Span
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.evaluate import Evaluator

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


@dataclass
class AuditData:
    repository_files: list[RepoFile] = field(default_factory=list)
    keys: list[MultiKey] = field(default_factory=list)
    shape: dict[str, str] = field(default_factory=dict)  # fact path -> option key
    where: str = ""


def audit_data(kb: KnowledgeBase, framework: str) -> AuditData:
    """The framework's audit data (empty when it has none), read once per KB."""
    cache = kb.__dict__.setdefault("_audit_data", {})
    if framework not in cache:
        cache[framework] = _load(kb, framework)
    return cache[framework]


def _file_for(kb: KnowledgeBase, framework: str) -> Path | None:
    declared = Path(kb.frameworks[framework].meta.span.file)
    candidates = [declared] if declared.is_absolute() else \
        [Path(__file__).resolve().parents[1] / declared, declared]
    for candidate in candidates:
        path = candidate.parent / FILE_NAME
        if path.is_file():
            return path
    return None


def _load(kb: KnowledgeBase, framework: str) -> AuditData:
    path = _file_for(kb, framework)
    if path is None:
        return AuditData()
    from kbsolve.catalog.yamlpos import load_yaml, read_text
    data, positions = load_yaml(read_text(path), file=str(path))

    def fail(message: str, at: tuple = ()) -> KbError:
        return KbError(Diagnostic(f"{message} ({FILE_NAME} of {framework})",
                                  positions.get(at, Span(str(path)))))

    if not isinstance(data, dict) or data.get("framework") != framework:
        raise fail(f"framework: must be {framework}")
    out = AuditData(where=str(path))
    for i, entry in enumerate(data.get("repository_files") or []):
        at = ("repository_files", i)
        _need(entry, ("path", "options", "because", "source"), fail, at)
        options = {}
        for name, value in (entry["options"] or {}).items():
            options[_option(kb, framework, name, fail, at)] = _value(kb, framework, name,
                                                                     value, fail, at)
        out.repository_files.append(RepoFile(str(entry["path"]).strip("/"), options,
                                             dict(entry.get("settings") or {}),
                                             str(entry["because"]), str(entry["source"])))
    for i, entry in enumerate(data.get("keys") or []):
        at = ("keys", i)
        _need(entry, ("key", "options", "because", "source"), fail, at)
        out.keys.append(MultiKey(str(entry["key"]), tuple(
            _option(kb, framework, n, fail, at) for n in entry["options"]),
            str(entry["because"]), str(entry["source"])))
    for i, entry in enumerate(data.get("shape") or []):
        at = ("shape", i)
        _need(entry, ("fact", "option", "because", "source"), fail, at)
        out.shape[str(entry["fact"])] = _option(kb, framework, entry["option"], fail, at)
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
        from kbsolve.diagnostics import did_you_mean
        raise fail(f"'{name}' is not an option of {framework}"
                   f"{did_you_mean(str(name), [o.name for o in kb.options_of(framework)])}", at)
    return key


def _value(kb: KnowledgeBase, framework: str, name: str, raw, fail, at: tuple):
    option = kb.options[f"{framework}.{name}"]
    value = coerce(option, raw)
    if option.domain is not None and value not in option.domain:
        raise fail(f"{name}: {raw!r} is not a value of the option", at)
    return value


def repository_file(kb: KnowledgeBase, framework: str, value: str) -> RepoFile | None:
    """The framework's own file that a config's path names, if the KB knows it."""
    wanted = posixpath.normpath(value.strip()).lstrip("./") if value.strip() else ""
    for entry in audit_data(kb, framework).repository_files:
        if wanted == entry.path or wanted.endswith("/" + entry.path):
            return entry
    return None


def as_file(kb: KnowledgeBase, framework: str, target: str, entry: RepoFile,
            rel: str) -> FlatFile:
    """The keys the entry's option values write into `target` (their emits and the
    top-level emits they decide), plus its settings: what `--emit` would write."""
    values: dict[str, Any] = dict(entry.settings)
    for key, value in entry.options.items():
        for emit in kb.options[key].emits:
            if emit.target == target:
                mapping = dict(emit.value_map) if emit.value_map is not None else {}
                out = mapping.get(value, value)
                if out is not None:
                    values[emit.key] = plain(out)
    defaults = {o.key: o.default for o in kb.options_of(framework)}
    assignment = {**defaults, **entry.options}
    evaluator = Evaluator(kb, framework, {})
    from kbsolve.dsl.ir import options_used
    for static in kb.emits:
        if static.framework != framework or static.target != target or static.when is None \
                or not options_used(static.when) <= entry.options.keys():
            continue
        try:
            if not evaluator.run(static.when, assignment):
                continue
        except KbError:
            continue
        try:
            values.setdefault(static.key, plain(evaluator.run(static.value, assignment)))
        except KbError:  # a value that needs the model (a bucket size): the key is there
            values.setdefault(static.key, None)
    return FlatFile(rel, values)


def config_value(kb: KnowledgeBase, option, target: str, value) -> tuple[str, Any] | None:
    """(key, value) an option value writes into the config: `written_value`, except
    that a reference to a file kbsolve would write (ds_config.json) becomes the
    framework's own file for that value when the KB knows one (LlamaFactory's
    examples/deepspeed/ds_z3_config.json), since the user has no ds_config.json."""
    written = written_value(option, target, value)
    if written is None:
        return None
    paths = {f.path for f in kb.frameworks[option.framework].files}
    if isinstance(written[1], str) and written[1] in paths:
        for entry in audit_data(kb, option.framework).repository_files:
            others = {k: v for k, v in entry.options.items() if k != option.key}
            if entry.options.get(option.key) == value and \
                    all(kb.options[k].default == v for k, v in others.items()):
                return written[0], entry.path
    return written


def reference_change(kb: KnowledgeBase, framework: str, main_name: str, option_key: str,
                     after: dict[str, Any]) -> tuple[str, str] | None:
    """(main key, path) for an option that lives in another file the main config
    names (Flow-Factory's config_file: the accelerate or DeepSpeed file): the
    framework's own file whose option values the changed config has, if any."""
    option = kb.options[option_key]
    files = {f.name: f.path for f in kb.frameworks[framework].files}
    targets = {files.get(e.target) for e in option.emits if e.target != main_name}
    key = next((s.key for s in kb.emits if s.framework == framework and s.target == main_name
                and isinstance(getattr(s.value, "value", None), str)
                and s.value.value in targets), None)
    if key is None:
        return None
    for entry in audit_data(kb, framework).repository_files:
        if option_key in entry.options and \
                all(after.get(k, kb.options[k].default) == v for k, v in entry.options.items()):
            return key, entry.path
    return None
