"""Solver figures: cold CLI, warm solves over a grid of queries, Z3 against
the reference enumerator (agreement on small spaces; speed on the full space,
extrapolated from a timed sample)."""

from __future__ import annotations

import itertools
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

GRID_GPUS = ["1x4090", "2x4090", "1xA100", "8xA100", "1xH100", "8xH100", "4xL40S", "8xH20",
             "1xT4", "8xV100-32G"]
GRID_MODELS = ["qwen3-8b", "llama3-8b", "llama3-70b", "qwen2.5-7b"]
GRID_SEQ = [1024, 2048, 4096, 8192, 16384]


def _median_ms(values) -> float:
    return round(statistics.median(values) * 1000, 1)


def cold_cli(runs: int = 10) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "KBSOLVE_CACHE_DIR": cache}
        subprocess.run(["kbsolve", "kb", "check"], env=env, check=True, capture_output=True)

        def timed(cmd):
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                subprocess.run(cmd, env=env, capture_output=True)
                times.append(time.perf_counter() - start)
            return _median_ms(times)
        return {
            "cold_cli_llm_ms": timed(["kbsolve", "--gpus", "8xA100", "--model", "qwen3-8b",
                                      "--top", "0"]),
            "cold_cli_floor_import_ms": timed([sys.executable, "-c",
                                               "import z3, lark, pydantic"]),
        }


def warm(queries: int = 200) -> dict:
    from kbsolve import api
    from kbsolve.solver.optimize import solve
    from kbsolve.solver.query import Query, resolve
    kb = api.load_kb()
    grid = list(itertools.product(GRID_GPUS, GRID_MODELS, GRID_SEQ))
    random.Random(0).shuffle(grid)
    solve_times, plan_times = [], []
    for gpus, model, seq in (grid * 2)[:queries]:
        query = Query(gpus=gpus, model=model, seq_len=seq, top=0)
        start = time.perf_counter()
        solve(resolve(kb, query).problem)
        solve_times.append(time.perf_counter() - start)
    for gpus, model, seq in grid[:20]:
        start = time.perf_counter()
        api.solve(Query(gpus=gpus, model=model, seq_len=seq, top=0), kb)
        plan_times.append(time.perf_counter() - start)
    q = statistics.quantiles(solve_times, n=20)
    return {"warm_solve_queries": len(solve_times), "warm_solve_median_ms": _median_ms(solve_times),
            "warm_solve_p95_ms": round(q[18] * 1000, 1),
            "warm_plan_with_explanations_median_ms": _median_ms(plan_times)}


def versus_enumerator(cases: int = 40, sample: int = 3000) -> dict:
    from kbsolve import api
    from kbsolve.solver.enumerate import enumerate_best
    from kbsolve.solver.metrics import measure, sort_key
    from kbsolve.solver.optimize import solve
    from kbsolve.solver.query import Query, resolve
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_solver_core import small_random_problem  # the same problems as the tests
    kb = api.load_kb()
    agree, z3_time, brute_time = 0, 0.0, 0.0
    for seed in range(cases):
        problem = small_random_problem(kb, seed, 4)
        start = time.perf_counter()
        a = solve(problem)
        z3_time += time.perf_counter() - start
        start = time.perf_counter()
        b = enumerate_best(problem)
        brute_time += time.perf_counter() - start
        same = (a.status == "infeasible") == (b.status == "infeasible") and (
            b.status == "infeasible" or sort_key(a.metrics) == sort_key(b.metrics))
        agree += same
    problem = resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem
    space = math.prod(len(v) for v in problem.choices.values())
    rng = random.Random(1)
    keys = sorted(problem.choices)
    start = time.perf_counter()
    for _ in range(sample):
        chosen = {k: rng.choice(problem.choices[k]) for k in keys}
        measure(problem, {**problem.fixed, **chosen})
    per_assignment = (time.perf_counter() - start) / sample
    start = time.perf_counter()
    solve(problem)
    full_z3 = time.perf_counter() - start
    return {"small_space_cases": cases, "agreement_pct": round(100 * agree / cases, 1),
            "small_space_z3_ms_total": round(z3_time * 1000), "small_space_enumerator_ms_total":
            round(brute_time * 1000),
            "full_space_size": space, "enumerator_us_per_assignment": round(per_assignment * 1e6, 1),
            "full_space_enumerator_s_extrapolated": round(space * per_assignment),
            "full_space_z3_s": round(full_z3, 3),
            "full_space_speedup_x": round(space * per_assignment / full_z3)}


if __name__ == "__main__":
    print(cold_cli(), warm(), versus_enumerator())
