"""Memory and speed accuracy against published measurements: the shared dev set
(../shared/data/memory_measurements.yaml) and the project's own rows in the same format
(bench/data/measurements/*.yaml).

Each LLM row becomes a `kbsolve estimate` of the generic `pytorch` framework with
the row's settings, compared at the level the row measured (allocated, reserved
or device), and its throughput with the estimate's tokens/s per GPU. Every figure
is given twice: with the committed calibration (kb/core/calibration.kb) on the
whole set, and leave-one-source-out (each source's rows predicted by constants
fitted without them; bench/fit.py). Beside it: two public baselines on the same
rows, weights x 4 (accelerate's estimate-memory rule of thumb for Adam training)
and model states only (DeepSpeed's formula). Rows the model cannot express
(adapters other than LoRA, diffusion and video runs) are counted and listed as
skipped.

    python bench/accuracy.py [--data PATH ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

SHARED = Path(os.environ.get("KBSOLVE_SHARED_DIR") or
              Path(__file__).resolve().parents[2] / "shared")  # as the tests find it
DATA = SHARED / "data" / "memory_measurements.yaml"
OWN = Path(__file__).resolve().parent / "data" / "measurements"
GIB = 2**30
# The data's GPU names that are not catalog names or aliases; others resolve in the catalog.
GPU_NAMES = {"A100-40GB": "A100-40G-SXM", "A100-80GB": "A100-80G-SXM", "H100-80GB": "H100-SXM",
             "unknown": "A100-80G-SXM"}
LEVEL = {"allocated": "allocated", "active": "allocated", "reserved": "reserved",
         "reserved-p99": "reserved", "nvidia-smi": "device", "unknown": "reserved"}
TARGETS = {
    ("q_proj", "v_proj"): "qv",
    ("k_proj", "q_proj", "v_proj"): "qkv",
    ("k_proj", "o_proj", "q_proj", "v_proj"): "qkvo",
    ("down_proj", "gate_proj", "up_proj"): "mlp",
    ("down_proj", "gate_proj", "k_proj", "q_proj", "up_proj", "v_proj"): "qkv_mlp",
    ("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"): "all",
    ("down_proj", "gate_proj", "o_proj", "q_proj", "up_proj", "v_proj"): "all",
    ("down_proj", "gate_proj", "k_proj", "lm_head", "o_proj", "q_proj", "up_proj",
     "v_proj"): "all_lm_head",
}
METHODS = {"lora": "lora", "dora": "lora", "qlora": "qlora", "full": "full"}
OPTIMIZERS = {"adamw": "adamw", "adamw-fused": "adamw", "adamw8bit": "adamw8bit",
              "paged-adamw": "paged-adamw", "paged-adamw8bit": "paged-adamw8bit",
              "cpu-offload-adamw": "cpu-offload-adamw"}
SHARDING = {"none": "none", "ddp": "none", "fsdp-full-shard": "fsdp", "zero3": "fsdp",
            "fsdp-shard-grad-op": "shard-grad-op", "zero2": "shard-grad-op",
            "fsdp-full-shard+cpu-offload": "fsdp-offload", "zero3+offload-all": "fsdp-offload"}
# What a source's training script does that its table rows do not say, read from the
# script itself. LitGPT finetune/lora.py @8641822: FSDPStrategy(auto_wrap_policy={Block})
# puts the LoRA adapters in the same unit as the frozen block weights, and gradient
# accumulation runs under fabric.no_backward_sync (FSDP no_sync).
# torchtune (2024 recipes): TransformerDecoder.forward returns self.output(h).float(), and the
# recipes shift the fp32 logits with .contiguous() before the loss.
SCRIPT_SETTINGS = {("litgpt", "fsdp"): {"fsdp_no_sync": "true", "fsdp_mixed_units": "true"},
                   ("torchtune", "none"): {"logits_fp32": "true"},
                   ("torchtune", "fsdp"): {"logits_fp32": "true"},
                   ("torchtune", "fsdp-offload"): {"logits_fp32": "true"}}


# Scripts on transformers' models before v4.46 (rows published before October 2024):
# LlamaForCausalLM.forward upcast the logits it returns (`logits = logits.float()`, removed in
# v4.46), and the loss shifts them with .contiguous() (modeling_llama.py, v4.31-v4.45).
HF_FP32_LOGITS = {"llama-recipes", "atorch", "fms-hf-tuning", "accelerate",
                  "hf-trainer", "openrlhf"}
# Scripts whose bf16-mixed is FSDP's MixedPrecision (param_dtype bf16), not autocast:
# torchtitan (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), fms-fsdp and
# llm-foundry (FSDP mixed_precision bf16 param dtype), NeMo AutoModel (FSDP2 MixedPrecisionPolicy);
# DeepSpeed's bf16 mode (any zero* row) keeps bf16 weights beside fp32 masters.
OWN_MIXED_PRECISION = {"torchtitan", "fms-fsdp", "llm-foundry", "nemo-automodel"}


def script(row: dict) -> str:
    """The training program: the row's `framework`, else its source (the id's first token)."""
    return row.get("framework") or row["id"].split("-")[0]


def model_spec(name: str, m: dict) -> dict:
    return {"name": name, "kind": "llm", "family": name.split("-")[0], "model_type": name,
            "hf_id": m.get("hf_id"), "params_b": m["params_b"], "layers": m["num_hidden_layers"],
            "hidden": m["hidden_size"], "heads": m["num_attention_heads"],
            "kv_heads": m.get("num_key_value_heads", m["num_attention_heads"]),
            "intermediate": m.get("intermediate_size", 4 * m["hidden_size"]),
            "vocab": m["vocab_size"], "tied_embeddings": bool(m.get("tie_word_embeddings")),
            "max_positions": m.get("max_position_embeddings", 2048),
            "mlp": "swiglu" if m.get("mlp") == "swiglu" else "gelu",
            **({"experts": m["num_experts"], "experts_active": m["num_experts_per_tok"],
                "moe_intermediate": m.get("moe_intermediate_size", m.get("intermediate_size"))}
               if m.get("num_experts") else {}),
            "source": "shared/data/memory_measurements.yaml"}


def _math_attention(row: dict, model: dict) -> bool:
    """Eager attention, or SDPA with fewer K/V heads than Q heads where the script does not
    expand them: PyTorch < 2.5 SDPA then falls back to its math kernel (flash and
    memory-efficient kernels need equal head counts), and LitGPT @8641822 skips the K/V
    expansion for multi-query models (lit_gpt/model.py, CausalSelfAttention.forward)."""
    if row.get("attention") == "eager":
        return True
    return row["id"].startswith("litgpt") and model.get("num_key_value_heads") == 1


def settings_for(row: dict, model: dict | None = None) -> dict | None:
    """The row as pytorch-framework settings, or None when it cannot be expressed."""
    method = METHODS.get(row["method"])
    sharding = SHARDING.get(row.get("distributed", "none"))
    optimizer = OPTIMIZERS.get(row.get("optimizer"))
    if None in (method, sharding, optimizer) or not row.get("micro_batch"):
        return None
    out = {"method": method, "precision": row.get("precision", "bf16-true"),
           "optimizer": optimizer,
           "optimizer_in_backward": str(bool(row.get("optimizer_in_backward"))).lower(),
           "gradient_checkpointing": {"none": "none", "selective": "selective"}.get(
               row.get("gradient_checkpointing"), "full"),
           "loss": "ce" if row.get("loss") in (None, "ce") else "chunked-ce",
           "micro_batch": str(row["micro_batch"]), "sharding": sharding}
    out.update(SCRIPT_SETTINGS.get((script(row), sharding), {}))
    if script(row) in HF_FP32_LOGITS and out["loss"] == "ce":
        out["logits_fp32"] = "true"
    if out["precision"] == "bf16-mixed" and sharding != "none" and (
            script(row) in OWN_MIXED_PRECISION or row.get("distributed", "").startswith("zero")):
        out["fsdp_mixed_precision"] = "true"
    out["packing"] = "false" if row.get("packing") is False else "true"
    out["compile"] = "true" if row.get("compile") is True else "false"
    if row["method"] == "dora":
        out["dora"] = "true"
    out["attention"] = ("eager" if row.get("attention") == "eager" else "math") \
        if _math_attention(row, model or {}) else "flash"
    if sharding != "none" and "custom_sharded_layers" in row.get("notes", ""):
        out["fsdp_root_embeddings"] = "false"
    if method == "qlora":
        library = (row.get("quantization") or {}).get("library", "")
        out["quant_library"] = "torchao" if library.startswith("torchao") else "bnb"
    if method != "full":
        lora = row.get("lora") or {}
        targets = lora.get("targets")
        key = "all" if targets in (None, "all-linear") else TARGETS.get(tuple(sorted(targets)))
        if key is None:
            return None
        out.update(lora_rank=str(lora.get("rank", 8)), lora_targets=key,
                   lora_dropout=str(bool(lora.get("dropout", 0.05))).lower())
    return out


def length_unknown(row: dict) -> bool:
    """Batches padded to a length the row does not give: packing not stated, or a seq_len
    that is only the truncation limit of shorter samples. The estimate at seq_len is then an
    upper bound: such rows count for under-prediction and fit, not for MAPE or speed."""
    return row.get("packing") == "unknown" or (
        row.get("packing") is False and "only the truncation limit" in row.get("seq_len_note", ""))


def _gpu_name(kb, name: str) -> str | None:
    name = GPU_NAMES.get(name, name)
    entry = kb.catalog.find("gpu", name)
    return entry.name if entry else None


def measured_gib(row: dict) -> float | None:
    if row.get("peak") is None:
        return None
    scale = {"GB": 1e9, "GiB": GIB, "MB": 1e6, "MiB": 2**20}[row.get("unit", "GB")]
    return row["peak"] * scale / GIB


def data_files() -> list[Path]:
    return [DATA] + sorted(OWN.glob("*.yaml"))


def load_rows(paths: list[Path]) -> tuple[dict, list[dict]]:
    """Models and measurements of every file; a model key names one model everywhere."""
    models, rows = {}, []
    for path in paths:
        data = yaml.safe_load(path.read_text()) or {}
        for key, model in (data.get("models") or {}).items():
            models.setdefault(key, model)
        rows += data.get("measurements") or []
    return models, rows


def evaluate(paths: list[Path] | Path | None = None) -> dict:
    from kbsolve import api
    from kbsolve.diagnostics import KbError
    if isinstance(paths, Path):
        paths = [paths]
    models, measurements = load_rows(paths or data_files())
    kb = api.load_kb()
    results, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for row in measurements:
            if row.get("model") not in models:
                skipped.append((row["id"], "unknown model", ""))
                continue
            model = models[row["model"]]
            settings = settings_for(row, model) if model.get("kind") == "llm" else None
            if settings is None or row.get("duplicate_of"):
                skipped.append((row["id"], row.get("method"), model.get("kind")))
                continue
            spec = Path(tmp) / f"{row['model']}.yaml"
            if not spec.exists():
                spec.write_text(yaml.safe_dump(model_spec(row["model"], model)))
            gpu = _gpu_name(kb, row.get("emulated_gpu") or row["gpu"])
            if gpu is None:
                skipped.append((row["id"], f"unknown GPU {row['gpu']}", ""))
                continue
            query = {"gpus": f"{row['gpus']}x{gpu}", "model": str(spec), "framework": "pytorch",
                     "seq_len": row.get("seq_len") or 2048, "headroom": 0.0}
            try:
                estimate = api.estimate(query, settings, kb)
            except KbError as error:
                skipped.append((row["id"], f"error: {error.diagnostics[0].message}", ""))
                continue
            results.append(_compare(row, estimate, model))
    return {"rows": results, "skipped": skipped}


def _compare(row: dict, estimate, model: dict) -> dict:
    level = LEVEL.get(row.get("metric"), "allocated")
    levels = estimate.memory.per_gpu_gib.model_dump()
    predicted = levels[level]
    params = model["params_b"] * 1e9
    trainable = params if row["method"] == "full" else 0.01 * params
    weight_bytes = 0.516 if row["method"] == "qlora" else 2
    shards = row["gpus"] if row.get("distributed", "none").startswith("fsdp") else 1
    accelerate = params * 2 * 4 / GIB
    deepspeed = (params * weight_bytes + trainable * 16) / shards / GIB
    out = {"id": row["id"], "source": row["id"].split("-")[0], "grade": row.get("grade"),
           "method_class": METHODS.get(row["method"]), "gpus": row["gpus"],
           "length_unknown": length_unknown(row),
           "levels": levels, "breakdown": {i.term: i.gib for i in estimate.memory.breakdown
                                           if i.location == "gpu"},
           "step_time_s": estimate.speed.step_time_s,
           "speed_terms": {k: v for k, v in estimate.speed.terms.items()
                           if k not in FACTOR_TERMS(estimate)},
           "speed_factors": {k: v for k, v in estimate.speed.terms.items()
                             if k in FACTOR_TERMS(estimate)},
           "metric": row.get("metric"),
           "level": level, "measured": measured_gib(row), "predicted": round(predicted, 3),
           "accelerate": round(accelerate, 3), "deepspeed": round(deepspeed, 3),
           "outcome": row.get("outcome"), "gpu_gib": estimate.memory.gpu_gib,
           "predicted_fits": levels["device"] <= estimate.memory.gpu_gib}
    measured_tput = tokens_per_s_gpu(row, model, estimate.memory.gpu_gib and _peak(estimate))
    if measured_tput and row.get("packing") is True:  # padded batches: tokens per step unknown
        out["tokens_per_s_gpu"] = measured_tput
        out["predicted_tokens_per_s_gpu"] = (estimate.speed.tokens_per_s or 0) / row["gpus"]
    return out


def tokens_per_s_gpu(row: dict, model: dict, peak_flops: float) -> float | None:
    """The row's published throughput as tokens/s per GPU, where its unit allows.

    A per-GPU figure that would need more than the GPU's peak (at 4N FLOPs per token with
    a frozen base, 6N for full training, no recompute counted) is the total over the GPUs:
    torchtune's distributed recipes all-reduce num_tokens over the ranks and then log
    num_tokens / time_per_step as tokens_per_second_per_gpu (recipes/
    lora_finetune_distributed.py and full_finetune_distributed.py, 2024; later versions
    divide by the world size)."""
    tput = row.get("throughput") or {}
    value, unit = tput.get("value"), tput.get("unit")
    if not value:
        return None
    if unit == "tok/s":
        return value / row["gpus"]
    if unit == "tflops/gpu" and tput.get("flops_per_token"):
        return value * 1e12 / tput["flops_per_token"]
    if unit != "tok/s/gpu":
        return None
    flops_per_token = (6 if row["method"] == "full" else 4) * model["params_b"] * 1e9
    if row["gpus"] > 1 and value * flops_per_token > peak_flops:
        return value / row["gpus"]
    return value


def _peak(estimate) -> float:
    """The GPU's dense 16-bit peak in FLOP/s, from the catalog."""
    from kbsolve import api
    gpu = api.load_kb().catalog.gpu(estimate.gpu)
    return (gpu.bf16_tflops or gpu.fp16_tflops) * 1e12


