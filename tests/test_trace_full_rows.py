"""Issue 23 (gemma2): the full-tuning KTO, RM and freeze rows against their
retrace (bench/data/traces/grid_full_retraced.json) and the extrapolation against
a full-depth trace of Gemma 2 (bench/data/traces/full_depth.json).

- The tracer kept every recomputed layer's input to the end of the step
  (FlopCounterMode's module hooks inside reentrant checkpointing's recompute):
  step.no_hooks_without_grad registers none inside a backward now.
- grid_kto.json's KTO rows were traced before the step's own peak (traceB):
  gemma2-9b KTO full at 2 x 2048 read 162.9 GiB at 42 layers, the step's own peak
  190.7 (the KB: 189.3).
- Freeze tuning checkpoints only its trained layers and saves nothing before
  them (kb: checkpointed_layers, grad_path_layers).
"""

import json

import pytest

from bench import trace_compare
from bench.trace import __main__ as trace_main
from bench.trace import grid

GIB = 2**30
FULL_DEPTH = trace_compare.DATA.with_name("full_depth.json")


def _retraced() -> dict:
    return json.loads(trace_compare.FULL_RETRACED_DATA.read_text(encoding="utf-8"))


def _originals() -> dict[str, dict]:
    """The rows the retrace replaces, as grid.json and grid_kto.json hold them."""
    rows = {}
    for path in (trace_compare.DATA, trace_compare.KTO_DATA):
        rows.update({c["id"]: c for c in json.loads(path.read_text(encoding="utf-8"))["cases"]})
    return rows


def _tokens(case: dict) -> int:
    """Tokens through the checkpointed policy forward (RM: chosen and rejected rows)."""
    return case["batch"] * case["seq"] * (2 if case["task"] == "rm" else 1)


def _step_excess(figures: dict) -> int:
    """What the step's own peak holds beyond weights, gradients, states and the
    foreach temporaries (one per trained weight: the gradients' bytes)."""
    return figures["step_peak"] - figures["weights"] - 2 * figures["gradients"] - figures["optimizer_states"]


def test_the_retrace_is_whole_and_moves_only_what_the_hooks_kept():
    data = _retraced()
    old = _originals()
    ids = {c["id"] for c in data["cases"]}
    assert data["complete"] and not data["failed"] and len(ids) == 60
    assert {c["task"] for c in data["cases"] if c["method"] == "full"} == {"kto", "rm"}
    assert sum(c["method"] == "freeze" for c in data["cases"]) == 20
    assert all(c["cuda_autocast"] is True for c in data["cases"])
    for case in data["cases"]:
        for depth, figures in case["depths"].items():
            before = old[case["id"]]["depths"][depth]
            for key in ("weights", "gradients", "optimizer_states", "flops"):
                assert figures[key] == before[key], (case["id"], depth, key)
            # the hooks only ever kept tensors alive
            assert figures["fb_peak"] <= before["fb_peak"], (case["id"], depth)


def test_the_step_holds_no_recomputed_layer_input():
    """Full tuning with checkpointing: the step's own peak grew with depth by about
    two fp32 hidden vectors per token and layer beyond W + 2G + S (the recompute's
    detached inputs the trackers kept: traceB's 'not itemised' 4-8 h); retraced,
    by nothing, but for Gemma 2's eager layers, which keep 4 bytes per batch row
    and score element (b x s x s, mask-sized: not found)."""
    old = _originals()
    rows = [c for c in _retraced()["cases"] if c["method"] == "full" and c["checkpointing"]]
    assert len(rows) == 40
    for case in rows:
        layer_input = _tokens(case) * grid.case_config(case)["hidden_size"] * 4  # fp32 residual stream
        new_slope = _step_excess(case["depths"]["2"]) - _step_excess(case["depths"]["1"])
        if case["model"] == "gemma2-9b":
            assert new_slope == 4 * _tokens(case) * case["seq"], case["id"]
        else:
            assert abs(new_slope) < layer_input / 64, (case["id"], new_slope / layer_input)
        was = old[case["id"]]["depths"]
        old_slope = _step_excess(was["2"]) - _step_excess(was["1"])
        if all(f["step_peak"] > f["fb_peak"] for f in was.values()):  # the step's own peak before too
            assert old_slope >= 0.99 * layer_input, (case["id"], old_slope / layer_input)


def test_gemma2_kto_full_peaks_at_its_optimizer_step():
    """The row issue 23 named (+16.2 %): at 42 layers the step (five times the
    fp32 weights and the bf16 reference) is the peak, not the forward/backward
    with the optimizer states the cumulative step_peak had extrapolated."""
    case = next(c for c in _retraced()["cases"] if c["id"] == "gemma2-9b-kto-full-gc-eager-b2-s2048")
    for figures in case["depths"].values():  # at 1 and 2 layers the forward/backward is higher
        assert figures["step_peak"] < figures["fb_peak"]
    full = case["full"]
    assert full["peak"] == full["step_peak"] > full["fb_peak"] + full["optimizer_states"]
    assert full["peak"] / GIB == pytest.approx(190.67, abs=0.01)
    rows = {r["id"]: r for r in trace_compare.evaluate(trace_compare.DATA, models=("gemma2-9b",))["rows"]}
    row = rows[case["id"]]
    assert row["case"] == case  # trace_compare takes the retrace over grid_kto.json's row
    assert abs(row["errors"]["total"]) < 0.03, row["errors"]["total"]


