"""The KB's DiT activation constants, derived from the traced grid.

kb/core/diffusion.kb states diffusers' saved activations per family in bytes
per token and hidden unit: S per block and F once without checkpointing, C
per checkpointed block and R once with it, for frozen (LoRA) and trained
(full) weights. This module derives them from bench/data/traces/grid_dit.json
the way their `source` lines say, so a regenerated grid gives the new values
(tests/test_trace_dit_constants.py checks the KB against the committed grid):

- frozen: the LoRA rows' forward/backward transient; trained: the full rows'
  second micro-batch peak less the weights and the first one's gradients;
- S, C: one block more less the base (FLUX: each block kind apart, averaged
  over its 19 dual- and 38 single-stream blocks);
- F: the base less its blocks; R: the full-depth figure less C per block.
- the flux script's default adapter targets: their extra per dual-stream
  block and once, against the attention-only rows.

    python -m bench.trace_dit_constants [--data PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.trace.dit import DENOISERS

DATA = Path(__file__).resolve().parent / "data" / "traces" / "grid_dit.json"
# traced model -> (KB family, the row's shape)
MODELS = {"flux1-dev": ("flux1", "512x512"), "sd3.5-large": ("sd3.5", "512x512"),
          "wan2.1-t2v-14b": ("wan2.1", "480x832x17"), "qwen-image": ("qwen-image", "512x512")}
# the row traced (method, checkpointing) -> its (per-block let, once let)
ROWS = {("lora", "nogc"): ("dit_saved_per_block_frozen", "dit_fixed_frozen"),
        ("full", "nogc"): ("dit_saved_per_block_trained", "dit_fixed_trained"),
        ("lora", "gc"): ("dit_checkpoint_per_block_frozen", "dit_recompute_frozen"),
        ("full", "gc"): ("dit_checkpoint_per_block_trained", "dit_recompute_trained")}
LETS = [let for pair in ROWS.values() for let in pair]
# Qwen-Image's prompt is variable-length: its LoRA gc rows at two image sizes
# (same 128 text tokens) split the per-block figure into all tokens and text's extra
TEXT_SPLIT = {"qwen-image": ("qwen-image-lora-gc-b1-512x512", "qwen-image-lora-gc-b1-1024x1024")}
TEXT_LET = "dit_checkpoint_text_extra_frozen"


def _hidden(row: dict) -> int:
    """The denoiser's hidden size from the config the grid traced (bench/trace/dit.py)."""
    config = DENOISERS[row["model"]]["config"]
    return config["num_attention_heads"] * config["attention_head_dim"]


def _tokens(row: dict) -> int:
    h, w = row["height"] // 16, row["width"] // 16
    if row["family"] == "wan":  # video tokens; the text enters by cross-attention
        return ((row["frames"] - 1) // 4 + 1) * h * w
    return h * w + row["text_tokens"]


def _held(point: dict, trained: bool) -> int:
    if trained:
        return point["fb_peak_accum"] - point["weights"] - point["gradients"]
    return point["fb_transient"]


def _per_block_and_once(row: dict, trained: bool, hidden: int) -> tuple[dict, float, float]:
    """Per block kind, the weighted per-block figure, and what the base holds once."""
    unit = _tokens(row) * hidden
    points, blocks = row["points"], row["full_blocks"]
    if len(blocks) == 2:  # FLUX: one dual- and one single-stream block in the base
        (dual_key, dual_n), (single_key, single_n) = blocks.items()
        base = _held(points["1,1"], trained) / unit
        dual = _held(points["2,1"], trained) / unit - base
        single = _held(points["1,2"], trained) / unit - base
        kinds = {dual_key: dual, single_key: single}
        return kinds, (dual_n * dual + single_n * single) / (dual_n + single_n), base - dual - single
    (key, _n), = blocks.items()
    base = _held(points["2"], trained) / unit
    per = _held(points["3"], trained) / unit - base
    return {key: per}, per, base - 2 * per


def _text_split(small: dict, large: dict) -> tuple[float, float, float]:
    """(C over all tokens, the text tokens' extra, R) per hidden unit from two LoRA gc
    rows that differ in image tokens only: C*tokens + X*text equals each row's bytes
    per checkpointed block; R from the smaller row's full depth, as for the others."""
    hidden = _hidden(small)
    block = []
    for row in (small, large):
        (_key, _n), = row["full_blocks"].items()
        points = row["points"]
        block.append((_tokens(row), row["text_tokens"],
                      (_held(points["3"], False) - _held(points["2"], False)) / hidden))
    (t1, x1, b1), (t2, x2, b2) = block
    det = t1 * x2 - t2 * x1
    per, text = (b1 * x2 - b2 * x1) / det, (t1 * b2 - t2 * b1) / det
    blocks = sum(small["full_blocks"].values())
    once = (_held(small["full"], False) / hidden - blocks * (per * t1 + text * x1)) / t1
    return per, text, once


def derive(data: dict) -> dict[str, dict[str, float]]:
    """{let: {KB family: value}} from the grid's rows, plus the flux default-target extras."""
    rows = {r["id"]: r for r in data["cases"]}
    out: dict[str, dict[str, float]] = {let: {} for let in LETS}
    for model, (family, shape) in MODELS.items():
        for (method, gc), (per_let, once_let) in ROWS.items():
            row = rows[f"{model}-{method}-{gc}-b1-{shape}"]
            hidden, trained = _hidden(row), method == "full"
            _kinds, per, once = _per_block_and_once(row, trained, hidden)
            if gc == "gc":  # R: the full-depth figure less C per block
                blocks = sum(row["full_blocks"].values())
                once = _held(row["full"], trained) / (_tokens(row) * hidden) - blocks * per
            out[per_let][family], out[once_let][family] = per, once
    out[TEXT_LET] = {}
    for family, (small_id, large_id) in TEXT_SPLIT.items():
        per, text, once = _text_split(rows[small_id], rows[large_id])
        out["dit_checkpoint_per_block_frozen"][family] = per
        out["dit_recompute_frozen"][family] = once
        out[TEXT_LET][family] = text
    attention_only = rows["flux1-dev-lora-nogc-b1-512x512"]
    default_targets = rows["flux1-dev-lora_default-nogc-b1-512x512"]
    hidden = _hidden(attention_only)
    kinds_a, _, once_a = _per_block_and_once(attention_only, False, hidden)
    kinds_d, _, once_d = _per_block_and_once(default_targets, False, hidden)
    dual = next(iter(kinds_a))
    out["flux_default_targets_extra"] = {"per_dual_block": kinds_d[dual] - kinds_a[dual],
                                         "once": once_d - once_a}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trace_dit_constants",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    data = json.loads(args.data.read_text(encoding="utf-8"))
    for let, values in derive(data).items():
        print(f"{let:34s} " + ", ".join(f"{k} {v:.2f}" for k, v in values.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
