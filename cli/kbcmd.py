"""`kbsolve kb ...`: commands for rule authors."""

from __future__ import annotations

import click

from kbsolve import api
from kbsolve.api import EXIT_OK, EXIT_USAGE
from kbsolve.render import render

kb_option = click.option("--kb", "packs", multiple=True, type=click.Path(),
                         help="A rule pack directory laid over the shipped KB (repeatable).")


@click.group("kb")
def kb_group() -> None:
    """Check and inspect the knowledge base."""


@kb_group.command("check")
@kb_option
@click.option("--deep", is_flag=True,
              help="Also solve: contradictions, dead values and rules, redundant rules, unused "
                   "lets, unwritten options, broken sources.")
@click.option("--verbose", "-v", is_flag=True, help="With --deep: list what was not analysed.")
@click.option("--framework", "frameworks", multiple=True,
              help="With --deep: solve only this framework's space (repeatable; default "
                   "all), e.g. the one a pack is written for.")
def check_command(packs: tuple[str, ...], deep: bool, verbose: bool,
                  frameworks: tuple[str, ...]) -> int:
    """Parse and check the shipped KB plus rule packs; exit 2 on errors."""
    knowledge = api.load_kb(list(packs), use_cache=False)
    api.check_side_files(knowledge)
    click.echo(render(api.kb_summary(knowledge), "text", kind="kb_summary"))
    if not deep:
        return EXIT_OK
    report = api.deep_check(list(packs), knowledge, list(frameworks) or None)
    click.echo(render(report, "text", kind="deep_check", verbose=verbose))
    return EXIT_USAGE if report.errors else EXIT_OK


@kb_group.command("codes")
def codes_command() -> int:
    """Every diagnostic code, its severity and meaning (a warning's code is what a pack
    names to silence it), as the Markdown table of docs/dsl.md."""
    click.echo(render(api.diagnostic_codes(), "markdown", kind="diagnostic_codes"), nl=False)
    return EXIT_OK


@kb_group.command("test")
@kb_option
@click.option("-k", "select", default=None, help="Only tests whose name contains this.")
@click.option("--coverage", is_flag=True,
              help="Which hard rules, warnings and checklist items have a test; list the rest.")
def test_command(packs: tuple[str, ...], select: str | None, coverage: bool) -> int:
    """Run the KB's own tests; exit 1 when one fails."""
    results = api.run_kb_tests(list(packs), select)
    click.echo(render(results, "text", kind="kb_tests"))
    if coverage:
        rows = api.coverage_report(list(packs))
        if rows:
            click.echo(render(rows, "text", kind="coverage"))
    return 1 if any(not r.passed for r in results) else EXIT_OK


@kb_group.command("fmt")
@kb_option
@click.option("--check", "check_only", is_flag=True,
              help="Change nothing; list the files that are not canonical and exit 1.")
@click.argument("paths", nargs=-1, type=click.Path())
def fmt_command(packs: tuple[str, ...], check_only: bool, paths: tuple[str, ...]) -> int:
    """Lay out rule files canonically (default: the shipped KB and packs).

    A file that does not parse is reported and nothing is written."""
    changed = api.format_rule_files(list(paths), packs=list(packs), write=not check_only)
    click.echo(render(changed, "text", kind="kb_fmt", check_only=check_only))
    return 1 if check_only and changed else EXIT_OK


@kb_group.command("graph")
@kb_option
@click.option("--option", "option_name", default=None, help="An option's neighbourhood.")
@click.option("--rule", "rule_name", default=None, help="A rule, warning, preference or check.")
@click.option("--quantity", "quantity_name", default=None,
              help="A let, memory, speed or work term.")
@click.option("-f", "--framework", default=None, help="Only this framework's items.")
@click.option("--format", "fmt", type=click.Choice(["text", "dot", "mermaid", "json"]),
              default="text", show_default=True)
def graph_command(packs, option_name, rule_name, quantity_name, framework, fmt) -> int:
    """What constrains an option, rule or quantity, and what it touches."""
    chosen = [(w, n) for w, n in (("option", option_name), ("rule", rule_name),
                                  ("quantity", quantity_name)) if n]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --option, --rule, --quantity")
    what, name = chosen[0]
    click.echo(api.kb_graph(what, name, fmt, framework, list(packs)))
    return EXIT_OK
