"""`python -m bench.trace`: trace the grid's training steps in the real model code.

    python -m bench.trace [--quick] [--part main|families|ppo|dit]
    python -m bench.trace --full-depth MODEL_CASE_ID ... [--out FILE]   # check the extrapolation

Builds (once) the pinned side venv (bench/trace/requirements.txt), runs
bench/trace/step.py inside it at two reduced depths per case, and writes each
case's traced figures and their extrapolation to the model's full depth:
every traced size is fixed + layers x per-layer, solved from the two depths.
Two grids, each its own file: `main` (grid.json: the catalog models) and
`families` (grid_families.json: GPT-2, BLOOM, Falcon, DeepSeek-V2-Lite,
Mistral's sliding window, QLoRA, offloaded checkpointing, ORPO and SimPO) and
`ppo` (grid_ppo.json: LlamaFactory's PPO step) and `dit` (grid_dit.json:
diffusers' DiT denoisers, encoders and VAEs); without --part all are traced
but `kto` (grid_kto.json: grid.json's KTO rows, retraced after step.py's
no_hooks_without_grad; bench/trace_compare.py takes them over grid.json's).
Runs under `nice -n 15`; the CPU time it took is written beside the results.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.trace import dit, grid, venv

STEP = Path(__file__).with_name("step.py")
STEP_DIT = Path(__file__).with_name("step_dit.py")
OUT = grid.ROOT / "bench" / "data" / "traces" / "grid.json"
PARTS = {"main": (grid.cases, OUT), "families": (grid.family_cases, OUT.with_name("grid_families.json")),
         "ppo": (grid.ppo_cases, OUT.with_name("grid_ppo.json")),
         "kto": (grid.kto_cases, OUT.with_name("grid_kto.json")),
         "dit": (dit.cases, OUT.with_name("grid_dit.json"))}
FIGURES = ("weights", "gradients", "optimizer_states", "fb_peak", "fb_transient",
           "step_peak", "peak", "flops")
CASE_KEYS = ("id", "model", "model_type", "task", "method", "lora_targets", "lora_rank",
             "checkpointing", "attention", "batch", "seq", "reference", "full_layers", "cuda_autocast")
FAMILY_KEYS = ("upcast", "offload_checkpoints", "attention_dropout_off",  # family-grid cases only
               "vocab")  # --vocab: a reduced vocabulary


def run_step(python: Path, cases: list[dict], progress=None, script: Path = STEP) -> dict[str, dict]:
    """Trace every case in one side-venv process; results by case id and depth.
    progress(results) is called after each result (partial files survive a stop)."""
    results = {}
    # stderr goes to a file: a pipe nobody reads while stdout streams fills up
    # with the libraries' warnings and blocks the tracer
    with tempfile.TemporaryFile("w+") as log, subprocess.Popen(
            ["nice", "-n", "15", str(python), str(script)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=log, text=True) as proc:
        proc.stdin.write(json.dumps(cases))
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith("{"):
                row = json.loads(line)
                results[row["id"]] = row
                if progress:
                    progress(results)
        proc.wait()
        log.seek(0)
        errors = log.read()
    if proc.returncode != 0:
        sys.exit(f"bench.trace: step.py failed:\n{errors[-3000:]}")
    return results


def extrapolate(low: dict, high: dict, layers: int) -> dict:
    """fixed + layers x per_layer, from the traces at two depths; the steady
    peak is a maximum of two such lines, so it is taken after extrapolating.
    step_peak must be the optimizer step's own peak (step.py resets the peak
    at the end of backward): a cumulative one is the forward/backward's at
    reduced depth and extrapolates along that phase's slope."""
    d_low, d_high = low["layers"], high["layers"]
    out = {}
    for key in FIGURES:
        per_layer = (high[key] - low[key]) / (d_high - d_low)
        out[key] = round(low[key] + (layers - d_low) * per_layer)
    out["peak"] = max(out["fb_peak"] + out["optimizer_states"], out["step_peak"])
    return out


def traced_cases(python: Path, cases: list[dict], progress=None) -> tuple[list[dict], list[dict]]:
    jobs = [dict(c, id=f"{c['id']}@{d}", layers=d) for c in cases for d in grid.depths(c)]
    if progress is None:
        return collect(cases, run_step(python, jobs))
    return collect(cases, run_step(python, jobs, lambda results: progress(*collect(cases, results))))


def complete(case: dict, traces: list, failed: list[dict]) -> bool:
    """Whether every trace of a case is in and none failed; a failed one is listed."""
    if any(t is None for t in traces):
        return False
    errors = [t["error"] for t in traces if "error" in t]
    if errors:
        failed.append({"id": case["id"], "error": errors[0]})
    return not errors


