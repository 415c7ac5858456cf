"""Running `kbsolve` as a child process, hermetically.

Children run the interpreter that runs the tests, on the `kbsolve` it imports
(the checkout, through the editable install), never a `kbsolve` executable
found on PATH: a clean clone's `.venv/bin` is not on PATH, and a PATH that has
one may hold another install. Children run `python -m kbsolve`; `-P` (Python
3.11+) keeps the child's working directory off sys.path, as it is for the
console script.
"""

from __future__ import annotations

import subprocess
import sys

PYTHON = (sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []))
KBSOLVE = (*PYTHON, "-m", "kbsolve")


def kbsolve_argv(*args: str) -> list[str]:
    """The argv of a `kbsolve ARGS...` child process."""
    return [*KBSOLVE, *args]


def run_kbsolve(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """`kbsolve ARGS...` in a child process; output captured as text, 120 s at most."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 120)
    return subprocess.run(kbsolve_argv(*args), **kwargs)


def run_in_process(args: list[str], capsys) -> subprocess.CompletedProcess:
    """`kbsolve ARGS...` in this process (main() catches what the program would, so a
    traceback fails the test as an exception): for tests about what the command
    prints and its exit code, not about a fresh process (hash seeds, cold start, exit)."""
    from kbsolve.cli.main import main
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(kbsolve_argv(*args), code, out, err)
