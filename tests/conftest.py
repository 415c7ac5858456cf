"""Shared fixtures: every test gets its own KB cache directory."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_kb_cache(tmp_path_factory, monkeypatch):
    """Point KBSOLVE_CACHE_DIR at a fresh temporary directory for each test.

    Tests must never read or write the user's real cache; `KBSOLVE_PATH` is
    cleared too so that a developer's own packs do not leak into the tests.
    """
    cache = tmp_path_factory.mktemp("kbsolve-cache")
    monkeypatch.setenv("KBSOLVE_CACHE_DIR", str(cache))
    monkeypatch.delenv("KBSOLVE_PATH", raising=False)
    return cache


def pytest_collection_modifyitems(config, items):
    """`slow` tests (long fuzz runs) run only with `-m slow` or KBSOLVE_SLOW=1."""
    import os

    if "slow" in (config.getoption("-m") or "") or os.environ.get("KBSOLVE_SLOW"):
        return
    skip = pytest.mark.skip(reason="long fuzz run; use -m slow or KBSOLVE_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