def collect(cases: list[dict], results: dict) -> tuple[list[dict], list[dict]]:
    """Rows of the cases whose two depths are traced, and the failed ones."""
    rows, failed = [], []
    for case in cases:
        depths = grid.depths(case)
        traces = [results.get(f"{case['id']}@{d}") for d in depths]
        if not complete(case, traces, failed):
            continue
        row = {k: case[k] for k in CASE_KEYS}
        row.update({k: case[k] for k in FAMILY_KEYS if k in case})
        row["depths"] = {str(d): {k: t[k] for k in FIGURES} for d, t in zip(depths, traces)}
        row["full"] = extrapolate(dict(traces[0], layers=depths[0]), dict(traces[-1], layers=depths[-1]),
                                  case["full_layers"])
        rows.append(row)
    return rows, failed


def full_depth_check(python: Path, ids: list[str], out: Path | None = None) -> int:
    """Trace each case at its full depth; print it beside the extrapolation.
    With `out`, write each case's traced depths (the two reduced ones and the
    full one) and its extrapolation there (bench/data/traces/full_depth.json:
    tests/test_trace_grid.py checks the extrapolation against it)."""
    by_id = {c["id"]: c for c in grid.cases() + grid.family_cases() + grid.ppo_cases()}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        sys.exit(f"bench.trace: unknown case id {unknown[0]!r}")
    cases = [by_id[i] for i in ids]
    rows, failed = traced_cases(python, cases)
    full = run_step(python, [dict(c, layers=c["full_layers"]) for c in cases])
    errors: dict[str, dict[str, float]] = {}
    for row in rows:
        traced = full[row["id"]]
        if "error" in traced:
            failed.append({"id": row["id"], "error": traced["error"]})
            continue
        for key in ("weights", "gradients", "optimizer_states", "fb_peak", "peak"):
            error = row["full"][key] / traced[key] - 1 if traced[key] else 0.0
            errors.setdefault(row["id"], {})[key] = error
            print(f"{row['id']} {key}: extrapolated {row['full'][key]} traced {traced[key]} ({error:+.4%})")
    worst = max((abs(e) for case in errors.values() for e in case.values()), default=0.0)
    print(json.dumps({"worst_relative_error": worst, "errors": errors, "failed": failed}))
    if out:
        for row in rows:
            if "error" not in full[row["id"]]:
                row["depths"][str(row["full_layers"])] = {k: full[row["id"]][k] for k in FIGURES}
        data = {"environment": venv.versions(python),
                "generated_by": "python -m bench.trace --full-depth " + " ".join(ids),
                "cases": [r for r in rows if str(r["full_layers"]) in r["depths"]], "failed": failed}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(data), encoding="utf-8")
    return 0


def dump(data: dict) -> str:
    """JSON with one case per line: small, and a regenerated grid diffs by case."""
    head = {k: v for k, v in data.items() if k not in ("cases", "failed")}
    lines = [json.dumps(head)[:-1] + ', "cases": [']
    lines += [json.dumps(row) + "," for row in data["cases"]]
    if data["cases"]:
        lines[-1] = lines[-1][:-1]
    lines.append('], "failed": ' + json.dumps(data["failed"]) + "}")
    return "\n".join(lines) + "\n"


def merge(files: list[Path], out: Path) -> int:
    """One grid file from the files of split runs, in the grid's case order."""
    parts = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    environments = {json.dumps(p["environment"], sort_keys=True) for p in parts}
    if len(environments) > 1:
        sys.exit("bench.trace: the files were traced in different environments")
    order = {c["id"]: i for i, c in enumerate(grid.cases() + grid.family_cases() + grid.ppo_cases())}
    rows = {r["id"]: r for p in parts for r in p["cases"]}
    failed = {r["id"]: r for p in parts for r in p["failed"]}
    data = dict(parts[0], generated_by="python -m bench.trace (split over processes, merged)",
                cpu_seconds=round(sum(p["cpu_seconds"] for p in parts), 1),
                wall_seconds=max(p["wall_seconds"] for p in parts),
                complete=set(rows) | set(failed) >= set(order),
                cases=sorted(rows.values(), key=lambda r: order.get(r["id"], len(order))),
                failed=sorted(failed.values(), key=lambda r: order.get(r["id"], len(order))))
    out.write_text(dump(data), encoding="utf-8")
    print(f"bench.trace: {len(rows)} cases, {len(failed)} failed -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trace", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 30-case subset (two small models)")
    parser.add_argument("--part", choices=sorted(PARTS), help="one grid only (default: all)")
    parser.add_argument("--out", type=Path, help="the output file (one --part only; default: "
                        "bench/data/traces/grid.json, grid_families.json; with --full-depth: "
                        "the traced depths, e.g. bench/data/traces/full_depth.json)")
    parser.add_argument("--full-depth", nargs="+", metavar="CASE_ID",
                        help="trace these grid cases at full depth and compare")
    parser.add_argument("--models", help="only these grid models (comma list), e.g. to split "
                        "the grid over processes")
    parser.add_argument("--cases", help="only these grid case ids (comma list)")
    parser.add_argument("--vocab", type=int, metavar="N",
                        help="trace with an N-token vocabulary (needs --cases and --out): the loss "
                        "path falls below the layers' own peak, which the trace then shows")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="FILE",
                        help="combine grid files of split runs into --out (CPU times add up)")
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out or OUT)
    # kto retraces grid.json's KTO rows into their own file: only when asked
    parts = [args.part] if args.part else [p for p in PARTS if p != "kto"]
    if args.out and len(parts) > 1 and not args.full_depth:
        sys.exit("bench.trace: --out needs one --part")
    python = venv.python()
    if args.full_depth:
        return full_depth_check(python, args.full_depth, args.out)
    selected = {part: PARTS[part][0](full=not args.quick) for part in parts}
    if args.models:
        wanted = args.models.split(",")
        known = {c["model"] for cases in selected.values() for c in cases}
        unknown = [m for m in wanted if m not in known]
        if unknown:
            sys.exit(f"bench.trace: unknown grid model {unknown[0]!r}; models: {', '.join(sorted(known))}")
        selected = {p: [c for c in cases if c["model"] in wanted] for p, cases in selected.items()}
    if args.cases:
        wanted = set(args.cases.split(","))
        unknown = wanted - {c["id"] for cases in selected.values() for c in cases}
        if unknown:
            sys.exit(f"bench.trace: unknown case id {sorted(unknown)[0]!r}")
        selected = {p: [c for c in cases if c["id"] in wanted] for p, cases in selected.items()}
    if args.vocab:
        if not (args.cases and args.out):
            sys.exit("bench.trace: --vocab needs --cases and --out (it is not the grid's model)")
        selected = {p: [small_vocab(c, args.vocab) for c in cases] for p, cases in selected.items()}
    environment = venv.versions(python)
    for part, cases in selected.items():
        if cases and part == "dit":
            trace_dit(python, environment, cases, args.out or PARTS[part][1], args.quick)
        elif cases:
            trace_part(python, environment, cases, args.out or PARTS[part][1], args.quick)
    return 0