def FACTOR_TERMS(estimate) -> set:
    """Speed terms that multiply the step time (unitless), not add to it."""
    return {k for k in estimate.speed.terms if k in _factor_names()}


def _factor_names() -> set:
    global _FACTORS
    if _FACTORS is None:
        from kbsolve import api
        kb = api.load_kb()
        _FACTORS = {t.name for t in kb.speed.values()
                    if t.kind == "factor" and t.framework == "pytorch"}
    return _FACTORS


_FACTORS = None


def _mape(pairs) -> float | None:
    pairs = [(m, p) for m, p in pairs if m]
    return round(100 * statistics.mean(abs(p - m) / m for m, p in pairs), 1) if pairs else None


def _spearman(xs, ys) -> float | None:
    if len(xs) < 3:
        return None

    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        r = [0.0] * len(values)
        for rank, i in enumerate(order):
            r[i] = rank
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return round(1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1)), 3)


PREDICTORS = ("predicted", "accelerate", "deepspeed")
GRADES = ("A", "B")  # the targets are on grades A and B


def _figures(rows: list[dict]) -> dict:
    """MAPE and share under-predicted by more than 10 %, for kbsolve and each baseline."""
    out = {}
    for name in PREDICTORS:
        out[name] = {"mape_pct": _mape((r["measured"], r[name]) for r in rows),
                     "under_10pct_share": round(sum(r[name] < 0.9 * r["measured"] for r in rows)
                                                / len(rows), 3) if rows else None}
    return out


