"""A project to audit units: each training config with the files it refers to
and the scripts that launch it, plus code units for frameworks with code checks."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from kbsolve.audit import kinds
from kbsolve.audit.audit_data import as_file, repository_file
from kbsolve.audit.classify import classify, key_sets
from kbsolve.audit.code_patterns import has_code_checks
from kbsolve.audit.detect import ProjectText, Sign, project_signs
from kbsolve.audit.launch import LaunchInfo, launch_of
from kbsolve.audit.read_launches import launch_units
from kbsolve.audit.mapping import FlatFile, plain
from kbsolve.audit.texts import Unreadable, data_of, flatten
from kbsolve.audit.versions import project_version
from kbsolve.audit.walk import Entry, Tree

MAX_LEVELS_UP = 4
from kbsolve.dsl.kb import KnowledgeBase


@dataclass
class Unit:
    framework: str
    kind: str  # config | launch | code
    rel: str
    files: dict[str, FlatFile] = field(default_factory=dict)  # framework file name -> data
    signs: list[str] = field(default_factory=list)
    launch: LaunchInfo = field(default_factory=LaunchInfo)
    code: str = ""
    notes: list[str] = field(default_factory=list)
    file_kind: str = ""  # the KB's file kind, when one matched (an audited kind)
    accepted: str = "training"  # which table of the parser's accepted keys applies
    warnings: tuple[str, ...] = ()  # a keys-only unit: the KB warnings its kind is judged by
    min_version: tuple | None = None  # (version, "script:line", kinds' min_version entry)
    missing: dict[str, str] = field(default_factory=dict)  # key -> a path not in the project
    outside: dict[str, str] = field(default_factory=dict)  # key -> a path beside one named config
    unreadable: dict[str, str] = field(default_factory=dict)  # key -> why its file is unusable


@dataclass
class Project:
    root: Path
    signs: list[Sign]
    units: list[Unit]
    notes: list[str]  # skipped files, unreadable configs
    files: int
    not_audited: list[str] = field(default_factory=list)  # "path: not audited: kind (why)"
    not_configs: int = 0  # YAML files read that are no config (nor a config's file)
    unparsed: list[str] = field(default_factory=list)  # "file:line:col: YAML syntax error"
    versions: dict = field(default_factory=dict)  # framework -> ProjectVersion (pinned or vendored)


def read_project(kb: KnowledgeBase, tree: Tree) -> Project:
    texts = ProjectText(tree)
    signs = project_signs(kb, texts)
    votes: dict[str, int] = {}
    for sign in signs:
        votes[sign.framework] = votes.get(sign.framework, 0) + 1
    sets = key_sets(kb)
    parsed: dict[str, FlatFile] = {}
    units: list[Unit] = []
    not_audited: list[str] = []
    unparsed: list[str] = []
    yamls = 0
    keys_only: list[Unit] = []  # files of a kind not audited whose keys are checked
    for entry in tree.files:
        if not kinds.is_yaml(entry.rel):
            continue
        yamls += 1
        text = texts.text(entry.rel)
        if text is None or not sets.words.search(text):
            continue
        try:
            data, positions = data_of(entry, text)
        except Unreadable as error:
            texts.notes.append(str(error))
            unparsed.append(str(error))
            continue
        if not isinstance(data, dict):
            continue
        values, spans = flatten(data, positions)
        parsed[entry.rel] = FlatFile(entry.rel, values, spans)
        framework, hits = classify(kb, sets, values, votes)
        if framework is None:
            continue
        kind = kinds.kind_of(kb, framework, values)
        if kind is not None and not kind.audit:
            not_audited.append(f"{entry.rel}: not audited: {kind.name} ({kind.because})"
                               + (f"; only the keys its parser refuses are checked"
                                  if kind.keys != "none" else ""))
            if kind.keys != "none":  # its parser still refuses unknown keys: errors
                keys_only.append(Unit(framework, "keys", entry.rel,
                                      {main_file_name(kb, framework): parsed[entry.rel]},
                                      hits, file_kind=kind.name, accepted=kind.keys,
                                      warnings=kind.warnings))
            continue
        units.append(Unit(framework, "config", entry.rel, {}, hits,
                          file_kind=kind.name if kind else "",
                          accepted=kind.keys if kind else "training"))
    referenced: set[str] = set()
    for unit in units:
        referenced |= _attach(kb, tree, texts, unit, parsed[unit.rel])
    units = [u for u in units if u.rel not in referenced]
    versions = {fw: project_version(kb, fw, texts) for fw in {u.framework for u in units}}
    configs = len(units) + len(not_audited) + len({r for r in referenced if kinds.is_yaml(r)})
    units += launch_units(kb, tree, texts,
                          lambda fw, rel, signs: Unit(fw, "launch", rel, {}, signs), not_audited)
    units += _code_units(kb, tree, texts)
    for unit in keys_only:  # the launch's environment may allow any key (ALLOW_EXTRA_ARGS)
        _read_launch(kb, tree, texts, unit, set())
    units += keys_only
    return Project(tree.root, signs, units, tree.notes + texts.notes, len(tree.files),
                   not_audited, max(yamls - configs - len(unparsed), 0), unparsed,
                   {fw: v for fw, v in versions.items() if v is not None})


def main_file_name(kb: KnowledgeBase, framework: str) -> str:
    return next(f.name for f in kb.frameworks[framework].files if f.kind == "yaml")


def _attach(kb: KnowledgeBase, tree: Tree, texts: ProjectText, unit: Unit,
            main: FlatFile) -> set[str]:
    """Fill the unit's files (main, referenced JSON/YAML, env) and launch info."""
    fw = kb.frameworks[unit.framework]
    main_name = next(f.name for f in fw.files if f.kind == "yaml")
    unit.files[main_name] = main
    referenced: set[str] = set()
    _read_launch(kb, tree, texts, unit, referenced)
    references(kb, tree, texts, unit, main, main_name, referenced)
    for f in fw.files:
        if f.kind == "env" and unit.launch.env:
            unit.files[f.name] = FlatFile(", ".join(unit.launch.scripts), dict(unit.launch.env))
    return referenced


