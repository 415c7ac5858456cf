"""Audit units for runs a framework drives by flags (torchtitan, diffusers' example
scripts): one per launch line, with the flags as the framework's `args` file, the
TOML config the line names under them, the accelerate config it passes, and the
script it runs as the `params` value the KB maps it to."""

from __future__ import annotations

import posixpath
import tomllib

from kbsolve.audit import kinds
from kbsolve.audit.launch_lines import LaunchLine, launch_lines
from kbsolve.audit.mapping import FlatFile
from kbsolve.audit.texts import flatten
from kbsolve.dsl.kb import KnowledgeBase


def launch_units(kb: KnowledgeBase, tree, texts, make_unit, skipped: list[str]) -> list:
    """`make_unit(framework, rel, signs)`: read_project's Unit; the lines of kinds
    the KB does not audit go to `skipped`, one line each. A unit is named by its
    script, with the line number when the script launches more than once."""
    units = []
    for framework in kb.frameworks:
        signatures = kinds.kind_data(kb, framework).launches
        if not signatures:
            continue
        words = {w for s in signatures for w in s.any}
        copies = any(s.renamed for s in signatures)  # a known script under another name
        known = tree.by_rel()
        for entry in tree.files:
            readme = kinds.is_readme(entry.rel)
            if not (kinds.is_shell(entry.rel) or readme):
                continue
            text = texts.text(entry.rel) or ""
            if not any(w in text for w in words) and not (copies and ".py" in text):
                continue
            lines = launch_lines(framework, signatures, entry.rel, text, readme,
                                 lambda rel: texts.text(rel) if rel in known else None)
            for line in lines:
                signature = next(s for s in signatures if s.name == line.kind)
                where = entry.rel if len(lines) == 1 else f"{entry.rel}:{line.line}"
                if not signature.audit:
                    skipped.append(f"{where}: not audited: {signature.name} "
                                   f"({signature.because})")
                    continue
                units.append(_unit(kb, tree, texts, framework, line, make_unit, where))
    return units


def _unit(kb: KnowledgeBase, tree, texts, framework: str, line: LaunchLine, make_unit,
          where: str):
    fw = kb.frameworks[framework]
    unit = make_unit(framework, where, [f"{line.kind} (line {line.line})"])
    unit.launch = line.launch
    if line.read_as:
        unit.notes.append(f"{line.rel}:{line.line}: {line.read_as}")
    signature = next(s for s in kinds.kind_data(kb, framework).launches if s.name == line.kind)
    if signature.min_version and line.script_rel:
        text = texts.text(line.script_rel) or ""
        match = signature.min_version["pattern"].search(text)
        if match:
            where = f"{line.script_rel}:{text[:match.start()].count(chr(10)) + 1}"
            unit.min_version = (match.group("version"), where, signature.min_version)
    args = main_file(kb, framework, "launch")
    values, spans = _expanded(kb, framework, unit, line)
    if line.config_file is not None:
        base = _toml(tree, texts, line, unit)
        values, spans = {**base[0], **values}, {**base[1], **spans}
    unit.files[args] = FlatFile(line.rel, values, spans)
    from kbsolve.audit.read_project import references
    unit.rel, rel = line.rel, unit.rel  # paths in the flags resolve as the script's
    references(kb, tree, texts, unit, unit.files[args], args, set())
    unit.rel = rel
    params = _params(kb, framework, line)
    for f in fw.files:
        if f.kind == "params" and params:
            unit.files[f.name] = FlatFile(line.rel, params)
        if f.kind == "env" and line.launch.env:
            unit.files[f.name] = FlatFile(line.rel, dict(line.launch.env))
    accelerate = line.launch.config_file
    target = next((f.name for f in fw.files if f.kind == "yaml" and f.name != args), None)
    if accelerate and target and target not in unit.files:
        if accelerate in tree.by_rel():
            from kbsolve.audit.read_project import _flat
            flat = _flat(tree, texts, accelerate, unit)
            if flat is not None:
                unit.files[target] = flat
        else:
            unit.notes.append(f"{line.rel}:{line.line}: --config_file {accelerate} is not in "
                              f"the project")
    return unit


def _expanded(kb: KnowledgeBase, framework: str, unit, line: LaunchLine) -> tuple[dict, dict]:
    """The flags as the framework's parser reads them: where its argparse takes a unique
    prefix of a key (kb accepted_keys.yaml `cli_abbrev`), `--max_step` is max_steps."""
    from kbsolve.audit.accepted_keys import accepted_keys
    table = accepted_keys(kb, framework)
    values, spans = {}, {}
    for flag, value in line.flags.items():
        full = table.abbreviated(flag) if table is not None else None
        key = full if full is not None and full not in line.flags else flag
        if key != flag:
            unit.notes.append(f"{line.rel}:{line.line}: --{flag} is read as --{key} "
                              f"(argparse takes a unique prefix)")
        values[key] = value
        if flag in line.spans:
            spans[key] = line.spans[flag]
    return values, spans


def main_file(kb: KnowledgeBase, framework: str, unit_kind: str) -> str:
    """The file a unit's settings are read from: a launch line's flags are the
    framework's `args` file, else (LlamaFactory's flags are its YAML keys) its main
    YAML; a config is its main YAML."""
    files = kb.frameworks[framework].files
    if unit_kind == "launch":
        found = next((f.name for f in files if f.kind == "args"), None)
        if found:
            return found
    return next(f.name for f in files if f.kind == "yaml")


def _toml(tree, texts, line: LaunchLine, unit) -> tuple[dict, dict]:
    path = posixpath.normpath(posixpath.join(line.launch.directory or "", line.config_file))
    if not path.endswith(".toml"):
        unit.notes.append(f"{line.rel}:{line.line}: {line.config_file} is not a TOML config: "
                          f"its settings are not read")
        return {}, {}
    if path not in tree.by_rel():
        unit.notes.append(f"{line.rel}:{line.line}: {line.config_file} is not in the project")
        return {}, {}
    try:
        data = tomllib.loads(texts.text(path) or "")
    except tomllib.TOMLDecodeError as error:
        unit.notes.append(f"{path}: TOML syntax error: {error}")
        return {}, {}
    values, _ = flatten(data, {})
    from kbsolve.diagnostics import Span
    return values, {key: Span(path) for key in values}


def _params(kb: KnowledgeBase, framework: str, line: LaunchLine) -> dict:
    """The script the line runs, as the params value an option maps it to (the
    KB's `emit params "SCRIPT" map {...}`), matched by the file name."""
    found = {}
    for option in kb.options_of(framework):
        for emit in option.emits:
            target = next((f for f in kb.frameworks[framework].files if f.name == emit.target),
                          None)
            if target is None or target.kind != "params" or emit.value_map is None:
                continue
            for _, out in emit.value_map:
                if isinstance(out, str) and \
                        posixpath.basename(out) == posixpath.basename(line.script):
                    found[emit.key] = out
    return found
