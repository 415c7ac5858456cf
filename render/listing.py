"""`kbsolve list ...`: catalog entries and KB items as a table or JSON."""

from __future__ import annotations

import json


def as_json(rows: list[dict]) -> str:
    return json.dumps(rows, indent=2, ensure_ascii=False, sort_keys=False)


def table(rows: list[dict]) -> str:
    if not rows:
        return "(none)"
    columns = [c for c in rows[0] if c not in ("doc", "because", "advice_zh", "title_zh")]
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    widths = [min(w, 48) for w in widths]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(v[:w].ljust(w) for v, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)
