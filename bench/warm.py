"""Warm solve latency: one process, the KB loaded once, a shuffled grid of LLM and
diffusion queries solved until the grid or the time budget runs out."""

from __future__ import annotations

import itertools
import random
import statistics

from bench.budget import within

LLM_GPUS = ["1x4090", "2x4090", "1xA100", "8xA100", "1xH100", "8xH100", "4xL40S", "8xH20",
            "1xT4", "8xV100-32G"]
LLM_MODELS = ["qwen3-8b", "llama3-8b", "llama3-70b", "qwen2.5-7b"]
LLM_SEQ = [1024, 2048, 4096, 8192, 16384]
DIFFUSION_GPUS = ["1xA100", "8xA100", "8xH100", "4xL40S"]
DIFFUSION_MODELS = ["wan14b", "flux1-dev", "sd3.5-medium", "qwen-image"]


def grid(size: int = 200) -> list[dict]:
    llm = [{"gpus": g, "model": m, "seq_len": s}
           for g, m, s in itertools.product(LLM_GPUS, LLM_MODELS, LLM_SEQ)]
    diffusion = [{"gpus": g, "model": m}
                 for g, m in itertools.product(DIFFUSION_GPUS, DIFFUSION_MODELS)]
    queries = llm + diffusion
    random.Random(0).shuffle(queries)
    return (queries * (size // len(queries) + 1))[:size]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def measure(size: int = 200, budget_s: float = 45.0, plans: int = 10,
            plan_budget_s: float = 12.0) -> dict:
    from kbsolve import api
    from kbsolve.solver.optimize import solve
    from kbsolve.solver.query import Query, resolve
    from kbsolve.diagnostics import KbError
    kb = api.load_kb()
    statuses: dict[str, int] = {}

    def solve_one(fields):
        try:
            status = solve(resolve(kb, Query(**fields, top=0)).problem).status
        except KbError:  # a query the KB refuses (e.g. no framework for the model)
            status = "refused"
        statuses[status] = statuses.get(status, 0) + 1
    times = within(grid(size), budget_s, solve_one)
    plan_times = within([f for f in grid(size) if "seq_len" in f][:plans], plan_budget_s,
                        lambda fields: api.solve({**fields, "top": 0}, kb))
    result = {"queries_planned": size, "queries_solved": len(times), "statuses": statuses,
              "budget_s": budget_s, "median_ms": _ms(statistics.median(times)),
              "plans_with_explanations": len(plan_times),
              "plan_with_explanations_median_ms": _ms(statistics.median(plan_times))}
    if len(times) >= 2:
        result["p95_ms"] = _ms(statistics.quantiles(times, n=20)[18])
    return result


if __name__ == "__main__":
    print(measure())