def small_vocab(case: dict, vocab: int) -> dict:
    """The case with an N-token vocabulary: the same layers, a loss path N /
    vocab as large. The padding id goes inside it (Phi-3's config class
    defaults to 32000, which the embedding refuses past its rows); padding
    changes no tensor size."""
    return dict(case, config=dict(case["config"], vocab_size=vocab, pad_token_id=0), vocab=vocab)


def trace_part(python: Path, environment: dict, cases: list[dict], out: Path, quick: bool) -> None:
    """Trace one grid's cases into its file; the CPU time is this part's own."""
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def write(rows, failed):
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
        data = {"environment": environment,
                "generated_by": "python -m bench.trace" + (" --quick" if quick else ""),
                "depths": {"default": list(grid.DEPTHS), "freeze": list(grid.FREEZE_DEPTHS)},
                "cpu_seconds": round(cpu, 1),
                "wall_seconds": round(time.monotonic() - start, 1),
                "complete": len(rows) + len(failed) == len(cases),
                "cases": rows, "failed": failed}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(data), encoding="utf-8")
        return data

    rows, failed = traced_cases(python, cases, progress=write)
    data = write(rows, failed)
    print(f"bench.trace: {len(rows)} cases traced, {len(failed)} failed, "
          f"{data['cpu_seconds']} s CPU -> {out}")


DIT_KEYS = ("id", "phase", "model", "family", "method", "lora_targets", "checkpointing", "batch", "height", "width",
            "frames", "text_tokens", "lora_rank", "full_blocks", "encoder_type", "vae_class", "direction", "cuda_autocast")


def trace_dit(python: Path, environment: dict, cases: list[dict], out: Path, quick: bool) -> None:
    """Trace the DiT grid (bench/trace/dit.py) into its file: each case at its
    reduced depths (step_dit.py), extrapolated to the model's blocks."""
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def write(results):
        rows, failed = [], []
        for case in cases:
            traces = [results.get(j["id"]) for j in dit.jobs(case)]
            if not complete(case, traces, failed):
                continue
            row = {k: case[k] for k in DIT_KEYS if k in case}
            row["points"] = {",".join(map(str, t["point"])) or "full": {k: v for k, v in t.items()
                             if k not in ("id", "point")} for t in traces}
            row["full"] = dit.extrapolate(case, traces)
            rows.append(row)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
        data = {"environment": environment,
                "generated_by": "python -m bench.trace --part dit" + (" --quick" if quick else ""),
                "lora_targets": dit.LORA_TARGETS_NOTE, "cpu_seconds": round(cpu, 1),
                "wall_seconds": round(time.monotonic() - start, 1),
                "complete": len(rows) + len(failed) == len(cases), "cases": rows, "failed": failed}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(data), encoding="utf-8")
        return data

    job_list = [j for case in cases for j in dit.jobs(case)]
    results = run_step(python, job_list, progress=write, script=STEP_DIT)
    data = write(results)
    print(f"bench.trace: {len(data['cases'])} DiT cases traced, {len(data['failed'])} failed, "
          f"{data['cpu_seconds']} s CPU -> {out}")


if __name__ == "__main__":
    sys.exit(main())