def fit_rows(result: dict) -> list[dict]:
    """The rows the fit and the figures use: grades A and B."""
    return [r for r in result["rows"] if r["grade"] in GRADES]


def _speed_figures(rows: list[dict]) -> dict:
    tput = [r for r in rows if r.get("tokens_per_s_gpu") and r.get("predicted_tokens_per_s_gpu")]
    errors = sorted(abs(r["predicted_tokens_per_s_gpu"] / r["tokens_per_s_gpu"] - 1) for r in tput)
    return {"throughput_rows": len(tput),
            "spearman": _spearman([r["tokens_per_s_gpu"] for r in tput],
                                  [r["predicted_tokens_per_s_gpu"] for r in tput]),
            "median_abs_error_pct": round(100 * statistics.median(errors), 1) if errors else None}


def _fit_figures(rows: list[dict]) -> dict:
    """OOM rows predicted to overflow, and rows that ran predicted to fit, at the band's
    upper end."""
    oom = [r for r in rows if r["outcome"] == "oom"]
    ran = [r for r in rows if r["outcome"] == "fits"]
    return {"oom_rows": len(oom),
            "oom_agreement_pct": round(100 * sum(not r["predicted_fits"] for r in oom)
                                       / len(oom), 1) if oom else None,
            "ran_rows": len(ran),
            "ran_predicted_to_fit_pct": round(100 * sum(r["predicted_fits"] for r in ran)
                                              / len(ran), 1) if ran else None}


