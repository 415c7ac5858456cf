"""Read one project file as text or YAML/JSON data; every problem becomes a note."""

from __future__ import annotations

import json
from typing import Any

from kbsolve.audit.walk import MAX_FILE_BYTES, Entry
from kbsolve.catalog.yamlpos import load_yaml, read_text
from kbsolve.diagnostics import KbError, Span


class Unreadable(Exception):
    """A file that cannot be used; the message says where and why."""


def text_of(entry: Entry) -> str:
    if entry.size > MAX_FILE_BYTES:
        raise Unreadable(f"{entry.rel}: skipped, larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return read_text(entry.path, file=entry.rel, max_bytes=MAX_FILE_BYTES)
    except KbError as error:
        raise Unreadable(_first(error)) from None


def data_of(entry: Entry, text: str | None = None) -> tuple[Any, dict[tuple, Span]]:
    """YAML (safe loader, node budget) or JSON data with key positions."""
    text = text_of(entry) if text is None else text
    if entry.rel.endswith(".json"):
        try:
            return json.loads(text), {}
        except json.JSONDecodeError as error:
            raise Unreadable(f"{entry.rel}:{error.lineno}:{error.colno}: invalid JSON: "
                             f"{error.msg}") from None
        except RecursionError:
            raise Unreadable(f"{entry.rel}: JSON nested too deeply") from None
    try:
        return load_yaml(text, file=entry.rel)
    except KbError as error:
        raise Unreadable(_first(error)) from None


def _first(error: KbError) -> str:
    return error.diagnostics[0].headline() if error.diagnostics else str(error)


def flatten(data: Any, positions: dict[tuple, Span]) -> tuple[dict[str, Any], dict[str, Span]]:
    """Nested mappings to dotted keys; lists and scalars are leaves."""
    values: dict[str, Any] = {}
    spans: dict[str, Span] = {}

    def visit(node: Any, path: tuple) -> None:
        if isinstance(node, dict) and node:
            for key, child in node.items():
                visit(child, path + (key,))
        elif path:
            dotted = ".".join(str(p) for p in path)
            values[dotted] = node
            if path in positions:
                spans[dotted] = positions[path]
    visit(data, ())
    return values, spans
