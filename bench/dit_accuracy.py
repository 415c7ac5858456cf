"""Memory and speed accuracy on published DiT training runs (bench/data/measurements/
dit_training.yaml): each row becomes a `kbsolve estimate` of the framework that trains it
here (torchtitan for torchtitan's FLUX runs, else diffusers' DreamBooth LoRA scripts, the
reference for LoRA runs of FLUX and SD3 as the pytorch framework is for LLM rows), and is
compared at the level the row measured.

A row is expressed only where its published settings map onto the framework's options; the
others are listed as skipped with the reason (quantized or fp8 bases, video models, full
fine-tunes outside torchtitan, optimizers and trainers the scripts do not have, settings
the source leaves out). Two mappings are the bench's own, both stated per row:
- a row that trained H x W with a modified script (the diffusers scripts crop squares) is
  estimated at the square of equal area, rounded to the 16-pixel token grid: the same tokens;
- trainers that encode the captions before the transformer loads (SimpleTuner, kohya's
  cache_text_encoder_outputs, precomputed embeddings) never hold the encoders beside the
  transformer, so their figure is compared with the estimate less its load-phase term.

Figures: MAPE and the share of rows under-predicted by more than 10 %, on the whole set and
leave-one-source-out (a source is the id's first token): each source's rows scaled by the
median measured/predicted ratio of the other sources, the one constant a calibration of
these terms would fit. Rows whose figure is a bound ('a bit more than 30G') count for
agreement only (predicted on the bound's side); OOM rows must be predicted not to fit.

    python -m bench.dit_accuracy [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from bench import accuracy

DATA = accuracy.OWN / "dit_training.yaml"
GIB = 2**30
LEVEL = {"allocated": "allocated", "active": "allocated", "reserved": "reserved",
         "nvidia-smi": "device", "unknown": "reserved"}
# The rows' names for cards the catalog spells otherwise; an unnamed card stands in as an
# 80 GB A100 for memory (memory does not depend on the card) and is left out of speed.
GPU_NAMES = {"unknown": "A100-80G-SXM"}
# The diffusers scripts' own target lists (kb/diffusers/options.kb lora_layers): the
# attention-only list matches to_k/to_q/to_v/to_out.0 wherever they sit; anything wider is
# the script's default list (the adapters are a few hundred MB at most either way).
ATTENTION = ("to_k", "to_out.0", "to_q", "to_v")
OPTIMIZERS = {"adamw": ("AdamW", "false"), "adamw-fused": ("AdamW", "false"),
              "adamw8bit": ("AdamW", "true"), "prodigy": ("prodigy", "false")}
PRECISIONS = {"bf16-true": "bf16", "bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp32": "no"}
# Text encoders the training process never holds beside the transformer.
ENCODED_APART = ("precomputed", "cached")
UNDER = 0.10
# The 16-bit script of a row's model (rules SCRIPT_FLUX and SCRIPT_SD3 hold the rest).
SCRIPTS = {"flux1-dev": "train_dreambooth_lora_flux.py"}


def diffusers_settings(row: dict, kb) -> tuple[dict, dict] | str:
    """The row as (query fields, diffusers settings), or why it cannot be expressed."""
    nf4 = row.get("base_precision") == "nf4"
    if row.get("base_precision") not in (None, "bf16", "nf4"):
        return f"{row['base_precision']} base: the modelled scripts train a 16-bit or NF4 base"
    if row["method"] not in ("lora", "qlora") or (row["method"] == "qlora") != nf4:
        return f"{row['method']} training: the diffusers scripts modelled are LoRA scripts"
    if nf4 and (row["model"] != "flux1-dev" or row.get("text_encoders") not in ENCODED_APART
                or tuple(sorted((row.get("lora") or {}).get("targets") or ())) != ATTENTION):
        return ("NF4: the only modelled NF4 script (flux_lora_quantization's miniature) trains "
                "FLUX.1 attention adapters on precomputed embeddings")
    optimizer = OPTIMIZERS.get(row.get("optimizer"))
    if optimizer is None:
        return f"optimizer {row.get('optimizer')} is not a flag value of the scripts"
    precision = PRECISIONS.get(row.get("precision"))
    if precision is None:
        return f"precision {row.get('precision')}"
    checkpointing = {"full": "true", "none": "false"}.get(row.get("gradient_checkpointing"))
    if checkpointing is None:
        return "gradient checkpointing not stated"
    batch = row.get("micro_batch")
    if not isinstance(batch, int) or batch not in (1, 2, 4, 8, 16):
        return f"micro-batch {batch} not stated or outside train_batch_size's domain"
    encoders = row.get("text_encoders", "unknown")
    if encoders == "unknown":
        return "where the text encoders live is not stated"
    side = _side(row.get("resolution"))
    if side is None:
        return f"resolution {row.get('resolution')} not stated"
    lora = row.get("lora") or {}
    targets = lora.get("targets")
    layers = "attn.to_k,attn.to_q,attn.to_v,attn.to_out.0" \
        if isinstance(targets, list) and tuple(sorted(targets)) == ATTENTION else "default"
    settings = {"mixed_precision": precision, "optimizer": optimizer[0],
                "use_8bit_adam": optimizer[1], "gradient_checkpointing": checkpointing,
                "train_batch_size": str(batch), "rank": str(lora.get("rank", 4)),
                "lora_layers": layers, "resolution": str(side),
                "gradient_accumulation_steps": str(row.get("grad_accum") or 1),
                "cache_latents": "true" if row.get("vae") == "cached" else "false",
                "train_text_encoder": "true" if row.get("train_text_encoder") else "false"}
    if row.get("max_sequence_length"):
        settings["max_sequence_length"] = str(row["max_sequence_length"])
    if nf4:
        settings["script"] = "train_dreambooth_lora_flux_miniature.py"
        del settings["lora_layers"], settings["train_text_encoder"]  # the script's fixed choices
    else:  # the 16-bit scripts, whatever the card (the KB's default picks NF4 on small ones)
        settings["script"] = SCRIPTS.get(row["model"], "train_dreambooth_lora_sd3.py")
    if encoders == "resident" and not row.get("train_text_encoder"):
        settings.update(dataset_name="captioned-dataset", caption_column="text")
    query = {"gpus": f"{row['gpus']}x{_gpu(kb, row)}", "model": row["model"],
             "framework": "diffusers", "headroom": 0.0,
             "global_batch": batch * (row.get("grad_accum") or 1) * row["gpus"]}
    return query, settings


def torchtitan_settings(row: dict, kb) -> tuple[dict, dict] | str:
    """torchtitan's FLUX runs as torchtitan settings, named as kb/torchtitan names them."""
    if "torchtitan" not in kb.frameworks:
        return "no torchtitan framework in the KB"
    names = {o.name for o in kb.options_of("torchtitan")}
    if row.get("text_encoders") != "sharded":
        return ("T5 resident unsharded or offloaded between uses: kb/torchtitan keeps it "
                "FSDP-sharded on the GPU (the engine's recommended setting)")
    settings = {"local_batch_size": str(row["micro_batch"]),
                "activation_checkpoint": row.get("gradient_checkpointing", "full"),
                "data_parallel_shard_degree": str((row.get("parallelism") or {}).get(
                    "dp_shard", row["gpus"]))}
    side = _side(row.get("resolution"))
    if side is not None:
        settings["img_size"] = str(side)
    if row.get("max_sequence_length"):
        settings["max_t5_encoding_len"] = str(row["max_sequence_length"])
    missing = sorted(set(settings) - names)
    if missing:
        return f"torchtitan options {', '.join(missing)} not in the KB"
    query = {"gpus": f"{row['gpus']}x{_gpu(kb, row)}", "model": row["model"],
             "framework": "torchtitan", "headroom": 0.0,
             "global_batch": row["micro_batch"] * row["gpus"]}
    if row.get("gpu_memory_gib"):  # the same part with the row's memory (a gpu spec file)
        query.update(gpus=str(row["gpus"]), gpu_spec=_spec(kb, _gpu(kb, row), row["gpu_memory_gib"]))
    return query, settings


