"""Write the recommended changes into the user's YAML: ruamel.yaml round trip
(comments and key order kept), a numbered backup of the original (`.bak`,
`.bak.1`, ...: an earlier backup is never overwritten), an atomic replace."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kbsolve.results.audit import Change
from kbsolve.diagnostics import Diagnostic, KbError


def apply_changes(path: Path, changes: list[Change]) -> tuple[list[str], str, list[str]]:
    """Edit the file in place; returns the keys changed, the backup's name ('' when
    nothing was written) and the new files written beside it (a change's
    `new_file`). Keys of other files (`file:key`) are left for the user and not
    returned."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.representer.add_representer(float, _float)
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
    backup, created = "", []
    if done:
        for change in changes:
            if change.new_file and change.key in done:
                created += _create(path.parent / change.new_file, change.content)
        out = io.StringIO()
        yaml.dump(data, out)
        backup = write_atomic(path, out.getvalue())
    return done, backup, created


def _create(target: Path, text: str) -> list[str]:
    """Write a new file; one that holds the same text is left as it is, any other
    is never overwritten (exit 2)."""
    try:
        with open(target, "x", encoding="utf-8") as out:
            out.write(text)
        return [target.name]
    except FileExistsError:
        try:
            if target.read_text(encoding="utf-8") == text:
                return []
        except (OSError, UnicodeDecodeError):
            pass
        raise KbError(Diagnostic(f"{target}: exists with other content; not overwritten, "
                                 f"nothing written")) from None
    except OSError as error:
        raise KbError(Diagnostic(f"{target}: cannot write ({error.strerror or error})")) from None


def _float(representer, value: float):
    """A float as YAML 1.1 reads it back as a float: PyYAML, which the frameworks
    load configs with, takes `1e-05` for a string (its float needs a dot), so the
    mantissa gets one: `1.0e-05`."""
    text = repr(value)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return representer.represent_scalar("tag:yaml.org,2002:float", text)


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


def backup_path(path: Path) -> Path:
    """The first free name of PATH.bak, PATH.bak.1, PATH.bak.2, ..."""
    candidate, number = path.with_name(path.name + ".bak"), 0
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = path.with_name(f"{path.name}.bak.{number}")
    return candidate


def write_atomic(path: Path, text: str) -> str:
    """Keep the original in a new numbered backup, then replace PATH in one step;
    returns the backup's name. Any file error is a one-line KbError (exit 2)."""
    temp = ""
    try:
        backup = backup_path(path)
        with open(path, "rb") as source, open(backup, "xb") as copy:  # never overwrites
            shutil.copyfileobj(source, copy)
        shutil.copystat(path, backup)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                        suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        shutil.copymode(path, temp)
        os.replace(temp, path)
    except OSError as error:
        if temp and os.path.exists(temp):
            os.unlink(temp)
        raise KbError(Diagnostic(f"{path}: cannot write ({error.strerror or error})")) from None
    return backup.name
