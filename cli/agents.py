"""`kbsolve mcp` (the MCP server on stdio) and `kbsolve skill` (SKILL.md for agents):
the CLI starts the other front end, kbsolve.mcp_server, which reads the api."""

from __future__ import annotations

import click

from kbsolve import mcp_server
from kbsolve.cli.kbcmd import kb_option
from kbsolve.render import render


@click.command("mcp")
@click.option("--tools", "describe", is_flag=True,
              help="Print the tools and their schemas (Markdown) instead of serving.")
@kb_option
def mcp_command(describe: bool, packs: tuple[str, ...]) -> int:
    """Serve kbsolve's tools to coding agents over MCP (stdio); needs kbsolve[mcp]."""
    if describe:
        click.echo(render(mcp_server.mcp_tools(), "markdown", kind="mcp_tools"), nl=False)
        return 0
    mcp_server.serve_mcp(list(packs))
    return 0


@click.command("skill")
@click.option("--emit", "emit_dir", type=click.Path(file_okay=False), default=None,
              help="Write DIR/SKILL.md (never over a file it did not write); else print it.")
@kb_option
def skill_command(emit_dir: str | None, packs: tuple[str, ...]) -> int:
    """A SKILL.md telling coding agents when and how to ask kbsolve, from the KB."""
    text = render(mcp_server.skill_facts(list(packs)), "markdown", kind="skill")
    if emit_dir is None:
        click.echo(text, nl=False)
        return 0
    click.echo(render(mcp_server.write_skill(text, emit_dir), "text", kind="emitted"), err=True)
    return 0
