"""`python -m bench`: every benchmark, one table against the targets, and
bench/results.json (with the machine's description) for later comparison.

A section that fails is reported in its row and in the JSON; the others still run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench import (accuracy, as_printed, audit_project, cold, deep_check, determinism,
                   dit_accuracy, kb_load, recipe, solve, trace_compare, trace_dit_compare, warm,
                   warm_floor)
from bench.machine import describe

RESULTS = Path(__file__).with_name("results.json")

SECTIONS = {
    "cold_cli": cold.measure, "warm_solve": warm.measure, "warm_floor": warm_floor.measure,
    "z3_vs_enumerator": solve.versus_enumerator, "kb_load": kb_load.measure,
    "kb_check": deep_check.measure, "audit": audit_project.measure,
    "memory_accuracy": lambda: {k: v for k, v in accuracy.summarise(accuracy.evaluate()).items()
                                if k not in ("worst_rows", "worst_speed_rows")},
    "dit_accuracy": lambda: {k: v for k, v in dit_accuracy.measure().items() if k != "rows"},
    "trace_grid": lambda: trace_compare.summarise(trace_compare.evaluate()),
    "trace_families": lambda: trace_compare.summarise(
        trace_compare.evaluate(trace_compare.FAMILY_DATA), by_subset=True),
    "trace_dit": lambda: trace_dit_compare.summarise(trace_dit_compare.evaluate()),
    "recipe_grid": recipe.measure,
    "as_printed_grid": as_printed.measure,
    "determinism": determinism.measure,
    "determinism_under_load": determinism.under_load,
}


def run_sections() -> dict:
    results: dict = {"machine": describe(), "commit": _commit(),
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    started = time.perf_counter()
    for name, measure in SECTIONS.items():
        start = time.perf_counter()
        try:
            results[name] = measure()
        except Exception as error:  # a broken section must not hide the others
            results[name] = {"error": f"{type(error).__name__}: {error}"[:300]}
        results[name]["section_s"] = round(time.perf_counter() - start, 1)
    results["total_s"] = round(time.perf_counter() - started, 1)
    return results


def _commit() -> str | None:
    """The checkout's commit, and whether files were changed on top of it."""
    import subprocess
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return (rev + ("+changes" if dirty.strip() else "")) if rev else None


def _get(data: dict, *path, default=None):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


def _ms(value) -> str:
    return "n/a" if value is None else (f"{value / 1000:.2f} s" if value >= 1000
                                        else f"{value:.0f} ms")


def _cold(r: dict, key: str) -> str:
    row = _get(r, "cold_cli", key) or {}
    return (f"{_ms(row.get('median_ms'))} (CPU {_ms(row.get('cpu_median_ms'))}; "
            f"{row.get('runs')} runs, exit {row.get('exit_codes')})")


