"""Write a plan as the framework's own files, driven by the KB's emit clauses.

File kinds: yaml and json hold nested keys (`a.b.c`); env holds environment
variables; script holds the launch command. Files of one path are merged
(env lines first, then the command).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.solver.query import Query, resolve
from kbsolve.solver.report import plain


def file_contents(kb: KnowledgeBase, plan) -> dict[str, Any]:
    """Output name -> nested dict (yaml, json) or ordered dict (env)."""
    resolved = resolve(kb, Query(**plan.query))
    problem = resolved.problem
    values = {c.option: c.value for c in plan.explanation}
    assignment = {o.key: _native(values.get(o.name), o) for o in problem.options}
    framework = kb.frameworks[problem.framework]
    outputs: dict[str, dict] = {f.name: {} for f in framework.files}
    for option in problem.options:
        if option.when is not None and not problem.evaluator.run(option.when, assignment):
            continue  # the option does nothing in this config; do not write it
        if assignment[option.key] is None:
            continue
        for emit in option.emits:
            value = plain(assignment[option.key])
            if emit.value_map is not None:
                mapped = {plain(k): v for k, v in emit.value_map}
                if value in mapped:
                    value = mapped[value]
                    if value is None:
                        continue
            _put(outputs[emit.target], emit.key, plain(value))
    for emit in kb.emits:
        if emit.framework != problem.framework:
            continue
        if emit.when is not None and not problem.evaluator.run(emit.when, assignment):
            continue
        _put(outputs[emit.target], emit.key, plain(problem.evaluator.run(emit.value, assignment)))
    return outputs


def _native(value, option):
    from fractions import Fraction
    if option.type.kind == "num" and isinstance(value, (int, float)) and \
            not isinstance(value, bool):
        return Fraction(value).limit_denominator(10**9)
    return value


def _put(tree: dict, dotted: str, value) -> None:
    if isinstance(value, tuple):  # a list map value
        value = [plain(v) for v in value]
    parts = dotted.split(".")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def write_files(kb: KnowledgeBase, plan, directory: str) -> list[str]:
    framework = kb.frameworks[plan.framework]
    outputs = file_contents(kb, plan)
    texts: dict[str, list[str]] = {}
    for spec in framework.files:
        content = outputs[spec.name]
        if spec.kind == "yaml" and content:
            texts.setdefault(spec.path, []).append(yaml.safe_dump(content, sort_keys=False))
        elif spec.kind == "json" and content:
            texts.setdefault(spec.path, []).append(json.dumps(content, indent=2) + "\n")
        elif spec.kind == "env" and content:
            lines = [f"export {k}={_shell(v)}" for k, v in _flat(content)]
            texts.setdefault(spec.path, []).insert(0, "\n".join(lines) + "\n")
        elif spec.kind == "script" and plan.launch:
            texts.setdefault(spec.path, []).append(plan.launch + "\n")
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for path, chunks in texts.items():
            body = "".join(chunks)
            if path.endswith(".sh"):
                body = "#!/usr/bin/env bash\nset -euo pipefail\n" + body
            out = target / path
            out.write_text(body, encoding="utf-8")
            if path.endswith(".sh"):
                os.chmod(out, 0o755)
            written.append(str(out))
    except OSError as error:
        raise KbError(Diagnostic(f"--emit {directory}: {error.strerror or error}")) from None
    return written


def _flat(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}_")
        else:
            yield f"{prefix}{key}", value


def _shell(value) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return text if text.replace("_", "").replace("-", "").replace(".", "").isalnum() \
        else "'" + text.replace("'", "'\\''") + "'"
