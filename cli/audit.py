"""`kbsolve audit PATH` and `kbsolve fix CONFIG --symptom ...`: render what api returns."""

from __future__ import annotations

import click

from kbsolve import api
from kbsolve.cli.kbcmd import kb_option
from kbsolve.render import render

AUDIT_FORMATS = ("markdown", "json", "terminal")
def planner_flags(fn):
    """--model, --gpu-spec, --host-ram, as `kbsolve` and `kbsolve estimate` take them."""
    for option in reversed([
            click.option("--model", "-m", default=None,
                         help="Catalog name or alias, a config.json, or a YAML spec; else the "
                              "config's model (the catalog, or a local folder's config.json)."),
            click.option("--gpu-spec", "gpu_spec", type=click.Path(dir_okay=False),
                         default=None, metavar="FILE.yaml",
                         help="A GPU the catalog lacks, as a YAML of the catalog's GPU fields; "
                              "--gpus then gives the count, else the config or launch does."),
            click.option("--host-ram", type=click.FloatRange(min=0, min_open=True),
                         default=None, metavar="GIB",
                         help="CPU RAM per node: offloaded memory is judged against it.")]):
        fn = option(fn)
    return fn


ALLOW_HELP = ("Changes to the recipe, the numerics or the libraries that a change may make: "
              "optins of the KB (fp8, quantization, unsloth, method, ...) or their groups "
              "(numerics, recipe, library). Without it they are not offered.")


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
              help="Write the recommended changes into each config (the original kept as "
                   ".bak, .bak.1, ...).")
@click.option("--allow", "allow", multiple=True, metavar="NAME[,NAME]", help=ALLOW_HELP)
@planner_flags
@kb_option
def audit_command(path, gpus, fmt, lang, with_plan, apply, allow, model, gpu_spec, host_ram,
                  packs) -> int:
    """Audit a training project: checklist scores, errors, silent failures, fit."""
    report, written = api.audit(path, gpus, packs=list(packs), fix=apply, plan=with_plan,
                                allow=list(allow), model=model, gpu_spec=gpu_spec,
                                host_ram=host_ram)
    click.echo(render(report, fmt, lang=lang), nl=False)
    if written:
        click.echo(render(written, "text", kind="written"), err=True)
    return 0


@click.command("fix")
@click.argument("config", type=click.Path())
@click.option("--symptom", type=click.Choice(["oom", "slow", "unstable"]), required=True)
@click.option("--gpus", "-g", default=None, help="COUNTxGPU, e.g. 8xA100.")
@click.option("--write", is_flag=True,
              help="Write the first suggestion (the original kept as .bak, .bak.1, ...).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--allow", "allow", multiple=True, metavar="NAME[,NAME]", help=ALLOW_HELP)
@planner_flags
@kb_option
def fix_command(config, symptom, gpus, write, fmt, allow, model, gpu_spec, host_ram,
                packs) -> int:
    """Changes that cure OOM, slowness or instability, each with its reason."""
    result = api.fix(config, symptom, gpus, packs=list(packs), write=write, allow=list(allow),
                     model=model, gpu_spec=gpu_spec, host_ram=host_ram)
    click.echo(render(result, fmt))
    return 0 if result.suggestions else 1