def rows(r: dict) -> list[tuple[str, str, str]]:
    w, z, a = r.get("warm_solve", {}), r.get("z3_vs_enumerator", {}), r.get("audit", {})
    k, c, d = r.get("kb_load", {}), r.get("kb_check", {}), r.get("determinism", {})
    load = r.get("determinism_under_load", {})
    acc = r.get("memory_accuracy", {})
    return [
        ("cold `kbsolve --gpus 8xA100 --model wan14b`, median of up to 10 processes",
         _cold(r, "diffusion"), "≤ 0.5 s"),
        ("cold `kbsolve --gpus 8xA100 --model qwen3-8b`, median of up to 10",
         _cold(r, "llm"), "≤ 0.5 s"),
        ('floor: `python -c "import z3, lark, pydantic"`', _cold(r, "import_floor"), "—"),
        (f"warm plan with explanations, CPU median / p95 ({w.get('plan_grid_queries')} "
         f"fixed queries: {w.get('plan_statuses')})",
         f"{_ms(w.get('plan_cpu_median_ms'))} / {_ms(w.get('plan_cpu_p95_ms'))}",
         "≤ 50 ms / ≤ 200 ms"),
        ("warm plan's floor: set-up plus every node at the plan's least CPU per node, "
         "median (plans over 50 ms)",
         f"{_ms(_get(r, 'warm_floor', 'floor_median_ms'))} "
         f"({_get(r, 'warm_floor', 'plans_with_floor_over_50_ms')} of "
         f"{_get(r, 'warm_floor', 'plans')})", "—"),
        (f"LlamaFactory status grid ({w.get('status_grid_queries')} queries, --top 0), "
         f"CPU median", f"{_ms(w.get('status_grid_cpu_median_ms'))}: "
         f"{w.get('status_grid_statuses')}", "100 % optimal or infeasible"),
        (f"solver (branch and bound) vs enumerator, exact agreement "
         f"({z.get('small_space_cases')} small spaces)",
         f"{z.get('agreement_pct')} %", "100 %"),
        ("solver vs enumerator, speed-up: small spaces / full space (extrapolated; status)",
         f"{z.get('small_space_speedup_x')} × / {z.get('full_space_speedup_x'):.2g} × "
         f"({z.get('full_space_z3_status')} in {z.get('full_space_z3_s')} s)"
         if "full_space_speedup_x" in z else str(z.get("error")), "≥ 100 ×"),
        ("KB load, cold parse and check / cached",
         f"{_ms(k.get('kb_load_cold_ms'))} / {_ms(k.get('kb_load_cached_ms'))}", "—"),
        ("`kb check` / `kb check --deep` (fresh process)",
         f"{_ms(_get(c, 'check', 'ms'))} / {_ms(_get(c, 'deep', 'ms'))} "
         f"(exit {_get(c, 'deep', 'exit_code')})", "—"),
        (f"audit of a generated {a.get('files')}-file project, warm / CLI",
         f"{_ms(a.get('warm_median_ms'))} / {_ms(a.get('cli_ms'))}", "≤ 1 s"),
        (f"plans keep the recipe ({_get(r, 'recipe_grid', 'recipe_grid_queries')} queries: "
         f"{_get(r, 'recipe_grid', 'recipe_grid_statuses')}): global batch kept, no unasked "
         f"optin, host RAM checked, no own warning without a reason",
         f"{len(_get(r, 'recipe_grid', 'recipe_grid_defects', default=[]) or [])} defects, "
         f"batch varies for {len(_get(r, 'recipe_grid', 'recipe_batch_varies', default={}) or {})}"
         f" model/task", "0 defects, 0 varying"),
        (f"plans run as printed ({_get(r, 'as_printed_grid', 'as_printed_queries')} queries: "
         f"{_get(r, 'as_printed_grid', 'as_printed_statuses')}): emitted files read back "
         f"equal the plan, files named exist, process count, requirements name every package",
         f"{len(_get(r, 'as_printed_grid', 'as_printed_defects', default=[]) or [])} defects",
         "0 defects"),
        *_accuracy_rows(acc),
        _dit_row(r.get("dit_accuracy", {})),
        *_trace_rows(r.get("trace_grid", {})),
        *_trace_rows(r.get("trace_families", {}), "families grid"),
        *_trace_dit_rows(r.get("trace_dit", {})),
        (f"plan JSON over {d.get('runs')} of {d.get('runs_planned')} processes, each its own "
         f"PYTHONHASHSEED", "byte-identical" if d.get("identical") else
         f"{d.get('distinct_outputs')} distinct, exit {d.get('exit_codes')}"
         + (" (the KB changed meanwhile)" if d.get("kb_changed_during_run") else "")
         + str(d.get("error", "")), "byte-identical"),
        (f"plan JSON over {load.get('runs')} runs beside {load.get('burners')} CPU-burning "
         f"processes", "byte-identical" if load.get("identical") else
         f"{load.get('distinct_outputs')} distinct, exit {load.get('exit_codes')}"
         + str(load.get("error", "")), "byte-identical"),
        ("whole bench", f"{r.get('total_s')} s", "≤ 300 s"),
    ]


def _pair(acc: dict, key: str, scale: float = 1, unit: str = "") -> str:
    values = [_get(acc, name, key) for name in ("whole", "loso")]
    if None in values:
        return str(acc.get("error", "n/a"))
    return " / ".join(f"{v * scale:.3g}{unit}" for v in values)


