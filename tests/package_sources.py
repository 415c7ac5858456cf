"""The package's own Python files, as the tests that read its syntax walk them
(test_roles.py, test_diagnostic_codes.py)."""

from __future__ import annotations

from pathlib import Path

NOT_PACKAGE = ("tests", "build", "dist")  # the tests, and `pip install .`'s build/ copy


def package_sources(root: Path) -> list[tuple[Path, str]]:
    """(path, its path from `root` with '/') of each .py file below `root` that is the
    package's: not the tests, pip's build/ copy, any venv (.venv, the trace bench's
    .venv-trace in the checkout) or anything else under a site-packages."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        top = rel.split("/", 1)[0]
        if top in NOT_PACKAGE or top.startswith(".venv") or "/site-packages/" in rel:
            continue
        found.append((path, rel))
    return found
