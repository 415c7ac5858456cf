"""The model a config trains: the first string value that names a catalog
model (a Hugging Face id, its last part, or that part without trailing tags)."""

from __future__ import annotations

from typing import Any

from kbsolve.diagnostics import KbError


def find_model(kb, values: dict[str, Any]):
    for value in values.values():
        if not isinstance(value, str) or not 3 <= len(value) <= 200:
            continue
        for name in _names(value):
            try:
                return kb.catalog.model(name)
            except KbError:
                continue
    return None


def _names(value: str) -> list[str]:
    base = value.rstrip("/").rsplit("/", 1)[-1]
    names = [value, base]
    parts = base.split("-")
    names += ["-".join(parts[:i]) for i in range(len(parts) - 1, 1, -1)]
    return [n for n in names if len(n) >= 3]
