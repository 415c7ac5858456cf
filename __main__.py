"""`python -m kbsolve`: the kbsolve command."""

import sys

from kbsolve.cli import start

start()  # before the command's imports

from kbsolve.cli.main import main  # noqa: E402

sys.exit(main())