LFS_POINTER = "version https://git-lfs.github.com/spec/"  # a Git LFS pointer file's first line
LFS_HINT = " (a Git LFS pointer, not the file: fetch it with git lfs pull)"


def references(kb: KnowledgeBase, tree: Tree, texts: ProjectText, unit: Unit, main: FlatFile,
               main_name: str, referenced: set[str]) -> None:
    """The files the main file's values name (a DeepSpeed JSON, an accelerate YAML),
    from the launch directory first; the framework's own files the KB knows."""
    fw = kb.frameworks[unit.framework]
    by_key = _reference_keys(kb, unit.framework)
    others = [f for f in fw.files if f.name != main_name and f.kind in ("json", "yaml")]
    for key, value in main.values.items():
        if not isinstance(value, str) or not value.endswith((".json", ".yaml", ".yml")):
            continue
        rel = _resolve(tree, unit.rel, value, unit.launch.directory)
        if rel == unit.rel:
            continue
        target = by_key.get(key) or next(
            (f.name for f in others if f.name not in unit.files
             and (f.kind == "json") == value.endswith(".json")), None)
        if rel is None:
            where = main.spans.get(key, main.rel)
            own = repository_file(kb, unit.framework, value)
            if own is not None and target is not None and target not in unit.files:
                unit.files[target] = as_file(kb, unit.framework, target, own, value)
                shown = ", ".join(f"{k.split('.', 1)[1]}: {plain(v)}"
                                  for k, v in own.options.items())
                unit.notes.append(f"{where}: {key}: {value} is {unit.framework}'s own file "
                                  f"(a path in its repository, not in the project); read as "
                                  f"{shown} ({own.because}; {own.source})")
            elif tree.single:  # one config named: the project may lie around it
                unit.outside[key] = value  # what the file sets is unknown, not a default
                unit.notes.append(f"{where}: {key} refers to {value}, which is not in the "
                                  f"project: what it sets is not judged at a default")
            else:
                unit.missing[key] = value
            continue
        if target is None or target in unit.files:
            continue
        flat = _flat(tree, texts, rel, unit, key)
        if flat is not None:
            unit.files[target] = flat
            referenced.add(rel)


