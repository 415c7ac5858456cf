"""Run a click command so that no traceback ever reaches the user."""

from __future__ import annotations

import sys

import click

from kbsolve.api import EXIT_USAGE, Diagnostic, KbError, deep_recursion


def fail(error: KbError) -> int:
    click.echo(error.render(), err=True)
    return error.exit_code


def guarded(command: click.Command, argv: list[str]) -> int:
    try:
        with deep_recursion():  # long rule chains compile and evaluate recursively
            result = command.main(args=argv, prog_name="kbsolve", standalone_mode=False)
    except KbError as error:
        return fail(error)
    except click.exceptions.Abort:
        click.echo("kbsolve: aborted", err=True)
        return EXIT_USAGE
    except click.ClickException as error:
        error.show()
        return EXIT_USAGE if error.exit_code != 0 else 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except KeyboardInterrupt:
        click.echo("kbsolve: interrupted", err=True)
        return 130
    except RecursionError:
        click.echo("kbsolve: error: input nests too deeply", err=True)
        return EXIT_USAGE
    except OSError as error:  # a user's path the system refuses (too long, no access, ...)
        return fail(KbError(Diagnostic(os_error_line(error))))
    except MemoryError:
        click.echo("kbsolve: error: out of memory reading the input", err=True)
        return EXIT_USAGE
    except Exception as error:  # a bug: say so in one line, never a traceback
        click.echo(f"kbsolve: internal error: {type(error).__name__}: {error} "
                   f"(please report it; KBSOLVE_DEBUG=1 shows the traceback)", err=True)
        if _debug():
            raise
        return 70
    return result if isinstance(result, int) else 0


def os_error_line(error: OSError) -> str:
    """An OSError as one line: the path (a very long one by its two ends) and why."""
    name = str(error.filename) if error.filename is not None else ""
    if len(name) > 120:
        name = f"{name[:60]}...{name[-40:]}"
    why = error.strerror or str(error)
    return f"{name}: {why}" if name else why


def _debug() -> bool:
    import os
    return os.environ.get("KBSOLVE_DEBUG") == "1"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(1)