def test_kb_follows_the_retraced_full_and_freeze_rows():
    """Against the retrace (total, KB / trace - 1): freeze within 3 % with only its
    trained layers checkpointed and its recompute beyond the loss path (was +7.2
    to +9.2 %); KTO full within 1 % where the step is the peak (gemma2-9b was
    +16.2 %); RM full (was -7.1 to -9.6 %) under by less than 5 %: its step still
    holds the unused LM head's branch (autocast's bf16 copy of the fp32 head,
    under Gemma 2 the soft-cap's tanh output), which a run frees with the
    logits (not itemised, not settled whether the trackers keep it); every row
    within 6 % (the forward/backward phase of small models' preference rows, KB
    under, is left)."""
    cases = {c["id"]: c for c in _retraced()["cases"]}
    models = tuple(sorted({c["model"] for c in cases.values()}))
    rows = [r for r in trace_compare.evaluate(trace_compare.DATA, models=models)["rows"] if r["id"] in cases]
    assert len(rows) == len(cases) == 60

    def at_step(row):
        return row["case"]["full"]["peak"] == row["case"]["full"]["step_peak"]

    bounds = []
    for row in rows:
        error, case = row["errors"]["total"], row["case"]
        assert abs(error) < 0.06, (row["id"], error)
        if case["method"] == "freeze":
            assert abs(error) < 0.03, (row["id"], error)
        elif case["task"] == "kto" and at_step(row):
            assert abs(error) < 0.01, (row["id"], error)
        elif case["task"] == "rm" and at_step(row):
            assert -0.05 < error < 0, (row["id"], error)
        bounds.append(at_step(row))
    assert sum(bounds) >= 35  # most rows peak at the step


DEPTH_CHECK = trace_compare.DATA.with_name("depth_check.json")


def test_gemma2_kto_extrapolates_to_a_deeper_trace_and_peaks_at_the_step():
    """Gemma 2 KTO full at 2 x 2048 (42 layers) traced at 8 and 20 layers too
    (the full depth did not finish under the shared machine's load): every
    figure extrapolated from depths 1 and 2 is within 1 % of them, the states
    exactly. At 1, 2 and 8 layers the forward/backward with the states peaks
    higher; the step's line is steeper (five fp32 copies of each layer's weights
    and the reference's bf16 copy) and crosses it at 16 layers, and the trace at
    20 peaks at the step: at 42 the step is the peak, 17 % above the
    forward/backward's. grid_kto.json's cumulative step_peak had followed the
    forward/backward's slope to 42 layers."""
    data = json.loads(DEPTH_CHECK.read_text(encoding="utf-8"))
    assert data["environment"]["transformers"] == "5.8.0" and not data["failed"]
    case = next(c for c in data["cases"] if c["id"] == "gemma2-9b-kto-full-gc-eager-b2-s2048")
    grid_row = next(c for c in _retraced()["cases"] if c["id"] == case["id"])
    depths = case["depths"]
    assert {d: depths[d] for d in ("1", "2")} == grid_row["depths"] and case["full"] == grid_row["full"]
    deeper = sorted((int(d) for d in depths if int(d) > 2))
    assert deeper and deeper[0] >= 8
    for layers in deeper:
        traced = depths[str(layers)]
        line = trace_main.extrapolate(dict(depths["1"], layers=1), dict(depths["2"], layers=2), layers)
        for key in ("weights", "gradients", "optimizer_states"):
            assert line[key] == pytest.approx(traced[key], rel=1e-6), (layers, key)
        for key in ("fb_peak", "step_peak", "peak"):
            assert line[key] == pytest.approx(traced[key], rel=0.01), (layers, key)
    # the two phases' lines: the steady forward/backward peak and the step's
    low, high = depths["1"], depths["2"]

    def phases(layers):
        line = trace_main.extrapolate(dict(low, layers=1), dict(high, layers=2), layers)
        return line["fb_peak"] + line["optimizer_states"], line["step_peak"]

    for d in ("1", "2", "8"):
        assert depths[d]["fb_peak"] + depths[d]["optimizer_states"] > depths[d]["step_peak"], d
    crossing = next(n for n in range(1, 43) if phases(n)[1] > phases(n)[0])
    assert 8 < crossing < 20
    # traced past the crossing, the step is the peak, as the lines say
    assert depths["20"]["peak"] == depths["20"]["step_peak"] > depths["20"]["fb_peak"] + depths["20"]["optimizer_states"]
    fb_phase, step_phase = phases(42)
    assert step_phase > 1.15 * fb_phase and grid_row["full"]["peak"] == step_phase
