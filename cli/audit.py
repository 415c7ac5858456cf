"""`kbsolve audit PATH` and `kbsolve fix CONFIG --symptom ...`: render what api returns."""

from __future__ import annotations

import click

from kbsolve.cli.kbcmd import kb_option

AUDIT_FORMATS = ("markdown", "json", "terminal")


@click.command("audit")
@click.argument("path", type=click.Path())
@click.option("--gpus", "-g", default=None,
              help="COUNTxGPU, e.g. 8xA100; else from the config, else nvidia-smi.")
@click.option("--format", "fmt", type=click.Choice(AUDIT_FORMATS), default="markdown",
              show_default=True)
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@click.option("--plan", "with_plan", is_flag=True,
              help="Add the solver's best plan per config (a few seconds each).")
@click.option("--fix", "apply", is_flag=True,
              help="Write the recommended changes into each config (keeps a .bak).")
@kb_option
def audit_command(path, gpus, fmt, lang, with_plan, apply, packs) -> int:
    """Audit a training project: checklist scores, errors, silent failures, fit."""
    from kbsolve import api
    from kbsolve.audit.report_json import as_json
    from kbsolve.audit.report_markdown import markdown
    from kbsolve.audit.report_terminal import terminal
    report, written = api.audit(path, gpus, packs=list(packs), fix=apply, plan=with_plan)
    render = {"markdown": lambda: markdown(report, lang), "json": lambda: as_json(report),
              "terminal": lambda: terminal(report, lang)}[fmt]
    click.echo(render(), nl=False)
    for config, keys in written.items():
        click.echo(f"wrote {config} ({', '.join(keys)}); the original is {config}.bak", err=True)
    return 0


@click.command("fix")
@click.argument("config", type=click.Path())
@click.option("--symptom", type=click.Choice(["oom", "slow", "unstable"]), required=True)
@click.option("--gpus", "-g", default=None, help="COUNTxGPU, e.g. 8xA100.")
@click.option("--write", is_flag=True, help="Write the first suggestion (keeps a .bak).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@kb_option
def fix_command(config, symptom, gpus, write, fmt, packs) -> int:
    """Changes that cure OOM, slowness or instability, each with its reason."""
    from kbsolve import api
    result = api.fix(config, symptom, gpus, packs=list(packs), write=write)
    if fmt == "json":
        click.echo(result.model_dump_json(indent=2))
        return 0 if result.suggestions else 1
    before = result.before
    click.echo(f"{result.config} [{result.framework}]: {before.device_gib} GiB of "
               f"{before.budget_gib} GiB per GPU ({before.status})")
    if not result.suggestions:
        click.echo(f"no change found for --symptom {symptom}")
        return 1
    for i, s in enumerate(result.suggestions, 1):
        settings = ", ".join(f"{k}: {v}" for k, v in s.changes.items())
        click.echo(f"{i}. {settings}  -> {s.device_gib} GiB, speed {s.speed_delta_pct:+}%")
        for reason in s.reasons:
            click.echo(f"   {reason}")
    if result.written:
        after = result.after
        click.echo(f"wrote {result.config} ({', '.join(result.written)}); the original is "
                   f"{result.config}.bak; now {after.status}: {after.device_gib} GiB")
    return 0
