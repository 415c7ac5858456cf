"""Cold CLI latency: fresh `kbsolve` processes (KB from the disk cache, the modules'
bytecode compiled and the command's generated code in its cache beside the KB's,
codecache.py: as a user meets them after the first run), beside the bare imports
as a floor; `python -m bench.cold --phases [MODEL ...]` splits a cold plan's CPU by phase;
`python -m bench.cold --instructions [MODEL ...]` counts a cold plan's and the floor's
instructions under callgrind (valgrind), a figure the machine's load does not move (about a
minute a command: opt-in, not part of `python -m bench`).

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


# A cold plan's CPU by phase, in a fresh process: the command's own code path (the argv a user
# types), with time.process_time() read where each phase ends. Phases the code no longer has
# are left out; "other" is what is left between them (flags, building the plan's sections and
# result models), "teardown" what the parent sees after the child's last reading.
PHASES = """
import time
marks = [("interpreter", time.process_time())]
from kbsolve.cli import start
start()
import json, sys
def mark(name):
    marks.append((name, time.process_time()))
from kbsolve.cli import main as cli
mark("import_cli")
import kbsolve.program.query, kbsolve.plan.run, kbsolve.render.plan_table
mark("import_plan")
from kbsolve import api
from kbsolve.plan import run
def timed(module, name, phase):
    inner = getattr(module, name, None)
    if inner is None:
        return
    def wrapper(*args, **kwargs):
        mark("other")
        value = inner(*args, **kwargs)
        mark(phase)
        return value
    setattr(module, name, wrapper)
timed(api, "load_kb", "kb_load")
timed(api, "_scoped", "kb_view")
for name, phase in (("resolve", "resolve"), ("solve", "search"), ("explain", "explain"),
                    ("_alternatives", "alternatives")):
    timed(run, name, phase)
timed(cli, "render", "render")
code = cli.main(sys.argv[1:])
mark("other")
sys.stdout.flush()
print(json.dumps(marks), file=sys.stderr)
cli.exit_now(code)
"""


def phases(model: str, runs: int = 5, gpus: str = "8xA100") -> dict:
    """Median CPU ms of each phase of `kbsolve --gpus GPUS --model MODEL` over `runs`
    fresh processes (KB cache and bytecode warm, as measure() has them)."""
    import json
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KBSOLVE_CACHE_DIR": cache,
               "PYTHONPYCACHEPREFIX": os.path.join(cache, "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmd = [sys.executable, "-c", PHASES, "--gpus", gpus, "--model", model]
        subprocess.run(cmd, env=env, capture_output=True)  # fills the caches
        found: dict[str, list[float]] = {}
        for _ in range(runs):
            cpu = _children_cpu()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            total = (_children_cpu() - cpu) * 1000
            marks = json.loads(done.stderr.strip().splitlines()[-1])
            spent: dict[str, float] = {}
            last = 0.0
            for name, at in marks:
                spent[name] = spent.get(name, 0.0) + (at - last) * 1000
                last = at
            spent["teardown"] = total - last * 1000
            spent["total"] = total
            for name, ms in spent.items():
                found.setdefault(name, []).append(ms)
        return {name: round(statistics.median(ms), 1) for name, ms in found.items()}


def instructions(models: list[str], gpus: str = "8xA100") -> dict:
    """Instructions (callgrind's Ir) of one cold `kbsolve --gpus GPUS --model MODEL` per
    model and of the floor, each after two runs that fill the caches, and each plan's ratio
    to the floor; {} when valgrind is not installed. Interleaved CPU medians on a loaded
    2-core machine moved by +-6 % between identical trees; these counts do not follow the
    load (the same tree counted twice, other cache folders: 2.2065 and 2.2015 G for wan14b)."""
    import re
    import shutil
    if shutil.which("valgrind") is None:
        return {}
    found: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KBSOLVE_CACHE_DIR": cache,
               "PYTHONPYCACHEPREFIX": os.path.join(cache, "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        commands = {model: KBSOLVE + ["--gpus", gpus, "--model", model] for model in models}
        commands["import_floor"] = FLOOR
        for name, cmd in commands.items():
            for _ in range(2):
                subprocess.run(cmd, env=env, capture_output=True)
            done = subprocess.run(["valgrind", "--tool=callgrind",
                                   f"--callgrind-out-file={os.path.join(cache, 'cg.out')}",
                                   *cmd], env=env, capture_output=True, text=True)
            counted = re.search(r"Collected : (\d+)", done.stderr)
            found[name] = int(counted.group(1)) if counted else float("nan")
    floor = found.pop("import_floor")
    report = {name: {"instructions": n, "x_floor": round(n / floor, 2)}
              for name, n in found.items()}
    return {**report, "import_floor": {"instructions": floor}}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--instructions"]:
        print(instructions(sys.argv[2:] or ["wan14b"]))
    elif sys.argv[1:2] == ["--phases"]:
        for model in sys.argv[2:] or ["wan14b", "qwen3-8b"]:
            print(model, phases(model))
    else:
        print(measure())
