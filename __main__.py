"""`python -m kbsolve`: the kbsolve command."""

import sys

from kbsolve.cli import run

sys.exit(run())  # the process settings before the command's imports (cli/__init__.py)
