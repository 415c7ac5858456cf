"""`kbsolve kb ...`: commands for rule authors."""

from __future__ import annotations

import click

from kbsolve import api
from kbsolve.diagnostics import EXIT_OK

kb_option = click.option("--kb", "packs", multiple=True, type=click.Path(),
                         help="A rule pack directory laid over the shipped KB (repeatable).")


@click.group("kb")
def kb_group() -> None:
    """Check and inspect the knowledge base."""


@kb_group.command("check")
@kb_option
def check_command(packs: tuple[str, ...]) -> int:
    """Parse and check the shipped KB plus rule packs; exit 2 on errors."""
    knowledge = api.load_kb(list(packs), use_cache=False)
    summary = api.kb_summary(knowledge)
    click.echo("kb check: ok — " + ", ".join(f"{n} {what}" for what, n in summary.items()))
    return EXIT_OK
