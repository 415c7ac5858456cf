"""The agent skill (`kbsolve skill`): its facts read from the KB (the frameworks,
their detection signatures, the tools), rendered to SKILL.md by
render/skill_markdown.py, and written only over a SKILL.md this command wrote."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from kbsolve.api import Diagnostic, KbError

FILE = "SKILL.md"
MARK = "<!-- written by `kbsolve skill`"  # how a SKILL.md of ours is recognised
SIGN_KINDS = ("import", "cli", "yaml_key", "dependency", "path", "remote")


def facts(kb) -> dict[str, Any]:
    from kbsolve.mcp_server.tools import TOOLS
    detectors = {d.framework: d for d in kb.detectors.values()}
    frameworks = []
    for name, framework in sorted(kb.frameworks.items()):
        detector = detectors.get(name)
        frameworks.append({
            "name": name, "doc": framework.meta.doc, "models": list(framework.models),
            "version": framework.version,
            "signs": _signs(detector) if detector else {},
            "source": detector.meta.source if detector else ""})
    return {"name": "kbsolve", "mark": MARK, "frameworks": frameworks,
            "tools": [{"name": t.name, "description": t.description}
                      for t in TOOLS.values()]}


def _signs(detector) -> dict[str, list[str]]:
    keys = [key if value is None else f"{key}: {value}" for key, value in detector.yaml_keys]
    found = {"import": detector.imports, "cli": detector.clis, "yaml_key": keys,
             "dependency": detector.dependencies, "path": detector.paths,
             "remote": detector.remotes}
    return {kind: list(found[kind]) for kind in SIGN_KINDS if found[kind]}


def write(text: str, directory: str) -> list[str]:
    """DIR/SKILL.md; refuses to replace a file this command did not write."""
    if MARK not in text:  # pragma: no cover - the renderer always marks it
        raise KbError(Diagnostic("skill: the text lacks its mark; nothing written"))
    folder = Path(directory)
    target = folder / FILE
    if folder.exists() and not folder.is_dir():
        raise KbError(Diagnostic(f"--emit {directory}: is not a directory"))
    if target.is_symlink() or (target.exists() and MARK not in _read(target)):
        raise KbError(Diagnostic(f"--emit {directory}: {target} exists and was not written by "
                                 f"`kbsolve skill`; nothing written (move it, or choose "
                                 f"another directory)"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".SKILL.", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except OSError as error:
        raise KbError(Diagnostic(f"--emit {directory}: cannot write {FILE}: "
                                 f"{error.strerror or error}")) from None
    return [str(target)]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
