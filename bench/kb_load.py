"""KB load time: cold (parse and check every file) and cached (a cache hit)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time


def _timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def measure(repeat: int = 3) -> dict:
    from kbsolve.catalog import load_kb
    from kbsolve.dsl.parse import parser

    parser()  # the grammar is built once per process; time it apart
    before = os.environ.get("KBSOLVE_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["KBSOLVE_CACHE_DIR"] = cache
        cold = _timed(lambda: load_kb(use_cache=False), repeat)
        load_kb()
        warm = _timed(lambda: load_kb(), repeat)
        process = _timed(lambda: subprocess.run(
            [sys.executable, "-c", "from kbsolve.catalog import load_kb; load_kb()"],
            check=True, env={**os.environ, "KBSOLVE_CACHE_DIR": cache}), 3)
        floor = _timed(lambda: subprocess.run(
            [sys.executable, "-c", "import z3, lark, pydantic, networkx, yaml, click"],
            check=True), 3)
    if before is None:  # the other sections keep the caller's cache
        os.environ.pop("KBSOLVE_CACHE_DIR", None)
    else:
        os.environ["KBSOLVE_CACHE_DIR"] = before
    return {
        "kb_load_cold_ms": round(statistics.median(cold) * 1000, 1),
        "kb_load_cached_ms": round(statistics.median(warm) * 1000, 1),
        "kb_load_fresh_process_ms": round(statistics.median(process) * 1000, 1),
        "import_floor_fresh_process_ms": round(statistics.median(floor) * 1000, 1),
    }


if __name__ == "__main__":
    print(measure())