def _accuracy_rows(acc: dict) -> list[tuple[str, str, str]]:
    """The dev set's figures, each whole / leave-one-source-out (bench/fit.py)."""
    whole = acc.get("whole", {})
    n, sources = whole.get("rows_compared"), len(acc.get("sources", []))
    drift = acc.get("calibration_drift")
    return [
        (f"memory MAPE, LLM rows ({n} rows, {sources} sources): whole / leave-one-source-out",
         _pair(acc, "mape_pct", unit=" %"), "LOSO ≤ 8 %"),
        ("share of rows under-predicted by more than 10 %: whole / LOSO",
         _pair(acc, "under_10pct_share", 100, " %"), "LOSO ≤ 5 %"),
        (f"published OOM rows predicted to overflow ({whole.get('oom_rows')} rows, at the "
         f"error band's upper end): whole / LOSO", _pair(acc, "oom_agreement_pct", unit=" %"),
         "100 %"),
        (f"rows that ran predicted to fit ({whole.get('ran_rows')} rows): whole / LOSO",
         _pair(acc, "ran_predicted_to_fit_pct", unit=" %"), "—"),
        (f"speed Spearman ρ ({whole.get('throughput_rows')} rows with tokens/s): whole / LOSO",
         _pair(acc, "spearman"), "≥ 0.9"),
        ("speed median absolute error: whole / LOSO",
         _pair(acc, "median_abs_error_pct", unit=" %"), "≤ 25 %"),
        ("memory error band's coverage of runs from sources left out (constants and band "
         "fitted without each source), by class", "; ".join(
             f"{cls} {c['covered']} of {c['runs']}" for cls, c in
             (acc.get("band_coverage") or {}).items()) or "n/a", "≥ 90 % each"),
        ("calibrated constants as the fit procedure gives them (kb/core/calibration.kb)",
         "no drift" if drift == {} else f"drift: {drift}", "no drift"),
    ]


def _dit_row(dit: dict) -> tuple[str, str, str]:
    """DiT memory per framework (bench/dit_accuracy.py): MAPE whole / LOSO, under-predicted."""
    parts = []
    for name, fig in sorted((dit.get("frameworks") or {}).items()):
        whole, loso = fig.get("whole", {}), fig.get("loso", {})
        parts.append(f"{name} ({whole.get('rows_compared')} rows): {whole.get('mape_pct')} % / "
                     f"{loso.get('mape_pct')} %, under >10 %: {whole.get('under_10pct_share')}")
    return ("DiT memory MAPE per framework (bench/dit_accuracy.py): whole / leave-one-source-out",
            "; ".join(parts) or str(dit.get("error", "n/a")), "≤ 25 %")


def _trace_rows(grid: dict, name: str = "trace grid") -> list[tuple[str, str, str]]:
    """The KB's memory terms against the traced tensors (bench/trace_compare.py)."""
    if "groups" not in grid:
        return [(f"{name} (bench/trace_compare.py)", str(grid.get("error", "n/a")), "—")]
    groups = "; ".join(f"{g} {f['median']:.1%} / {f['worst']:+.1%}"
                       for g, f in grid["groups"].items())
    ratios = "; ".join(f"{k.split('/')[0]} {v['traced']:.2f} vs {v['kb']:.2f}"
                       for k, v in grid["task_ratios"].items() if k.endswith("/all"))
    return [(f"{name} ({grid['cases']} configs), KB memory terms against the traced "
             f"tensors at the allocated level: median |error| / worst, per group", groups,
             "≤ 3 % / ≤ 10 %"),
            ("task / SFT memory ratio, traced vs KB (median over the grid)", ratios, "equal")]


def _trace_dit_rows(grid: dict) -> list[tuple[str, str, str]]:
    """The DiT KB terms against the DiT trace grid (bench/trace_dit_compare.py)."""
    if "groups" not in grid:
        return [("DiT trace grid (bench/trace_dit_compare.py)", str(grid.get("error", "n/a")), "—")]
    groups = "; ".join(f"{g} {f['median']:.1%} / {f['worst']:+.1%}" for g, f in grid["groups"].items())
    return [(f"DiT trace grid ({grid['rows']} rows: diffusers, Flow-Factory), KB memory terms against "
             f"the traced tensors: median |error| / worst, per group", groups, "≤ 3 % / ≤ 10 %")]


def table(results: dict) -> str:
    lines = ["| figure | measured | target |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows(results)]
    errors = [f"{name}: {s['error']}" for name, s in results.items()
              if isinstance(s, dict) and "error" in s]
    return "\n".join(lines + [f"\nfailed section {e}" for e in errors])


def main() -> None:
    results = run_sections()
    print(table(results))
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
