"""The kbsolve command the bench runs: this interpreter's, never one found on PATH."""

from __future__ import annotations

import sys

KBSOLVE = [sys.executable, "-m", "kbsolve"]