def _all_figures(rows: list[dict]) -> dict:
    measured = [r for r in rows if r["measured"] is not None and not r["length_unknown"]]
    bounds = [r for r in rows if r["measured"] is not None and r["length_unknown"]]
    return {"rows_compared": len(measured), **_figures(measured)["predicted"],
            "bound_rows": len(bounds),
            "bound_rows_under_10pct": sum(r["predicted"] < 0.9 * r["measured"] for r in bounds),
            **_fit_figures(rows), **_speed_figures(rows)}


def summarise(result: dict) -> dict:
    from bench import fit
    graded = fit_rows(result)
    committed = fit.committed_constants()
    whole_rows = fit.whole(graded, committed)
    loso_rows = fit.loso(graded, committed)
    rows = [r for r in graded if r["measured"] is not None]
    known = [r for r in rows if r["metric"] != "unknown"]
    summary = {"rows_compared": len(rows), "rows_known_metric": len(known),
               "rows_skipped": len(result["skipped"]),
               "sources": sorted({r["source"] for r in graded}),
               "whole": _all_figures(whole_rows), "loso": _all_figures(loso_rows)}
    summary["all"] = _figures(rows)
    summary["known_metric"] = _figures(known)
    for key in ("source", "grade"):
        groups = {}
        for r in rows:
            groups.setdefault(r[key], []).append(r)
        summary[f"by_{key}"] = {k: {"rows": len(v), **_figures(v)} for k, v in sorted(groups.items())}
    loso_by_source = {}
    for r in loso_rows:
        loso_by_source.setdefault(r["source"], []).append(r)
    summary["loso_by_source"] = {k: _all_figures(v) for k, v in sorted(loso_by_source.items())}
    summary["under_predicted_rows"] = sorted(
        (r["id"], round(r["predicted"] / r["measured"], 2)) for r in loso_rows
        if r["measured"] and r["predicted"] < 0.9 * r["measured"])
    refit = fit.refit(graded)
    summary["calibration"] = refit["constants"]
    summary["calibration_drift"] = {k: list(v) for k, v in refit["drift"].items()}
    worst = sorted(rows, key=lambda r: -abs(r["predicted"] - r["measured"]) / r["measured"])[:8]
    summary["worst_rows"] = [(r["id"], r["metric"], round(r["measured"], 2), r["predicted"])
                             for r in worst]
    tput = [r for r in whole_rows if r.get("tokens_per_s_gpu") and r.get("predicted_tokens_per_s_gpu")]
    summary["worst_speed_rows"] = [
        (r["id"], r["tokens_per_s_gpu"], round(r["predicted_tokens_per_s_gpu"]))
        for r in sorted(tput, key=lambda r: -abs(math.log(r["predicted_tokens_per_s_gpu"]
                                                          / r["tokens_per_s_gpu"])))[:8]]
    return summary


