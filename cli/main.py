"""The `kbsolve` command. It parses flags, calls the API, and renders.

Exit codes: 0 ok; 1 infeasible; 2 usage, input or KB error; 3 solver unknown
or time-out (the best plan found so far is still printed).
"""

from __future__ import annotations

import importlib
import sys

import click

from kbsolve import api
from kbsolve.api import EXIT_INFEASIBLE, EXIT_OK
from kbsolve.cli import start
from kbsolve.cli.plain import OBJECTIVES, plan_command
from kbsolve.cli.query_options import query_fields, query_options
from kbsolve.cli.run import exit_now, guarded
from kbsolve.render import render

EPILOG = ("Exit codes: 0 ok, 1 infeasible, 2 usage or KB error, 3 solver unknown or "
          "time-out.")

# The other commands, each imported when named (or listed by --help): a plan reads none of
# them, and their modules' click options cost ~2-4 ms of every cold plan (issue 25)
COMMANDS = {"kb": ("kbsolve.cli.kbcmd", "kb_group"),
            "list": ("kbsolve.cli.listing", "list_command"),
            "audit": ("kbsolve.cli.audit", "audit_command"),
            "fix": ("kbsolve.cli.audit", "fix_command"),
            "mcp": ("kbsolve.cli.agents", "mcp_command"),
            "skill": ("kbsolve.cli.agents", "skill_command")}


class Commands(click.Group):
    """A group whose COMMANDS are imported on first use."""

    def list_commands(self, ctx) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx, name: str):
        if name not in self.commands and name in COMMANDS:
            module, attribute = COMMANDS[name]
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return self.commands.get(name)


@click.group(cls=Commands, epilog=EPILOG, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@query_options
@click.option("--objective", type=click.Choice(OBJECTIVES), default="speed",
              show_default=True, help="Fastest plan, or the smallest that fits.")
@click.option("--top", type=click.IntRange(0, 10), default=2, show_default=True,
              help="Alternatives to show.")
@click.option("--timeout", type=click.FloatRange(min=0.01), default=None,
              help="A wall-clock guard, seconds (default none: the counted search budgets "
                   "bound the work); past it the best plan so far, status timed_out, exit 3.")
@click.option("--solver", type=click.Choice(["z3", "enumerate"]), default="z3",
              help="enumerate: the brute-force reference, for small spaces.")
@click.option("--allow", "allow", multiple=True, metavar="NAME[,NAME]",
              help="Let the plan change numerics, recipe or libraries: an optin's name "
                   "or a group (numerics, recipe, library; `kbsolve list optins`).")
@click.option("--explain", "explain_option", default=None, metavar="OPTION",
              help="Print the full derivation of one option.")
@click.option("--emit", "emit_dir", type=click.Path(file_okay=False), default=None,
              help="Write the framework's files (config, DeepSpeed/accelerate, run.sh) into "
                   "this folder; it must be empty or hold only an earlier --emit's files.")
@click.option("--force", is_flag=True, default=False,
              help="With --emit: write into a folder holding other files (same-named ones "
                   "are overwritten).")
@click.version_option(package_name="kbsolve")
@click.pass_context
def cli(ctx, gpus, model, framework, task, network, seq_len, resolution, frames,
        global_batch, pins, headroom, host_ram, fmt, packs, objective, top, timeout, solver,
        allow, explain_option, emit_dir, force, gpu_spec=None):
    """Plan LLM and diffusion training runs that fit your GPUs and run fast.

    kbsolve --gpus 8xA100 --model wan14b
    """
    if ctx.invoked_subcommand is not None:
        return None
    if not gpus and not model:
        click.echo(ctx.get_help())
        return EXIT_OK
    return plan_command(gpus, model, framework, task, network, seq_len, resolution, frames,
                        global_batch, pins, headroom, host_ram, fmt, packs, objective, top,
                        timeout, solver, allow, explain_option, emit_dir, force, gpu_spec)


@cli.command("estimate")
@query_options
def estimate_command(gpus, model, framework, task, network, seq_len, resolution, frames,
                     global_batch, pins, headroom, host_ram, fmt, packs, gpu_spec=None):
    """Memory and speed of one configuration (unset options at their defaults)."""
    fields = query_fields(gpus, model, framework, task, network, seq_len, resolution, frames,
                          (), headroom, host_ram, global_batch, gpu_spec)
    settings = {}
    for text in pins:
        key, sep, value = text.partition("=")
        if not sep:
            raise api.KbError(api.Diagnostic(f"--set '{text}' is not key=value"))
        settings[key.strip()] = value.strip()
    result = api.estimate(fields, settings, packs=list(packs))
    click.echo(render(result, fmt))
    return EXIT_OK if result.feasible else EXIT_INFEASIBLE


def main(argv: list[str] | None = None) -> int:
    """The command; `argv` None: the program itself (`kbsolve`, `python -m kbsolve`),
    which owns its process (cli/__init__.py start) and ends it here."""
    if argv is None:
        start()  # again for the `kbsolve` script, which imported this module first
    code = guarded(cli, argv if argv is not None else sys.argv[1:])
    if argv is None:
        exit_now(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
