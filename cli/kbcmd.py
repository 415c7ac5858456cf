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


@kb_group.command("test")
@kb_option
@click.option("-k", "select", default=None, help="Only tests whose name contains this.")
@click.option("--coverage", is_flag=True, help="List the rules and warnings no test names.")
def test_command(packs: tuple[str, ...], select: str | None, coverage: bool) -> int:
    """Run the KB's own tests; exit 1 when one fails."""
    results = api.run_kb_tests(list(packs), select)
    for result in results:
        click.echo(f"{'PASS' if result.passed else 'FAIL'}  {result.name}")
        for failure in result.failures:
            click.echo(f"      {failure}  ({result.test.meta.span})")
    failed = sum(not r.passed for r in results)
    click.echo(f"{len(results) - failed} passed, {failed} failed")
    if coverage:
        missing = api.test_coverage(list(packs))
        for what, names in missing.items():
            total = missing_total = len(names)
            click.echo(f"untested {what}: {missing_total}" + ("" if not names else
                                                            " — " + ", ".join(names)))
            del total
    return 1 if failed else EXIT_OK
