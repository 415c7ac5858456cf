"""The folder `--emit` writes into: nothing of the user's overwritten, nothing stale left.

A manifest (MANIFEST, beside the files) records each file kbsolve wrote there and
its SHA-256. A folder holding anything else (a file the manifest does not list, or
one changed since kbsolve wrote it) is refused unless `force`; the next emit
removes the files of the last one that the new plan does not write (an old
`ds_config.json`), when they are unchanged. Every OS error is one KbError (exit 2).
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kbsolve.diagnostics import Diagnostic, KbError

MANIFEST = ".kbsolve-emitted.json"


@dataclass
class Emitted:
    """The files an emit wrote and the stale ones it removed."""
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # stale files of an earlier emit


def check_folder(directory: str, force: bool = False) -> None:
    """Refuse (exit 2, one line naming the file) a folder holding what kbsolve did not
    write there, unless `force`."""
    if not force:
        foreign = _foreign(Path(directory), _manifest(Path(directory)))
        if foreign:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise KbError(Diagnostic(
                f"--emit {_short(directory)}: {_short(foreign[0])}{more} was not written by kbsolve (or was "
                f"changed since); choose an empty folder, or pass --force to write over it"))


def write_folder(directory: str, files: dict[str, str], executable: set[str],
                 force: bool = False) -> Emitted:
    """Write `files` (name -> text) into `directory`, then the manifest; remove the
    last emit's files that are not written again and are unchanged."""
    target = Path(directory)
    try:
        check_folder(directory, force)
        old = _manifest(target)
        target.mkdir(parents=True, exist_ok=True)
        done = Emitted()
        for name, text in files.items():
            out = target / name
            if out.is_symlink():
                out.unlink()  # write a file of our own, never through a link
            out.write_text(text, encoding="utf-8")
            if name in executable:
                os.chmod(out, 0o755)
            done.written.append(str(out))
        for name, digest in sorted(old.items()):
            stale = target / name
            if name not in files and _digest(stale) == digest:
                stale.unlink()
                done.removed.append(str(stale))
        manifest = {"written_by": "kbsolve --emit; the next --emit here removes these "
                                  "files when it does not write them again",
                    "files": {name: _digest(target / name) for name in sorted(files)}}
        (target / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise KbError(Diagnostic(f"--emit {_short(directory)}: "
                                 f"{error.strerror or error}")) from None
    return done


def _manifest(target: Path) -> dict[str, str]:
    """name -> SHA-256 of the files the last emit wrote (empty when none)."""
    try:
        data = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        files = data.get("files", {}) if isinstance(data, dict) else {}
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    except (OSError, ValueError):
        return {}


def _foreign(target: Path, ours: dict[str, str]) -> list[str]:
    """The folder's entries kbsolve did not write, or that changed since, sorted."""
    try:
        entries = sorted(target.iterdir()) if target.is_dir() else []
    except OSError as error:
        raise KbError(Diagnostic(f"--emit {_short(str(target))}: "
                                 f"{error.strerror or error}")) from None
    return [str(entry) for entry in entries if entry.name != MANIFEST and
            (entry.is_symlink() or _digest(entry) != ours.get(entry.name, ""))]


def _digest(path: Path) -> str | None:
    import hashlib  # only when a folder is checked: a plan loads no OpenSSL
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def _short(text: str, limit: int = 120) -> str:
    """A path as one readable line: a very long one keeps its two ends."""
    return text if len(text) <= limit else f"{text[:60]}...{text[-40:]}"
