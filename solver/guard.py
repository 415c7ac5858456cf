"""The `--timeout` guard: the only wall clock the solver reads.

The search and Z3 are bounded by counted budgets (nodes, rlimit), so an answer
never depends on the machine's load. A user may add a wall-clock guard
(`--timeout S`); without one (None, the default) nothing here ever expires.
Tests replace `clock` with a counter to expire it deterministically.
"""

from __future__ import annotations

import math
import time

clock = time.monotonic


def deadline(seconds: float | None) -> float:
    """The instant a guard of `seconds` expires (inf: never)."""
    return math.inf if seconds is None else clock() + seconds


def expired(at: float) -> bool:
    return at != math.inf and clock() > at


def left_ms(at: float) -> int | None:
    """Milliseconds until `at` (None: no guard)."""
    return None if at == math.inf else int((at - clock()) * 1000)
