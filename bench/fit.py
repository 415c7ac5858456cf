"""Fit the calibrated constants of kb/core/calibration.kb to the dev set, and the
leave-one-source-out (LOSO) figures that say how well the fitted models generalize.

The procedure (rerun by `python -m bench`; `python -m bench.fit --write` writes the result):

1. Every dev-set row is estimated once with the committed constants (bench/accuracy.py).
2. Speed. Each calibrated constant scales known speed terms linearly (SPEED_TERMS), so a
   row's step time under other constants c is (sum_k c_k * B_k + F) * P, where B_k is
   the terms of constant k per unit of it, F the other time terms (communication,
   offload) and P the product of the factors. The constants minimise the sum of squared
   relative errors of the step time over the rows with a published throughput, plus a
   ridge term pulling each constant towards its prior (PRIORS, weight RIDGE), within
   physical bounds (BOUNDS): projected coordinate descent on that convex quadratic, a
   fixed number of sweeps in a fixed order, so the result is the same on every machine.
3. Memory. allocator_fraction scales the allocator's pool above the allocated peak: the
   reserved level is allocated * (1 + f), or set-up's allocated peak * (1 + f) where set-up
   peaks higher (the setup_reserve term). It minimises the squared relative error over the
   rows whose metric is reserved (closed form, then bounded).
4. LOSO: for every source (the first token of a row id), the constants are refitted
   without its rows and its rows are predicted with them.
5. Error bands: for each class of run (BAND_CLASSES, by method), the residuals
   measured / LOSO-predicted memory - 1 of the class's rows; the band is the residual of
   rank ceil((n + 1) * BAND_QUANTILE) of n (split conformal prediction's finite-sample rank:
   a new exchangeable run falls under it with probability at least BAND_QUANTILE), 0 when
   the model over-predicts. They become the `memory_band_*` constants, which the frameworks'
   `error_band` memory term adds at the device level so that "fits" is checked at the
   band's upper end.
6. Coverage, measured, not assumed: for each source, the allocator fraction AND the band
   are fitted without it (the band from the LOSO residuals of the other sources, each
   predicted without itself and without the held-out source), and each of its rows is
   covered when its measured memory is at most the prediction times (1 + band). The count
   per class is written into the band's `because`, which plans, estimates and audits print
   ("covered 55 of 61 runs from sources left out of the fit").
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

CALIBRATION = Path(__file__).resolve().parents[1] / "kb" / "core" / "calibration.kb"

# speed term (as the pytorch framework names it) -> the constant it is linear in
SPEED_TERMS = {"gemms": "gemm_time_scale", "narrow_gemms": "gemm_narrow_scale",
               "short_gemms": "gemm_short_scale", "attention_kernels": "attention_time_scale",
               "score_traffic": "memory_time_scale", "memory_bound": "memory_time_scale",
               "qlora_dequant": "dequant_time_scale", "layer_overhead": "layer_pass_seconds"}
SPEED_CONSTANTS = ("gemm_time_scale", "gemm_narrow_scale", "gemm_short_scale",
                   "attention_time_scale", "memory_time_scale", "dequant_time_scale",
                   "layer_pass_seconds")
# Priors: the physical judgement each constant starts from (a large GEMM at 70 % of peak,
# attention kernels at their published share, elementwise kernels at 2/3 of HBM bandwidth,
# 4-bit dequantization at a quarter of it, 0.2 ms per layer pass).
PRIORS = {"gemm_time_scale": 1.4, "gemm_narrow_scale": 0.2, "gemm_short_scale": 0.2,
          "attention_time_scale": 1.0, "memory_time_scale": 1.5, "dequant_time_scale": 4.0,
          "layer_pass_seconds": 0.0002}
# Lower bounds stay above 0 so that a committed constant always recovers its terms' basis.
BOUNDS = {"gemm_time_scale": (1.0, 4.0), "gemm_narrow_scale": (0.001, 2.0),
          "gemm_short_scale": (0.001, 2.0), "attention_time_scale": (0.5, 4.0),
          "memory_time_scale": (1.0, 6.0), "dequant_time_scale": (1.0, 30.0),
          "layer_pass_seconds": (0.000001, 0.005)}
RIDGE = 0.5  # each prior weighs like half a row that is 100 % off
SWEEPS = 400
ALLOCATOR_BOUNDS = (0.0, 0.5)
BAND_CLASSES = ("full", "lora", "qlora")
BAND_QUANTILE = 0.9
# The conformal levels a class's band may be set at, lowest first: the first at which the
# nested coverage (step 6) reaches BAND_QUANTILE. Rows of one source share a script and a
# reading, so they are not exchangeable with other sources' rows, and the plain 90 % rank over
# other sources' residuals can cover fewer than nine in ten of a source left out.
BAND_LEVELS = tuple(round(0.9 + 0.01 * k, 2) for k in range(11))
DIGITS = 3  # significant digits written to calibration.kb
# A refit within 5 % of the committed value is no drift: the fit holds the exposed
# communication (max(0, sync - compute)) fixed at the committed constants, so successive
# refits may move a constant by a few percent before they settle.
DRIFT = 0.05


def _round(value: float) -> float:
    return float(f"{value:.{DIGITS}g}") if value else 0.0


# ---- speed -------------------------------------------------------------------------

def speed_design(row: dict, committed: dict) -> tuple[list[float], float] | None:
    """(a_k, b) with predicted / measured step time = sum_k a_k c_k + b, or None."""
    measured, predicted = row.get("tokens_per_s_gpu"), row.get("predicted_tokens_per_s_gpu")
    if not measured or not predicted:
        return None
    terms, factors = row["speed_terms"], row["speed_factors"]
    step = row["step_time_s"]
    product = math.prod(factors.values()) if factors else 1.0
    measured_step = step * predicted / measured
    per_constant = {name: 0.0 for name in SPEED_CONSTANTS}
    fixed = 0.0
    for name, value in terms.items():
        constant = SPEED_TERMS.get(name)
        if constant is None:
            fixed += value
        else:
            per_constant[constant] += value / committed[constant]
    a = [per_constant[name] * product / measured_step for name in SPEED_CONSTANTS]
    return a, fixed * product / measured_step


def fit_speed(rows: list[dict], committed: dict) -> dict:
    design = [d for d in (speed_design(r, committed) for r in rows) if d]
    c = [PRIORS[name] for name in SPEED_CONSTANTS]
    scale = [PRIORS[name] or 1.0 for name in SPEED_CONSTANTS]
    for _ in range(SWEEPS):
        for k, name in enumerate(SPEED_CONSTANTS):
            # minimise sum_i (a_i.c + b_i - 1)^2 + RIDGE * sum_k ((c_k - prior_k) / scale_k)^2 in c_k
            num = RIDGE * PRIORS[name] / scale[k] ** 2
            den = RIDGE / scale[k] ** 2
            for a, b in design:
                rest = sum(a[j] * c[j] for j in range(len(c)) if j != k) + b - 1
                num -= a[k] * rest
                den += a[k] * a[k]
            low, high = BOUNDS[name]
            c[k] = min(high, max(low, num / den)) if den else PRIORS[name]
    return {name: _round(value) for name, value in zip(SPEED_CONSTANTS, c)}


def predict_speed(row: dict, committed: dict, constants: dict) -> float | None:
    """Predicted tokens/s per GPU of the row under other constants."""
    d = speed_design(row, committed)
    if d is None:
        return None
    a, b = d
    ratio = sum(x * constants[n] for x, n in zip(a, SPEED_CONSTANTS)) + b  # predicted/measured step
    return row["tokens_per_s_gpu"] / ratio if ratio > 0 else None


# ---- memory ------------------------------------------------------------------------

def _split_reserved(row: dict, committed: dict) -> tuple[float, float, float, float]:
    """(allocated, other terms above it, the device-only terms, the allocated peak the
    allocator's pool scales) of the row, without the allocator's pool and without the error
    band. The pool scales the larger of training's allocated peak and set-up's (the
    framework's setup_reserve term is (1 + f) * max(0, set-up peak - allocated))."""
    levels, breakdown = row["levels"], row["breakdown"]
    cache, band = breakdown.get("allocator_cache", 0.0), breakdown.get("error_band", 0.0)
    setup = breakdown.get("setup_reserve", 0.0)
    above = levels["reserved"] - levels["allocated"] - cache - setup
    device_only = levels["device"] - levels["reserved"] - band
    peak = levels["allocated"] + setup / (1 + committed["allocator_fraction"])
    return levels["allocated"], above, device_only, peak


def predict_memory(row: dict, committed: dict, fraction: float, level: str | None = None) -> float:
    allocated, above, device_only, peak = _split_reserved(row, committed)
    reserved = peak * (1 + fraction) + above
    value = {"allocated": allocated, "reserved": reserved,
             "device": reserved + device_only}[level or row["level"]]
    return value


def fit_allocator(rows: list[dict], committed: dict) -> float:
    num = den = 0.0
    for r in rows:
        if r["metric"] not in ("reserved", "reserved-p99") or not r["measured"] \
                or r["length_unknown"]:
            continue
        _, above, _, peak = _split_reserved(r, committed)
        m = r["measured"]
        num += peak * (m - peak - above) / m ** 2
        den += peak ** 2 / m ** 2
    low, high = ALLOCATOR_BOUNDS
    return _round(min(high, max(low, num / den))) if den else committed["allocator_fraction"]


# ---- the whole procedure -----------------------------------------------------------

def fit(rows: list[dict], committed: dict) -> dict:
    constants = fit_speed(rows, committed)
    constants["allocator_fraction"] = fit_allocator(rows, committed)
    return constants


def loso(rows: list[dict], committed: dict) -> list[dict]:
    """Each row predicted by constants fitted without its source's rows."""
    out = []
    for source in sorted({r["source"] for r in rows}):
        constants = fit([r for r in rows if r["source"] != source], committed)
        for r in rows:
            if r["source"] == source:
                out.append(_predicted(r, committed, constants))
    return out


def whole(rows: list[dict], committed: dict) -> list[dict]:
    return [_predicted(r, committed, committed) for r in rows]


def _predicted(row: dict, committed: dict, constants: dict) -> dict:
    out = dict(row)
    if row["measured"] is not None:
        out["predicted"] = predict_memory(row, committed, constants["allocator_fraction"])
    out["predicted_device"] = predict_memory(row, committed, constants["allocator_fraction"],
                                             "device")
    out["predicted_tokens_per_s_gpu"] = predict_speed(row, committed, constants)
    return out


def _band_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["measured"] and not r["length_unknown"]
            and r["method_class"] in BAND_CLASSES]


def band_value(residuals: list[float], level: float = BAND_QUANTILE) -> float:
    """The residual of rank ceil((n + 1) * level) (the largest when that passes n), at least
    0; 0 without residuals: no rows, no band claimed."""
    if not residuals:
        return 0.0
    ordered = sorted(residuals)
    rank = min(len(ordered), math.ceil((len(ordered) + 1) * level - 1e-9))
    return max(0.0, ordered[rank - 1])


def bands(loso_rows: list[dict], levels: dict | None = None) -> dict:
    """memory_band_<class> from rows that carry a (leave-one-source-out) prediction, at each
    class's conformal level (BAND_QUANTILE unless given)."""
    levels = levels or {}
    return {f"memory_band_{cls}": _round(band_value(
        [r["measured"] / r["predicted"] - 1 for r in _band_rows(loso_rows)
         if r["method_class"] == cls and r.get("predicted")],
        levels.get(cls, BAND_QUANTILE))) for cls in BAND_CLASSES}


def _memory_residuals(rows: list[dict], committed: dict, without: frozenset) -> list[tuple]:
    """(class, measured / predicted - 1) of each source's rows outside `without`, predicted
    with the allocator fraction fitted without that source and without `without` (memory
    reads no other constant)."""
    out = []
    measured = _band_rows(rows)
    for source in sorted({r["source"] for r in measured} - without):
        fraction = fit_allocator([r for r in rows if r["source"] not in without | {source}],
                                 committed)
        out += [(r["method_class"], r["measured"] / predict_memory(r, committed, fraction) - 1)
                for r in measured if r["source"] == source]
    return out


def _nested(rows: list[dict], committed: dict) -> list[tuple]:
    """For each source: (its band rows, the allocator fraction fitted without it, the other
    sources' residuals (class, value), each predicted without itself and without it)."""
    measured = _band_rows(rows)
    return [([r for r in measured if r["source"] == source],
             fit_allocator([r for r in rows if r["source"] != source], committed),
             _memory_residuals(rows, committed, frozenset({source})))
            for source in sorted({r["source"] for r in measured})]


def coverage(rows: list[dict], committed: dict, levels: dict | None = None,
             nested: list[tuple] | None = None) -> dict:
    """{class: (covered, runs)} over runs from sources left out of the fit: for each source,
    constants and band (at the class's level) fitted without it, its rows checked against
    the band's upper end."""
    levels = levels or {}
    nested = _nested(rows, committed) if nested is None else nested
    counts = {cls: [0, 0] for cls in BAND_CLASSES}
    for own, fraction, residuals in nested:
        for r in own:
            band = band_value([v for cls, v in residuals if cls == r["method_class"]],
                              levels.get(r["method_class"], BAND_QUANTILE))
            predicted = predict_memory(r, committed, fraction)
            counts[r["method_class"]][0] += r["measured"] <= predicted * (1 + band) * (1 + 1e-9)
            counts[r["method_class"]][1] += 1
    return {cls: tuple(v) for cls, v in counts.items()}


def band_levels(rows: list[dict], committed: dict, nested: list[tuple] | None = None) -> dict:
    """{class: the lowest of BAND_LEVELS at which the nested coverage of the class's runs
    reaches BAND_QUANTILE} (the highest level where none does)."""
    nested = _nested(rows, committed) if nested is None else nested
    out = {}
    for cls in BAND_CLASSES:
        for level in BAND_LEVELS:
            covered, runs = coverage(rows, committed, {cls: level}, nested)[cls]
            if covered >= BAND_QUANTILE * runs:
                break
        out[cls] = level
    return out


# Bands held wider than the procedure's refit by a recorded decision: the committed value
# stays while it is no narrower than the refit (then it is no drift), its `because` is
# written by hand. memory_band_full: the diffusion bands stand on it, and narrowing it on
# one OPT row would plan Wan2.1-14B at 480x832x81 on 8xH100 as fitting against its
# author's OOM report (docs/decisions.md, third integration).
HELD = ("memory_band_full",)
# The band of the frameworks no bench row measures enough to fit one (diffusers and torchtitan
# DiTs, Flow-Factory's RL): the widest band measured on the 16-bit LLM classes, a conservative
# stand-in whose because says so (kb/core/calibration.kb).
UNMEASURED = "memory_band_unmeasured"
UNMEASURED_FROM = ("full", "lora")
# The band of the classes no published run measures at all (Flow-Factory's diffusion and video
# RL): the unmeasured stand-in above plus the spread of the KB's modelled terms against the
# DiT trace grid (bench/data/traces/grid_dit.json): the worst |KB / trace - 1| of the sum of
# the training step's terms over every traced row (the band scales the total, so the total's
# spread is the one it must cover): the trace grid stands where the published runs are
# missing, and says so.
TRACED = "memory_band_traced"


def trace_spread() -> float:
    """The worst |KB / trace - 1| of the totals of bench/trace_dit_compare.py's rows."""
    from bench import trace_dit_compare
    summary = trace_dit_compare.summarise(trace_dit_compare.evaluate())
    return abs(summary["groups"]["total"]["worst"])


CLASS_WORDS = {"full": "full fine-tuning (freeze takes it)", "lora": "LoRA (OFT takes it)",
               "qlora": "QLoRA"}


def band_because(cls: str, covered: int, runs: int, level: float = BAND_QUANTILE) -> str:
    raised = "" if level <= BAND_QUANTILE else (
        f" (raised from {BAND_QUANTILE:.0%}, the lowest level whose runs from sources left out "
        f"are covered {BAND_QUANTILE:.0%}: one source's runs are not exchangeable with another's)")
    return (f"the memory model's error band for {CLASS_WORDS[cls]}: covered {covered} of {runs} "
            f"runs from sources left out of the fit (for each source, constants and band fitted "
            f"without it); set at the {level:.0%} conformal rank of measured / predicted "
            f"- 1 over the class's published runs, each predicted by constants fitted without "
            f"its source{raised}")


# ---- calibration.kb ----------------------------------------------------------------

LET = re.compile(r"^(let (\w+): (\w+) = )([0-9.e+-]+)( \w+)?( \{)$", re.M)


def committed_constants(text: str | None = None) -> dict:
    text = CALIBRATION.read_text() if text is None else text
    return {m.group(2): float(m.group(4)) for m in LET.finditer(text)}


BECAUSE = re.compile(r'^(let (\w+): .*\{\n  because ")([^"]*)(")', re.M)


def rewrite(values: dict, text: str | None = None, becauses: dict | None = None) -> str:
    text = CALIBRATION.read_text() if text is None else text

    def sub(m):
        if m.group(2) not in values:
            return m.group(0)
        return f"{m.group(1)}{values[m.group(2)]:g}{m.group(5) or ''}{m.group(6)}"

    def sub_because(m):
        return f"{m.group(1)}{becauses[m.group(2)]}{m.group(4)}" \
            if m.group(2) in (becauses or {}) else m.group(0)
    return BECAUSE.sub(sub_because, LET.sub(sub, text))


def committed_becauses(text: str | None = None) -> dict:
    text = CALIBRATION.read_text() if text is None else text
    return {m.group(2): m.group(3) for m in BECAUSE.finditer(text)}


def refit(rows: list[dict]) -> dict:
    """The constants and bands the procedure gives on these rows, and their drift from
    the committed values; "held": the HELD bands kept at their wider committed value,
    as (committed, refit)."""
    committed = committed_constants()
    constants = fit(rows, committed)
    nested = _nested(rows, committed)
    levels = band_levels(rows, committed, nested)
    constants.update(bands(loso(rows, committed), levels))
    held = {k: (committed[k], constants[k]) for k in HELD
            if committed.get(k) is not None and committed[k] >= constants[k]}
    constants.update({k: value for k, (value, _) in held.items()})
    covered = coverage(rows, committed, levels, nested)
    becauses = {f"memory_band_{cls}": band_because(cls, *covered[cls], levels[cls])
                for cls in BAND_CLASSES if f"memory_band_{cls}" not in held}
    constants[UNMEASURED] = max(constants[f"memory_band_{cls}"] for cls in UNMEASURED_FROM)
    constants[TRACED] = round(constants[UNMEASURED] + trace_spread(), 4)
    drift = {k: (committed.get(k), v) for k, v in constants.items()
             if committed.get(k) is None or abs(committed[k] - v) > DRIFT * abs(v)}
    stale = committed_becauses() != {**committed_becauses(), **becauses}
    return {"constants": constants, "drift": drift, "coverage": covered, "levels": levels,
            "becauses": becauses, "stale_because": stale, "held": held}


def residuals(loso_rows: list[dict]) -> tuple[list[tuple], list[tuple]]:
    """The leave-one-source-out memory residuals: (source, rows, MAPE %, rows under-predicted
    by more than 10 %) per source, worst MAPE first, and (id, class, metric, measured GiB,
    predicted GiB, measured / predicted) per row, most under-predicted first. Rows whose
    padded length is unknown are bounds and left out, as in the figures."""
    scored = [r for r in loso_rows if r.get("measured") and r.get("predicted")
              and not r["length_unknown"]]
    per_row = sorted(((r["id"], r["method_class"], r["metric"], round(r["measured"], 2),
                       round(r["predicted"], 2), round(r["measured"] / r["predicted"], 3))
                      for r in scored), key=lambda row: -row[5])
    groups: dict[str, list[dict]] = {}
    for r in scored:
        groups.setdefault(r["source"], []).append(r)
    per_source = sorted(((source, len(rs),
                          round(100 * sum(abs(r["predicted"] / r["measured"] - 1) for r in rs)
                                / len(rs), 1),
                          sum(r["predicted"] < 0.9 * r["measured"] for r in rs))
                         for source, rs in groups.items()), key=lambda s: (-s[2], s[0]))
    return per_source, per_row


def main() -> None:
    from bench import accuracy
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fitted constants")
    parser.add_argument("--residuals", action="store_true",
                        help="print the leave-one-source-out memory residuals per source and row")
    args = parser.parse_args()
    rows = accuracy.fit_rows(accuracy.evaluate())
    if args.residuals:
        per_source, per_row = residuals(loso(rows, committed_constants()))
        print("leave-one-source-out memory residuals (source, rows, MAPE %, under by > 10 %):")
        for entry in per_source:
            print("  {:<16}{:>4}{:>8}{:>4}".format(*entry))
        print("rows, most under-predicted first (id, class, metric, measured, predicted GiB, "
              "measured / predicted):")
        for entry in per_row:
            print("  {:<20}{:<7}{:<14}{:>8}{:>8}{:>8}".format(*entry))
    result = refit(rows)
    for name, value in result["constants"].items():
        old = result["drift"].get(name, (value,))[0]
        print(f"  {name:<24}{value:>12g}" + ("" if old == value else f"   (committed {old})"))
    for cls, (covered, runs) in result["coverage"].items():
        print(f"  band {cls:<6} covers {covered} of {runs} runs from sources left out of the fit "
              f"(conformal level {result['levels'][cls]:.0%})")
    if args.write and (result["drift"] or result["stale_because"]):
        CALIBRATION.write_text(rewrite(result["constants"], becauses=result["becauses"]))
        print(f"written to {CALIBRATION}")


if __name__ == "__main__":
    sys.exit(main())
