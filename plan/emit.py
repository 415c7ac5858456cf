"""Write a plan as the framework's own files, driven by the KB's emit clauses.

File kinds: yaml and json hold nested keys (`a.b.c`); env holds environment
variables; params holds the launch script's own parameters, each read from the
environment with the emitted value as its default (an empty value makes it
required); script holds the launch command; requirements holds the packages the
plan needs (key: the package, value: its version specifier or `@ URL`); args holds
a script's command-line flags (key: the flag without `--`), written as a bash array
named after the file, which the launch command takes as `{NAME}` ("${NAME[@]}"): a
true value is the bare flag, false or an omitted value leaves it out (argparse's
store_true), anything else is `--key value`.

Files of one path are merged. A path that holds params, env or script is one
shell script: a usage comment from the params' docs, `set -euo pipefail`, a `cd`
to the script's own folder (the files refer to each other by relative paths),
the params, the env lines, then the command. A file whose `if` condition does
not hold for the plan is not written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl.kb import PLACEHOLDER, Framework, KnowledgeBase
from kbsolve.plan.emit_folder import Emitted, write_folder
from kbsolve.program.program import link
from kbsolve.program.query import Query, resolve
from kbsolve.plan.report import option_key, plain

FLAT_KINDS = ("params", "args", "requirements")  # keys are names, never dotted paths
SHELL_KINDS = ("params", "env", "args", "script")  # in the order a script holds them


def file_contents(kb: KnowledgeBase, plan) -> dict[str, Any]:
    """Output name -> nested dict (yaml, json) or ordered dict (env, params,
    requirements), for the files the plan writes."""
    resolved = resolve(kb, Query(**plan.query))
    problem = resolved.problem
    values = {c.option: c.value for c in plan.explanation}
    # a plan cut short by its time-out explains nothing; its config has every value
    assignment = {o.key: _native(values[o.name] if o.name in values
                                 else plan.config.get(option_key(kb, o)), o)
                  for o in problem.options}
    framework = kb.frameworks[problem.framework]
    flat = {f.name for f in framework.files if f.kind in FLAT_KINDS}
    outputs: dict[str, dict] = {
        f.name: {} for f in framework.files
        if f.condition is None or problem.evaluator.run(f.condition, assignment)}
    for option in problem.options:
        if option.when is not None and not problem.evaluator.run(option.when, assignment):
            continue  # the option does nothing in this config; do not write it
        if assignment[option.key] is None:
            continue
        for emit in option.emits:
            if emit.target not in outputs:
                continue
            value = plain(assignment[option.key])
            if emit.value_map is not None:
                mapped = {plain(k): v for k, v in emit.value_map}
                if value in mapped:
                    value = mapped[value]
                    if value is None:
                        continue
            _put(outputs[emit.target], emit.key, plain(value), emit.target in flat)
    for emit in problem.program.emits:
        if emit.target not in outputs:
            continue
        if emit.when is not None and not problem.evaluator.run(emit.when, assignment):
            continue
        _put(outputs[emit.target], emit.key,
             plain(problem.evaluator.run(emit.value, assignment)), emit.target in flat)
    return outputs


def fill_launch(kb: KnowledgeBase, framework: Framework, command: str) -> str:
    """A launch template with its placeholders filled: `{file}` becomes the file's
    path (an args file: its flags, the shell's `"${file[@]}"`), `{PARAM}` (a key of a
    params file) the shell's `"$PARAM"`."""
    paths = {f.name: f.path for f in framework.files}
    arrays = {f.name for f in framework.files if f.kind == "args"}
    params = _param_keys(kb, framework)

    def fill(match) -> str:
        name = match.group(1)
        if name in arrays:
            return f'"${{{name}[@]}}"'
        if name in paths:
            return paths[name]
        return f'"${name}"' if name in params else match.group(0)
    return PLACEHOLDER.sub(fill, command)


def _param_keys(kb: KnowledgeBase, framework: Framework) -> set[str]:
    params = {f.name for f in framework.files if f.kind == "params"}
    program = link(kb, framework.name)
    return {e.key for e in program.emits if e.target in params} | {
        e.key for o in program.options for e in o.emits if e.target in params}


def _native(value, option):
    from fractions import Fraction
    if option.type.kind == "num" and isinstance(value, (int, float)) and \
            not isinstance(value, bool):
        return Fraction(value).limit_denominator(10**9)
    return value