def _spec(kb, gpu: str, memory_gib: float) -> str:
    """A GPU spec file: the catalog card's fields with the row's memory."""
    import tempfile
    import yaml
    fields = kb.catalog.gpu(gpu).model_dump(exclude_none=True)
    for key in ("aliases", "alias_note", "notes"):
        fields.pop(key, None)
    fields.update(name=f"{gpu}-{memory_gib:g}GiB", memory_gib=memory_gib,
                  source=f"bench: {gpu} with the row's memory")
    path = Path(tempfile.gettempdir()) / f"kbsolve-dit-{gpu}-{memory_gib:g}.yaml"
    path.write_text(yaml.safe_dump(fields), encoding="utf-8")
    return str(path)


def _side(resolution) -> int | None:
    """A square's side with the row's pixels: HxW of equal area on the 16-pixel token grid."""
    if not isinstance(resolution, str) or "x" not in resolution:
        return None
    try:
        h, w = (int(v) for v in resolution.lower().split("x"))
    except ValueError:
        return None
    return h if h == w else int(round(math.sqrt(h * w) / 16)) * 16


def _gpu(kb, row: dict) -> str:
    name = GPU_NAMES.get(row.get("gpu"), row.get("gpu"))
    entry = kb.catalog.find("gpu", name)
    return entry.name if entry else GPU_NAMES["unknown"]


