"""Cold CLI latency: fresh `kbsolve` processes (KB from the disk cache and the modules'
bytecode compiled, as a user meets them after the first run), beside the bare imports
as a floor.

The bytecode goes to a cache of the bench's own (PYTHONPYCACHEPREFIX, in the temporary
folder): with PYTHONDONTWRITEBYTECODE set, as in some shells and CI, and a source tree
never byte-compiled, every run would compile kbsolve's ~60 modules again (about 120 ms
of CPU), which no user's second run does (pip byte-compiles an install; an editable
one writes __pycache__ on its first run)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile

from bench.budget import within
from bench.command import KBSOLVE

DIFFUSION = KBSOLVE + ["--gpus", "8xA100", "--model", "wan14b"]
LLM = KBSOLVE + ["--gpus", "8xA100", "--model", "qwen3-8b"]
FLOOR = [sys.executable, "-c", "import z3, lark, pydantic"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_runs(cmd: list[str], runs: int, env: dict, budget_s: float) -> dict:
    """Median wall and CPU time of up to `runs` fresh processes, and their exit codes."""
    cpus, codes = [], set()

    def once(_):
        cpu = _children_cpu()
        codes.add(subprocess.run(cmd, env=env, capture_output=True).returncode)
        cpus.append(_children_cpu() - cpu)
    walls = within(list(range(runs)), budget_s, once)
    return {"runs": len(walls), "median_ms": round(statistics.median(walls) * 1000, 1),
            "cpu_median_ms": round(statistics.median(cpus) * 1000, 1),
            "exit_codes": sorted(codes)}


def measure(runs: int = 10, budget_s: float = 20.0) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KBSOLVE_CACHE_DIR": cache,
               "PYTHONPYCACHEPREFIX": os.path.join(cache, "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        # fill them: `kb check` checks without the KB cache (use_cache=False), a listing
        # reads it; one run of each command compiles the modules it imports
        for cmd in (KBSOLVE + ["list", "gpus"], DIFFUSION, LLM, FLOOR):
            subprocess.run(cmd, env=env, capture_output=True)
        return {"diffusion": timed_runs(DIFFUSION, runs, env, budget_s),
                "llm": timed_runs(LLM, runs, env, budget_s),
                "import_floor": timed_runs(FLOOR, runs, env, budget_s)}


if __name__ == "__main__":
    print(measure())
