"""The same query in fresh processes, each with its own PYTHONHASHSEED: the JSON
plans must be byte-identical. Two processes run at a time (the machine has two
cores). The KB's files are fingerprinted before and after, so that a KB edited
during the run is not mistaken for non-determinism."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time

from bench.command import KBSOLVE

QUERY = KBSOLVE + ["--gpus", "8xA100", "--model", "qwen3-8b", "--top", "1",
                   "--format", "json"]


def kb_fingerprint() -> str:
    from kbsolve.dsl.load import shipped_root
    h = hashlib.sha256()
    for path in sorted(p for p in shipped_root().rglob("*") if p.is_file()):
        h.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _start(seed: int, cache: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "KBSOLVE_CACHE_DIR": cache}
    return subprocess.Popen(QUERY, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def measure(runs: int = 20, budget_s: float = 50.0, parallel: int = 2) -> dict:
    digests, codes, done = set(), set(), 0
    before = kb_fingerprint()
    with tempfile.TemporaryDirectory() as cache:
        subprocess.run(KBSOLVE + ["kb", "check"], capture_output=True,
                       env={**os.environ, "KBSOLVE_CACHE_DIR": cache})  # fill the cache
        stop, took = time.perf_counter() + budget_s, 0.0
        while done < runs and (done == 0 or time.perf_counter() + took <= stop):
            start = time.perf_counter()
            batch = [_start(done + i, cache) for i in range(min(parallel, runs - done))]
            for proc in batch:
                out, _ = proc.communicate()
                digests.add(hashlib.sha256(out).hexdigest())
                codes.add(proc.returncode)
            done += len(batch)
            took = time.perf_counter() - start
    return {"runs": done, "runs_planned": runs, "distinct_outputs": len(digests),
            "exit_codes": sorted(codes), "kb_changed_during_run": kb_fingerprint() != before,
            "identical": len(digests) == 1 and codes == {0}}


BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"


def under_load(runs: int = 5, burners: int = 2, limit_s: float = 120.0) -> dict:
    """The same query `runs` times while `burners` processes spin beside it:
    the plan must not change with the machine's load (the search's budgets are
    counted in nodes, not seconds)."""
    digests, codes = set(), set()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KBSOLVE_CACHE_DIR": cache}
        subprocess.run(KBSOLVE + ["kb", "check"], capture_output=True, env=env)
        spin = [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=limit_s)])
                for _ in range(burners)]
        try:
            for _ in range(runs):
                done = subprocess.run(QUERY, capture_output=True, env=env, timeout=limit_s)
                digests.add(hashlib.sha256(done.stdout).hexdigest())
                codes.add(done.returncode)
        finally:
            for proc in spin:
                proc.kill()
                proc.wait()
    return {"runs": runs, "burners": burners, "distinct_outputs": len(digests),
            "exit_codes": sorted(codes), "identical": len(digests) == 1 and codes == {0}}


if __name__ == "__main__":
    print(measure())
