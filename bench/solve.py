"""The solver (branch and bound, Z3 when its budget runs out; the dict keys
keep their old z3_ names) against the reference enumerator: agreement on small
spaces, the defaults tie-break included (the same
problems as tests/test_solver_core.py), speed on the full space (the enumerator
extrapolated from a timed sample)."""

from __future__ import annotations

import math
import os
import random
import sys
import time


def versus_enumerator(cases: int = 40, sample: int = 1000, budget_s: float = 30.0) -> dict:
    from kbsolve import api
    from kbsolve.solver.enumerate import enumerate_best
    from kbsolve.program.metrics import measure, sort_key
    from kbsolve.solver.optimize import solve
    from kbsolve.program.query import Query, resolve
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_solver_core import small_random_problem  # the same problems as the tests
    kb = api.load_kb()
    agree, z3_time, brute_time, done = 0, 0.0, 0.0, 0
    stop = time.perf_counter() + budget_s
    for seed in range(cases):
        if done and time.perf_counter() > stop:
            break
        done += 1
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
    full_status = solve(problem).status
    full_z3 = time.perf_counter() - start
    return {"small_space_cases": done, "agreement_pct": round(100 * agree / done, 1),
            "small_space_z3_ms_total": round(z3_time * 1000), "small_space_enumerator_ms_total":
            round(brute_time * 1000), "small_space_speedup_x": round(brute_time / z3_time, 2),
            "full_space_size": space,
            "enumerator_us_per_assignment": round(per_assignment * 1e6, 1),
            "full_space_enumerator_s_extrapolated": round(space * per_assignment),
            "full_space_z3_s": round(full_z3, 3), "full_space_z3_status": full_status,
            "full_space_speedup_x": round(space * per_assignment / full_z3)}


if __name__ == "__main__":
    print(versus_enumerator())
