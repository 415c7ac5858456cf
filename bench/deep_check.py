"""`kbsolve kb check` and `kb check --deep` on the shipped KB, in fresh processes."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from bench.command import KBSOLVE


def _run(argv: list[str], env: dict) -> dict:
    start = time.perf_counter()
    done = subprocess.run(KBSOLVE + list(argv), env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [""])[-1]
    return {"ms": round(seconds * 1000, 1), "exit_code": done.returncode, "last_line": last[:160]}


def measure() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KBSOLVE_CACHE_DIR": cache}
        return {"check": _run(["kb", "check"], env), "deep": _run(["kb", "check", "--deep"], env)}


if __name__ == "__main__":
    print(measure())
