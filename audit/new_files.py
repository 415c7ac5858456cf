"""A fix that names one of the framework's own files (LlamaFactory's
examples/deepspeed/ds_z3_config.json) in a project where the run starts
without it: the file is written beside the config instead, with the keys
`kbsolve --emit` would write for those option values, and the config names
that one, relative to where the run starts. An existing file is never
overwritten: a file of the same name and text is named as it is, another one
makes the new file take the next free name."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

from kbsolve.audit.assess import Context
from kbsolve.audit.audit_data import as_file, repository_file
from kbsolve.results.audit import Change


def ground_paths(ctx: Context, main_name: str, changes: list[Change], root: Path,
                 config: Path) -> list[Change]:
    """`changes` with every framework path that is not in the project (from
    `root`, where the run starts) replaced by a new file beside `config`."""
    out = []
    for change in changes:
        entry = repository_file(ctx.kb, ctx.framework, change.new) \
            if isinstance(change.new, str) and not change.removed else None
        if entry is None or (root / change.new).is_file():
            out.append(change)
            continue
        text = _text(ctx, main_name, entry)
        local = _free_name(config.parent / PurePosixPath(entry.path).name, text)
        named = Path(os.path.relpath(local, root)).as_posix()
        note = f"writes {named}, a new file: {change.new} is not where the run starts"
        out.append(change.model_copy(update={
            "new": named, "new_file": local.name, "content": text,
            "reason": f"{change.reason}; {note}" if change.reason else note}))
    return out


def _text(ctx: Context, main_name: str, entry) -> str:
    """The file's text, as the framework's file kind is written (JSON or YAML)."""
    fw = ctx.kb.frameworks[ctx.framework]
    targets = {e.target for key in entry.options for e in ctx.kb.options[key].emits
               if e.target != main_name}
    target = next(f for f in fw.files if f.name in targets and f.kind in ("json", "yaml"))
    flat = as_file(ctx.kb, ctx.framework, target.name, entry, entry.path, ctx.facts).values
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None:  # a value the framework's default covers
            continue
        node = tree
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    if target.kind == "json":
        return json.dumps(tree, indent=2) + "\n"
    import yaml
    return yaml.safe_dump(tree, sort_keys=False)


def _free_name(path: Path, text: str) -> Path:
    """PATH when it is free or already holds `text`, else PATH with .1, .2, ... before
    its suffix."""
    candidate, number = path, 0
    while candidate.exists():
        try:
            if candidate.read_text(encoding="utf-8") == text:
                return candidate
        except (OSError, UnicodeDecodeError):
            pass
        number += 1
        candidate = path.with_name(f"{path.stem}.{number}{path.suffix}")
    return candidate
