"""`python -m kbsolve`: the kbsolve command."""

import sys

from kbsolve.cli.main import main

sys.exit(main())
