"""Write the recommended changes into the user's YAML: ruamel.yaml round trip
(comments and key order kept), a `.bak` of the original, an atomic replace."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kbsolve.audit.model import Change
from kbsolve.diagnostics import Diagnostic, KbError


def apply_changes(path: Path, changes: list[Change]) -> list[str]:
    """Edit the file in place; returns the keys changed. Keys of other files
    (`file:key`) are left for the user and not returned."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text)
    except (OSError, UnicodeDecodeError, YAMLError) as error:
        raise KbError(Diagnostic(f"{path}: cannot be rewritten ({error})")) from None
    if not isinstance(data, dict):
        raise KbError(Diagnostic(f"{path}: not a mapping of settings; nothing written"))
    done = []
    for change in changes:
        if ":" in change.key:
            continue
        parts = change.key.split(".")
        if change.removed:
            if _delete(data, parts):
                done.append(change.key)
        else:
            _set(data, parts, change.new)
            done.append(change.key)
    if done:
        out = io.StringIO()
        yaml.dump(data, out)
        write_atomic(path, out.getvalue())
    return done


def _set(data: Any, parts: list[str], value: Any) -> None:
    for part in parts[:-1]:
        if not isinstance(data.get(part), dict):
            data[part] = {}
        data = data[part]
    data[parts[-1]] = value


def _delete(data: Any, parts: list[str]) -> bool:
    for part in parts[:-1]:
        data = data.get(part) if isinstance(data, dict) else None
    if isinstance(data, dict) and parts[-1] in data:
        del data[parts[-1]]
        return True
    return False


def write_atomic(path: Path, text: str) -> None:
    """Keep `PATH.bak`, then replace PATH in one step."""
    shutil.copy2(path, path.with_name(path.name + ".bak"))
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        shutil.copymode(path, temp)
        os.replace(temp, path)
    except OSError as error:
        if os.path.exists(temp):
            os.unlink(temp)
        raise KbError(Diagnostic(f"{path}: cannot write ({error.strerror or error})")) from None
