"""Where a warm plan's CPU goes, and the least it could cost in this design (issue 25).

For each of bench.warm's plans: CPU of the set-up (Search.__init__) and of the
branch and bound's searches by purpose, each with its nodes: the optimisation
(`main`), the explanation's decisive comparisons and clash questions, and the
refusal's fixes; the rest (Z3, exact measures, the explanation's own code, the
report) is what is left of the plan's CPU.

The floor of a plan: its set-up plus every node it visits at the cheapest CPU per
node any of its searches reached (an explanation's search, which runs on the
tables and memos the optimisation built). It is what the plan would cost if
nothing but its nodes ran and each cost the least measured; its median over the
grid bounds what a faster node loop can reach without visiting fewer nodes.
The set-up and the optimisation alone (no explanation's search) are reported too.

    python -m bench.warm_floor            # the summary
    python -m bench.warm_floor --list     # and each plan's phases
"""

from __future__ import annotations

import collections
import statistics
import time

from bench.warm import PLAN_GRID, _ms as ms

PHASES = ("main", "decisive", "clash", "fixes")
LEAST_NODES = 100  # a search phase with fewer nodes gives no cost per node


class _Meter:
    """Wraps the functions that start each phase (put back by close())."""

    def __init__(self):
        from kbsolve.plan import explain, run
        from kbsolve.solver import search
        self.cpu: collections.Counter = collections.Counter()
        self.nodes: collections.Counter = collections.Counter()
        self.stack: list[str] = []
        self._undo: list = []
        self._wrap(search.Search, "__init__", "setup")
        self._wrap(search.Search, "run", None)
        self._wrap(explain, "_decisive", "decisive")
        self._wrap(search.Search, "clash", "clash")
        self._wrap(run, "_refused", "fixes")

    def _wrap(self, owner, name: str, tag: str | None) -> None:
        inner = getattr(owner, name)
        meter = self

        def wrapped(*args, **kwargs):
            start = time.process_time()
            meter.stack.append(tag or "search")
            try:
                result = inner(*args, **kwargs)
            finally:
                meter.stack.pop()
                spent = time.process_time() - start
            if tag is None:  # a search: counted under the phase that asked for it
                phase = next((t for t in reversed(meter.stack) if t in PHASES), "main")
                meter.cpu[phase] += spent
                meter.nodes[phase] += getattr(result, "nodes", 0)
            elif tag == "setup":
                meter.cpu["setup"] += spent
            return result

        self._undo.append((owner, name, inner))
        setattr(owner, name, wrapped)

    def close(self) -> None:
        for owner, name, inner in reversed(self._undo):
            setattr(owner, name, inner)


def _floor(cpu: dict, nodes: dict) -> float:
    rates = [cpu[p] / nodes[p] for p in PHASES if nodes.get(p, 0) >= LEAST_NODES]
    least = min(rates, default=0.0)
    return cpu.get("setup", 0.0) + least * sum(nodes.get(p, 0) for p in PHASES)


def measure(plans: int = len(PLAN_GRID), listing: list | None = None) -> dict:
    from kbsolve import api
    kb = api.load_kb()
    api.solve({"gpus": "1xA100", "model": "qwen3-8b", "top": 0}, kb)  # imports, first tables
    meter = _Meter()
    totals, floors, per_node, optimising = [], [], [], []
    try:
        for fields in PLAN_GRID[:plans]:
            meter.cpu.clear()
            meter.nodes.clear()
            start = time.process_time()
            plan = api.solve(fields, kb)
            total = time.process_time() - start
            cpu, nodes = dict(meter.cpu), dict(meter.nodes)
            totals.append(total)
            floors.append(_floor(cpu, nodes))
            optimising.append(cpu.get("setup", 0.0) + cpu.get("main", 0.0))
            per_node += [cpu[p] / nodes[p] for p in PHASES if nodes.get(p, 0) >= LEAST_NODES]
            if listing is not None:
                listing.append((fields, plan.status, total, cpu, nodes, floors[-1]))
    finally:
        meter.close()
    return {"plans": len(totals), "cpu_median_ms": ms(statistics.median(totals)),
            "floor_median_ms": ms(statistics.median(floors)),
            "setup_and_optimisation_median_ms": ms(statistics.median(optimising)),
            "floor_max_ms": ms(max(floors)),
            "plans_with_floor_over_50_ms": sum(f > 0.05 for f in floors),
            "least_cpu_per_node_us": round(min(per_node) * 1e6, 1),
            "median_cpu_per_node_us": round(statistics.median(per_node) * 1e6, 1)}


def _row(fields, status, total, cpu, nodes, floor) -> str:
    parts = " ".join(f"{p}={cpu.get(p, 0) * 1000:.0f}ms/{nodes.get(p, 0)}"
                     for p in PHASES if nodes.get(p, 0))
    rest = total - sum(cpu.get(p, 0) for p in ("setup",) + PHASES)
    return (f"{total * 1000:7.1f} ms  floor {floor * 1000:6.1f}  setup={cpu.get('setup', 0) * 1000:.0f}ms "
            f"{parts} rest={rest * 1000:.0f}ms  {status:10} {fields['gpus']} {fields['model']}")


if __name__ == "__main__":
    import sys
    rows: list | None = [] if "--list" in sys.argv[1:] else None
    print(measure(listing=rows))
    for row in sorted(rows or [], key=lambda r: r[2]):
        print(_row(*row))