def _read_launch(kb: KnowledgeBase, tree: Tree, texts: ProjectText, unit: Unit,
                 referenced: set[str]) -> None:
    """The scripts whose lines name this config by its path; the accelerate config
    such a line passes (--config_file) is the framework file the KB's launch
    templates put there."""
    name = posixpath.basename(unit.rel)
    scripts = {e.rel: text for e in tree.files if kinds.is_shell(e.rel)
               for text in [texts.text(e.rel) or ""] if name in text or "$" in text}
    unit.launch = launch_of(scripts, unit.rel, set(tree.by_rel()))
    given = unit.launch.config_file
    target = _config_file_target(kb, unit.framework)
    if given is None or target is None or target in unit.files:
        return
    if given not in tree.by_rel():
        unit.notes.append(f"{', '.join(unit.launch.scripts)}: --config_file {given} is not "
                          f"in the project")
        return
    flat = _flat(tree, texts, given, unit)
    if flat is not None:
        unit.files[target] = flat
        referenced.add(given)


def _config_file_target(kb: KnowledgeBase, framework: str) -> str | None:
    """The framework file that the KB's launch templates pass as --config_file."""
    for launch in kb.frameworks[framework].launches:
        match = re.search(r"--config_file \{(\w+)\}", launch.command)
        if match:
            return match.group(1)
    return None


def _reference_keys(kb: KnowledgeBase, framework: str) -> dict[str, str]:
    """Main-file keys whose written value is another file's path -> that file's name."""
    paths = {f.path: f.name for f in kb.frameworks[framework].files}
    found: dict[str, str] = {}
    for option in kb.options_of(framework):
        for emit in option.emits:
            for _, out in emit.value_map or ():
                if isinstance(out, str) and out in paths and paths[out] != emit.target:
                    found[emit.key] = paths[out]
    return found


def _resolve(tree: Tree, config_rel: str, value: str,
             launch_dir: str | None = None) -> str | None:
    """A referenced path, tried from the directory the launch runs in, then from
    the config's folder up to the project root (and, when one config was named,
    up the folders above it)."""
    index = tree.by_rel()
    if launch_dir is not None:
        candidate = posixpath.normpath(posixpath.join(launch_dir, value))
        if candidate in index:
            return candidate
    folder = posixpath.dirname(config_rel)
    while True:
        candidate = posixpath.normpath(posixpath.join(folder, value))
        if candidate in index:
            return candidate
        if not folder:
            break
        folder = posixpath.dirname(folder)
    if not tree.single:
        return None
    for base in [tree.root, *list(tree.root.parents)[:MAX_LEVELS_UP]]:
        candidate = base / value
        if candidate.is_file():
            rel = os.path.relpath(candidate, tree.root)
            tree.files.append(Entry(candidate, rel, candidate.stat().st_size))
            return rel
    return None


def _flat(tree: Tree, texts: ProjectText, rel: str, unit: Unit,
          key: str | None = None) -> FlatFile | None:
    """A settings file; one the config names by `key` and that does not parse is
    the run's error (the framework opens it), else a note."""
    entry = tree.by_rel()[rel]
    try:
        data, positions = data_of(entry, texts.text(rel))
    except Unreadable as error:
        if key is None:
            unit.notes.append(str(error))
        else:
            unit.unreadable[key] = str(error) + (LFS_HINT if (texts.text(rel) or "")
                                                 .startswith(LFS_POINTER) else "")
        return None
    if not isinstance(data, dict):
        unit.notes.append(f"{rel}: not a mapping of settings")
        return None
    values, spans = flatten(data, positions)
    return FlatFile(rel, values, spans)


def _code_units(kb: KnowledgeBase, tree: Tree, texts: ProjectText) -> list[Unit]:
    units = []
    for name, detector in kb.detectors.items():
        if not detector.imports or not has_code_checks(kb, name):
            continue
        for entry in tree.files:
            if not kinds.is_python(entry.rel):
                continue
            modules = texts.modules(entry.rel)
            hits = [p for p in detector.imports
                    if any(m == p or m.startswith(p + ".") for m in modules)]
            if hits:
                units.append(Unit(name, "code", entry.rel, signs=[f"import {h}" for h in hits],
                                  code=texts.text(entry.rel) or ""))
    return units
