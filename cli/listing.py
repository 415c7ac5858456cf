"""`kbsolve list gpus|models|options|rules|checks|optins`."""

from __future__ import annotations

import click

from kbsolve import api
from kbsolve.cli.kbcmd import kb_option
from kbsolve.render import render

TABLES = ("gpus", "models", "options", "rules", "checks", "optins")


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
    click.echo(render(rows, fmt, kind="listing"))
    return 0