def skip_reason(row: dict, model: dict, kb) -> str | None:
    if row.get("comparable") is False:
        return "not a per-step figure (time to a quality target)"
    if model.get("kind") == "video":
        return "video model: diffusers has no Wan trainer at the modelled commit"
    if kb.catalog.find("model", row["model"]) is None:
        return "model not in kb/catalog/models.yaml"
    if row.get("peak") is None and row.get("outcome") != "oom" and not _speed(row):
        return "no memory figure and no comparable speed"
    return None


def _speed(row: dict) -> float | None:
    """Seconds per optimizer step, where the published unit gives them."""
    tput = row.get("throughput") or {}
    value, unit = tput.get("value"), tput.get("unit")
    if not value:
        return None
    if unit == "s/step":
        return value
    if unit == "it/s":
        return 1 / value
    if unit == "min/700-steps":
        return value * 60 / 700
    return None


def evaluate(path: Path = DATA) -> dict:
    from kbsolve import api
    from kbsolve.diagnostics import KbError
    models, rows = accuracy.load_rows([path])
    kb = api.load_kb()
    results, skipped = [], []
    for row in rows:
        model = models.get(row.get("model"), {})
        reason = skip_reason(row, model, kb)
        mapped = reason or (torchtitan_settings(row, kb) if row.get("framework") == "torchtitan"
                            else diffusers_settings(row, kb))
        if isinstance(mapped, str):
            skipped.append((row["id"], mapped))
            continue
        query, settings = mapped
        try:
            estimate = api.estimate(query, settings, kb)
        except KbError as error:
            skipped.append((row["id"], f"error: {error.diagnostics[0].message}"))
            continue
        results.append(_compare(row, query, estimate))
    return {"rows": results, "skipped": skipped}


def _compare(row: dict, query: dict, estimate) -> dict:
    level = LEVEL.get(row.get("metric"), "reserved")
    levels = estimate.memory.per_gpu_gib.model_dump()
    terms = {i.term: i.gib for i in estimate.memory.breakdown if i.location == "gpu"}
    apart = row.get("text_encoders") in ENCODED_APART and query["framework"] == "diffusers"
    predicted = levels[level] - (terms.get("load_phase", 0.0) if apart else 0.0)
    out = {"id": row["id"], "source": row["id"].split("-")[0], "grade": row.get("grade"),
           "framework": query["framework"], "level": level, "predicted": round(predicted, 3),
           "measured": accuracy.measured_gib(row), "bound": row.get("bound"),
           "outcome": row.get("outcome"), "encoders_apart": apart,
           "fits": levels["device"] <= estimate.memory.gpu_gib, "breakdown": terms}
    step = _speed(row)
    if step and row.get("gpu") != "unknown" and not row.get("fp8_training"):
        out.update(measured_step_s=step, predicted_step_s=estimate.speed.step_time_s)
    return out


