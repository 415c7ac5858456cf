"""The `kbsolve` command. It parses flags, calls the API, and renders.

Exit codes: 0 ok; 1 infeasible; 2 usage, input or KB error; 3 solver
unknown or time-out.
"""

from __future__ import annotations

import sys

import click

from kbsolve.cli.kbcmd import kb_group
from kbsolve.cli.listing import list_command
from kbsolve.cli.run import guarded

EPILOG = "Exit codes: 0 ok, 1 infeasible, 2 usage or KB error, 3 solver unknown or time-out."


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kbsolve")
def cli() -> None:
    """Plan LLM and diffusion training runs that fit your GPUs and run fast."""


cli.add_command(kb_group)
cli.add_command(list_command)


def main(argv: list[str] | None = None) -> int:
    return guarded(cli, argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
