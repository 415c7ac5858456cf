"""Warm solves: one process, the KB loaded once.

- `plan grid`: 24 fixed LLM and diffusion queries through `api.solve` with
  explanations and alternatives (the default --top), CPU time per plan.
- `pytorch plans`: 3 plain-PyTorch queries (the widest search spaces), CPU each
  (issue 25: "--framework pytorch plans <= 1 s").
- `status grid`: 120 LlamaFactory queries (0.6B-405B, dense and MoE, 1x4090 to
  2x8xH100, sft/dpo/pt/kto/rm) planned with `--top 0` (explained, no
  alternatives); each must end `optimal` or `infeasible` at the default settings.

CPU time (time.process_time) is reported, not wall time: the machine is shared.

    python -m bench.warm            # the figures
    python -m bench.warm --list     # and every query's CPU and status, slowest first
"""

from __future__ import annotations

import itertools
import statistics
import time

PLAN_GRID = [
    {"gpus": g, "model": m} for g, m in [
        ("8xA100", "qwen3-8b"), ("1x4090", "qwen2.5-7b"), ("1x4090", "llama3-70b"),
        ("8xH100", "llama3-70b"), ("1xT4", "qwen3-8b"), ("2x4090", "llama3-8b"),
        ("1xA100", "qwen3-8b"), ("1xH100", "llama3-8b"), ("4xL40S", "qwen2.5-7b"),
        ("8xH20", "llama3-70b"), ("8xV100-32G", "qwen3-8b"), ("2x8xH100", "llama3-70b"),
        ("8xH100", "qwen3-235b-a22b"), ("8xA100", "qwen3-32b"), ("1x4090", "qwen3-0.6b"),
        ("8xA100", "wan14b"), ("1xA100", "wan14b"), ("8xH100", "flux1-dev"),
        ("4xL40S", "flux1-dev"), ("8xA100", "sd3.5-medium"), ("1xA100", "sd3.5-medium"),
        ("8xH100", "qwen-image"), ("4xL40S", "qwen-image"), ("1xH100", "flux1-dev")]]

PYTORCH_GRID = [{"gpus": g, "model": m, "framework": "pytorch"} for g, m in [
    ("8xH100", "qwen2.5-7b"), ("4xH100", "llama3-70b"), ("8xH100", "qwen3-0.6b")]]

STATUS_MODELS = ["qwen3-0.6b", "qwen2.5-1.5b", "llama3-8b", "qwen3-32b", "llama3-70b",
                 "llama3.1-405b", "qwen3-30b-a3b", "mixtral-8x7b"]
STATUS_GPUS = ["1x4090", "2x4090", "1xA100", "8xA100", "8xH100", "2x8xH100"]
STATUS_TASKS = ["sft", "dpo", "pt", "kto", "rm"]


def status_grid(size: int = 120) -> list[dict]:
    combos = list(itertools.product(STATUS_MODELS, STATUS_GPUS, STATUS_TASKS))
    step = max(1, len(combos) // size)
    return [{"gpus": g, "model": m, "task": t} for m, g, t in combos[::step][:size]]


def _cpu(fn) -> tuple[object, float]:
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def measure(plans: int = len(PLAN_GRID), statuses: int = 120, listing: list | None = None) -> dict:
    """The figures; with `listing` (a list), each query's (grid, fields, status, CPU ms)
    is appended to it, for finding what a slow tail is made of."""
    from kbsolve import api
    kb = api.load_kb()
    api.solve({"gpus": "1xA100", "model": "qwen3-8b", "top": 0}, kb)  # imports, first tables
    plan_cpu, plan_status = [], {}
    for fields in PLAN_GRID[:plans]:
        try:
            plan, cpu = _cpu(lambda: api.solve(fields, kb))
            status = plan.status + ("/timed-out" if plan.timed_out else "")
        except api.KbError:
            status, cpu = "refused", 0.0
        plan_status[status] = plan_status.get(status, 0) + 1
        plan_cpu.append(cpu)
        if listing is not None:
            listing.append(("plan", fields, status, _ms(cpu)))
    pytorch = {}
    for fields in PYTORCH_GRID:
        plan, cpu = _cpu(lambda: api.solve(fields, kb))
        pytorch[f"{fields['gpus']} {fields['model']}"] = {
            "status": plan.status, "cpu_ms": _ms(cpu)}
    grid_cpu, grid_status, not_settled = [], {}, []
    for fields in status_grid(statuses):
        try:
            plan, cpu = _cpu(lambda: api.solve({**fields, "top": 0}, kb))
            status = plan.status + ("/timed-out" if plan.timed_out else "")
        except api.KbError:
            status, cpu = "refused", 0.0
        grid_status[status] = grid_status.get(status, 0) + 1
        grid_cpu.append(cpu)
        if listing is not None:
            listing.append(("status", fields, status, _ms(cpu)))
        if status not in ("optimal", "infeasible", "refused"):
            not_settled.append(fields)
    return {
        "plan_grid_queries": len(plan_cpu), "plan_statuses": plan_status,
        "plan_cpu_median_ms": _ms(statistics.median(plan_cpu)),
        "plan_cpu_p95_ms": _ms(statistics.quantiles(plan_cpu, n=20)[18]),
        "pytorch_plans": pytorch,
        "status_grid_queries": len(grid_cpu), "status_grid_statuses": grid_status,
        "status_grid_cpu_median_ms": _ms(statistics.median(grid_cpu)),
        "status_grid_cpu_p95_ms": _ms(statistics.quantiles(grid_cpu, n=20)[18]),
        "status_grid_not_settled": not_settled[:10],
        # the README's row names, kept for comparison with earlier runs
        "median_ms": _ms(statistics.median(plan_cpu)),
        "p95_ms": _ms(statistics.quantiles(plan_cpu, n=20)[18]),
    }


if __name__ == "__main__":
    import sys
    rows: list | None = [] if "--list" in sys.argv[1:] else None
    print(measure(listing=rows))
    for grid, fields, status, ms in sorted(rows or [], key=lambda r: -r[3]):
        print(f"{ms:9.1f} ms  {grid:6}  {status:12}  " + " ".join(str(v) for v in fields.values()))
