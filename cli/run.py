"""Run the command so that no traceback ever reaches the user. Click is imported only where
it is in use already, or to print what a plain stream cannot take as is (echo): a plain plan
(cli/plain.py) runs without it."""

from __future__ import annotations

import errno
import os
import sys

from kbsolve import api
from kbsolve.api import EXIT_USAGE, Diagnostic, KbError, deep_recursion


def fail(error: KbError) -> int:
    echo(error.render(), err=True)
    return error.exit_code


def echo(text: str, err: bool = False) -> None:
    """click.echo(text, err=err); written directly where click would write these very
    characters to this very stream (click not imported; a UTF-8 stream; no escape sequence
    click strips off a stream that is no terminal; not Windows, whose console click wraps)."""
    stream = sys.stderr if err else sys.stdout
    if "click" in sys.modules or "\x1b" in text or os.name == "nt" or not _utf8(stream):
        import click
        click.echo(text, err=err)
        return
    stream.write(text + "\n")
    stream.flush()


def _utf8(stream) -> bool:
    import codecs
    encoding = getattr(stream, "encoding", None)
    try:
        return encoding is not None and getattr(stream, "errors", None) is not None \
            and codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def guarded(command, argv: list[str]) -> int:
    return guarded_call(lambda: command.main(args=argv, prog_name="kbsolve",
                                             standalone_mode=False))


class Aborted(Exception):
    """An interrupt of a command run without click, as click's main makes one its Abort."""


def guarded_plain(function) -> int:
    """guarded_call for a command run without click, which first does what click's main
    does with an interrupt (a blank line, then Abort) and a closed pipe (exit 1, quietly)."""
    def as_clicks_main():
        try:
            return function()
        except (EOFError, KeyboardInterrupt) as error:
            echo("", err=True)
            raise Aborted() from error
        except OSError as error:
            if error.errno != errno.EPIPE:
                raise
            from click.utils import _PacifyFlushWrapper
            sys.stdout = _PacifyFlushWrapper(sys.stdout)
            sys.stderr = _PacifyFlushWrapper(sys.stderr)
            sys.exit(1)
    return guarded_call(as_clicks_main)


def _aborted() -> int:
    echo("kbsolve: aborted", err=True)
    return EXIT_USAGE


def _click_errors() -> tuple:
    """click's exceptions, where click is in use (none can be raised elsewhere)."""
    click = sys.modules.get("click")
    if click is None:
        return ()
    return click.exceptions.Abort, click.ClickException, click.exceptions.Exit


def guarded_call(function) -> int:
    try:
        with deep_recursion():  # long rule chains compile and evaluate recursively
            result = function()
    except KbError as error:
        return fail(error)
    except Aborted:
        return _aborted()
    except _click_errors() as error:
        return _click_error(error)
    except KeyboardInterrupt:
        echo("kbsolve: interrupted", err=True)
        return 130
    except RecursionError:
        echo("kbsolve: error: input nests too deeply", err=True)
        return EXIT_USAGE
    except OSError as error:  # a user's path the system refuses (too long, no access, ...)
        return fail(KbError(Diagnostic(os_error_line(error))))
    except MemoryError:
        echo("kbsolve: error: out of memory reading the input", err=True)
        return EXIT_USAGE
    except Exception as error:  # a bug: say so in one line, never a traceback
        echo(f"kbsolve: internal error: {type(error).__name__}: {error} "
             f"(please report it; KBSOLVE_DEBUG=1 shows the traceback)", err=True)
        if _debug():
            raise
        return 70
    return result if isinstance(result, int) else 0


def _click_error(error) -> int:
    import click
    if isinstance(error, click.exceptions.Abort):
        return _aborted()
    if isinstance(error, click.exceptions.Exit):
        return error.exit_code
    error.show()
    return EXIT_USAGE if error.exit_code != 0 else 0


def os_error_line(error: OSError) -> str:
    """An OSError as one line: the path (a very long one by its two ends) and why."""
    name = str(error.filename) if error.filename is not None else ""
    if len(name) > 120:
        name = f"{name[:60]}...{name[-40:]}"
    why = error.strerror or str(error)
    return f"{name}: {why}" if name else why


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown (freeing the KB and every
    module one object at a time: issue 25, about a third of a cold plan's CPU) once
    everything written is flushed; a flush that fails (a closed pipe) leaves the
    ordinary exit to report it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    api.save_compiled_code()
    os._exit(code)


def _debug() -> bool:
    return os.environ.get("KBSOLVE_DEBUG") == "1"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(1)