def _figures(rows: list[dict], scale: dict[str, float] | None = None) -> dict:
    """MAPE and the share under-predicted by more than 10 % on point rows; bound and OOM
    agreement. `scale` (per source) multiplies the prediction (leave-one-source-out)."""
    def pred(r):
        return r["predicted"] * (scale or {}).get(r["source"], 1.0)
    point = [r for r in rows if r["measured"] and not r["bound"]]
    errors = [(pred(r) - r["measured"]) / r["measured"] for r in point]
    bounds = [r for r in rows if r["measured"] and r["bound"]]
    bound_ok = [(pred(r) >= r["measured"]) if r["bound"] == "lower" else
                (pred(r) <= r["measured"]) for r in bounds]
    ooms = [r for r in rows if r["outcome"] == "oom"]
    speed = [r for r in rows if r.get("measured_step_s")]
    speed_err = [abs(r["predicted_step_s"] - r["measured_step_s"]) / r["measured_step_s"]
                 for r in speed]
    return {"rows_compared": len(point),
            "mape_pct": round(100 * statistics.mean(abs(e) for e in errors), 1) if errors else None,
            "under_10pct_share": round(sum(e < -UNDER for e in errors) / len(errors), 3)
            if errors else None,
            "within_25pct_share": round(sum(abs(e) <= 0.25 for e in errors) / len(errors), 3)
            if errors else None,
            "bound_rows": len(bounds),
            "bound_agreement_pct": round(100 * sum(bound_ok) / len(bounds), 1) if bounds else None,
            "oom_rows": len(ooms),
            "oom_agreement_pct": round(100 * sum(not r["fits"] for r in ooms) / len(ooms), 1)
            if ooms else None,
            "speed_rows": len(speed),
            "speed_mape_pct": round(100 * statistics.mean(speed_err), 1) if speed_err else None}


def loso_scales(rows: list[dict]) -> dict[str, float]:
    """Per source: the median measured/predicted ratio of the other sources' point rows."""
    point = [r for r in rows if r["measured"] and not r["bound"] and r["predicted"] > 0]
    scales = {}
    for source in sorted({r["source"] for r in rows}):
        others = [r["measured"] / r["predicted"] for r in point if r["source"] != source]
        scales[source] = statistics.median(others) if others else 1.0
    return scales


def summarise(result: dict) -> dict:
    """Figures for every compared row and per framework (diffusers, torchtitan)."""
    rows = result["rows"]
    frameworks = {}
    for name in sorted({r["framework"] for r in rows}):
        mine = [r for r in rows if r["framework"] == name]
        frameworks[name] = {"whole": _figures(mine), "loso": _figures(mine, loso_scales(mine)),
                            "sources": sorted({r["source"] for r in mine})}
    return {"whole": _figures(rows), "loso": _figures(rows, loso_scales(rows)),
            "frameworks": frameworks, "sources": sorted({r["source"] for r in rows}),
            "rows": [{k: r[k] for k in ("id", "framework", "level", "measured", "predicted",
                                        "bound", "outcome", "fits") if k in r}
                     | ({"measured_step_s": r["measured_step_s"],
                         "predicted_step_s": round(r["predicted_step_s"], 3)}
                        if r.get("measured_step_s") else {}) for r in rows],
            "skipped": [{"id": i, "reason": why} for i, why in result["skipped"]]}


def measure() -> dict:
    return summarise(evaluate())


def _print(summary: dict) -> None:
    for name in ("whole", "loso"):
        print(f"{name}: {summary[name]}")
    for framework, figures in summary["frameworks"].items():
        for name in ("whole", "loso"):
            print(f"{framework} {name}: {figures[name]}")
    print("\nrows:")
    for r in summary["rows"]:
        m = "n/a" if r["measured"] is None else f"{r['measured']:.2f}"
        speed = (f"  step {r['measured_step_s']:.2f} s vs {r['predicted_step_s']:.2f} s"
                 if "measured_step_s" in r else "")
        print(f"  {r['id']:<44} {r['framework']:<10} {r['level']:<9} measured {m:>6} "
              f"predicted {r['predicted']:6.2f}{' (' + r['bound'] + ' bound)' if r['bound'] else ''}"
              f"{' OOM' if r['outcome'] == 'oom' else ''}{speed}")
    print("\nskipped:")
    for s in summary["skipped"]:
        print(f"  {s['id']:<44} {s['reason']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    summary = measure()
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        _print(summary)


if __name__ == "__main__":
    main()