def _put(tree: dict, dotted: str, value, flat: bool = False) -> None:
    if isinstance(value, tuple):  # a list map value
        value = [plain(v) for v in value]
    parts = [dotted] if flat else dotted.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def write_files(kb: KnowledgeBase, plan, directory: str, force: bool = False) -> Emitted:
    framework = kb.frameworks[plan.framework]
    outputs = file_contents(kb, plan)
    emits = link(kb, framework.name).emits
    docs = {(e.target, e.key): e.meta.doc for e in emits}
    spans = {(e.target, e.key): e.meta.span for e in emits}
    texts: dict[str, list[str]] = {}
    shell: dict[str, dict[str, list]] = {}  # path -> kind -> lines (params: tuples)
    for spec in framework.files:
        if spec.name not in outputs:
            continue  # its condition does not hold for this plan
        content = outputs[spec.name]
        if spec.kind in SHELL_KINDS:
            lines = shell.setdefault(spec.path, {}).setdefault(spec.kind, [])
            if spec.kind == "env":
                lines += [f"export {k}={_shell(v)}" for k, v in _flat(content)]
            elif spec.kind == "params":
                lines += [(k, _text(v), docs.get((spec.name, k), "")) for k, v in content.items()]
            elif spec.kind == "args":
                lines += _flags(spec.name, content)
            elif plan.launch:
                lines.append(plan.launch)
        elif spec.kind == "yaml" and content:
            import yaml  # here: a plan fills its launch line from this module, never a file
            texts.setdefault(spec.path, []).append(yaml.safe_dump(content, sort_keys=False))
        elif spec.kind == "json" and content:
            texts.setdefault(spec.path, []).append(json.dumps(content, indent=2) + "\n")
        elif spec.kind == "requirements" and content:
            texts.setdefault(spec.path, []).append(
                _requirements(content, spec.name, spans, docs, spec.path))
    scripts = {path: _script(path, kinds) for path, kinds in shell.items()
               if any(kinds.values())}
    files = {path: scripts[path] if path in scripts else "".join(texts[path])
             for path in list(texts) + list(scripts)}
    return write_folder(directory, files, set(scripts), force)


def _script(path: str, kinds: dict[str, list[str]]) -> str:
    """One shell script: usage, parameters, environment, command."""
    name = Path(path).name
    params = kinds.get("params", [])  # (name, default, doc)
    head = ["#!/usr/bin/env bash"]
    body = ["set -euo pipefail", 'cd "$(dirname "${BASH_SOURCE[0]}")"']
    if params:
        usage = " ".join(f"{k}=..." if v == "" else f"[{k}={v}]" for k, v, _ in params)
        usage = f"usage: {usage} bash {name}"
        width = max(len(k) for k, _, _ in params)
        head += [f"# Written by kbsolve; runs from any folder. Set its parameters in the "
                 f"environment:", f"#   {usage.removeprefix('usage: ')}"]
        head += [f"#   {k.ljust(width)}  {doc or k}"
                 f" ({'required' if v == '' else 'default ' + v})" for k, v, doc in params]
        body.append(f"usage={_quote(usage)}")
        body.append(f'fail() {{ echo "{name}: $1" >&2; echo "$usage" >&2; exit 2; }}')
        for k, v, doc in params:
            body.append(f'{k}="${{{k}:-{_dq(v)}}}"')
        for k, v, doc in params:
            if v == "":
                body.append(f'[ -n "${k}" ] || fail {_quote(f"set {k}: {doc or k}")}')
            elif v.isdigit():
                body.append(f'case "${k}" in ""|*[!0-9]*) fail "{k} must be a whole number, '
                            f'not \'${k}\'";; esac')
        body.append("export " + " ".join(k for k, _, _ in params))
    body += kinds.get("env", []) + kinds.get("args", []) + kinds.get("script", [])
    return "\n".join(head + body) + "\n"


def _flags(name: str, content: dict) -> list[str]:
    """A bash array of command-line flags: `--key value`, a true value the bare flag,
    false or None nothing (argparse store_true), a list its items after the flag."""
    lines = [f"{name}=("]
    for key, value in content.items():
        if value is None or value is False:
            continue
        if value is True:
            lines.append(f"  --{key}")
        elif isinstance(value, list):
            lines.append(f"  --{key} " + " ".join(_shell(v) for v in value))
        else:
            lines.append(f"  --{key} {_shell(value)}")
    return lines + [")"]


def _requirements(content: dict, file: str, spans: dict, docs: dict, path: str) -> str:
    """One requirement a line, each after its emit's doc as a comment (how to install it)."""
    # imported here: a plan fills its launch line from this module and writes no file
    from packaging.requirements import InvalidRequirement, Requirement
    lines = [f"# The packages this plan needs: pip install -r {path}"]
    for package, spec in content.items():
        if docs.get((file, package)):
            lines.append(f"# {package}: {docs[(file, package)]}")
        spec = str(spec or "").strip()
        line = f"{package} {spec}" if spec.startswith("@") else f"{package}{spec}"
        try:
            Requirement(line)
        except InvalidRequirement as error:
            raise KbError(Diagnostic(f"requirement '{line}' is not a valid requirement: {error}",
                                     spans.get((file, package)))) from None
        lines.append(line)
    return "\n".join(lines) + "\n"


def _flat(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}_")
        else:
            yield f"{prefix}{key}", value


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _shell(value) -> str:
    text = _text(value)
    return text if text.replace("_", "").replace("-", "").replace(".", "").isalnum() \
        else _quote(text)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _dq(text: str) -> str:
    """Text inside double quotes, taken literally."""
    return "".join("\\" + c if c in '\\"$`' else c for c in text)