def _print(summary: dict, skipped: list) -> None:
    def line(label, figures, rows=None):
        cells = [f"{figures[n]['mape_pct']:>6} % ({100 * figures[n]['under_10pct_share']:4.0f} % under)"
                 for n in PREDICTORS]
        count = f"{rows:>4}" if rows is not None else "    "
        print(f"  {label:<22}{count}  " + "  ".join(cells))
    print(f"memory MAPE at the matching level, grades {'/'.join(GRADES)} "
          f"(share of rows under-predicted by more than 10 %)")
    print(f"  {'rows':<22}{'n':>4}  {'kbsolve':<24}{'weights x 4':<26}model states only")
    line("all", summary["all"], summary["rows_compared"])
    line("known metric", summary["known_metric"], summary["rows_known_metric"])
    for key in ("source", "grade"):
        for name, figures in summary[f"by_{key}"].items():
            line(f"{key} {name}", figures, figures["rows"])
    print("under-predicted by more than 10 % (leave-one-source-out):", summary["under_predicted_rows"])
    for name in ("whole", "loso"):
        f = summary[name]
        print(f"{name:>5}: memory MAPE {f['mape_pct']} % over {f['rows_compared']} rows, "
              f"{100 * f['under_10pct_share']:.0f} % under by >10 %; OOM rows predicted to "
              f"overflow {f['oom_agreement_pct']} % of {f['oom_rows']}; rows that ran predicted "
              f"to fit {f['ran_predicted_to_fit_pct']} % of {f['ran_rows']}; speed rho "
              f"{f['spearman']}, median abs error {f['median_abs_error_pct']} % over "
              f"{f['throughput_rows']} rows")
    print("calibration:", summary["calibration"], "drift:", summary["calibration_drift"])
    print("worst speed rows (id, measured, predicted tok/s/GPU):", summary["worst_speed_rows"])
    print("worst rows (id, metric, measured GiB, predicted GiB):")
    for row in summary["worst_rows"]:
        print("  ", row)
    kinds = {}
    for _, method, kind in skipped:
        label = f"{kind or ''} {method}".strip()
        kinds[label] = kinds.get(label, 0) + 1
    print(f"skipped {len(skipped)} rows (video rows await the diffusion memory model):", kinds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = evaluate(args.data)
    summary = summarise(result)
    if args.json:
        print(json.dumps({"summary": summary, **result}, indent=2))
        return
    _print(summary, result["skipped"])


if __name__ == "__main__":
    sys.exit(main())
