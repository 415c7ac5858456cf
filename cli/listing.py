"""`kbsolve list gpus|models|options|rules|checks`."""

from __future__ import annotations

import json

import click

from kbsolve import api
from kbsolve.cli.kbcmd import kb_option

TABLES = ("gpus", "models", "options", "rules", "checks")


@click.command("list")
@click.argument("what", type=click.Choice(TABLES))
@click.option("--framework", "-f", default=None, help="Only this framework's entries.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@kb_option
def list_command(what: str, framework: str | None, fmt: str, packs: tuple[str, ...]) -> int:
    """List catalog entries or KB items."""
    knowledge = api.load_kb(list(packs))
    rows = api.listing(knowledge, what, framework)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False, sort_keys=False))
    else:
        click.echo(_table(rows))
    return 0


def _table(rows: list[dict]) -> str:
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
