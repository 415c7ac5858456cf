"""Repeat a measurement up to a count or until a time budget is spent (at least
once), so that the whole bench stays within its five minutes whatever the
solver's speed today; every section reports how many runs it managed."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def within(items: list[T], budget_s: float, fn: Callable[[T], object]) -> list[float]:
    """Seconds per item for as many items as fit in `budget_s` (at least one)."""
    times: list[float] = []
    stop = time.perf_counter() + budget_s
    for item in items:
        if times and time.perf_counter() + sum(times) / len(times) > stop:
            break  # the next run would likely overshoot
        start = time.perf_counter()
        fn(item)
        times.append(time.perf_counter() - start)
    return times
