"""The project's reference data: the frameworks' example configs, fact sheets, seeds
and measurements in `../shared` next to the package (or $KBSOLVE_SHARED_DIR, the
variable `kbsolve kb check --deep` reads too).

A fresh clone has no such folder; every test that reads it goes through this
module and is skipped there with one reason, `REASON`, instead of failing.

    from shared_data import needs_shared, shared_dir, shared_root

    @needs_shared                       # the test reads it indirectly (kb check --deep)
    def test_x(): ...

    def test_y():
        examples = shared_dir("examples")   # skips when absent
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_ENV = "KBSOLVE_SHARED_DIR"
REASON = f"needs ../shared (the project's reference data); set {SHARED_ENV}"
DEFAULT = Path(__file__).resolve().parents[2] / "shared"


def shared_root() -> Path | None:
    """The shared folder, or None where it is absent (no skip: for module level)."""
    configured = os.environ.get(SHARED_ENV)
    folder = Path(configured) if configured else DEFAULT
    return folder if folder.is_dir() else None


def shared_path(*parts: str) -> Path | None:
    """A path inside the shared folder, or None where it (or the folder) is absent."""
    root = shared_root()
    if root is None:
        return None
    path = root.joinpath(*parts)
    return path if path.exists() else None


def shared_dir(*parts: str) -> Path:
    """A path inside the shared folder; the calling test is skipped where it is absent."""
    root = shared_root()
    if root is None:
        pytest.skip(REASON)
    path = root.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{REASON} ({path} is missing)")
    return path


needs_shared = pytest.mark.skipif(shared_root() is None, reason=REASON)
