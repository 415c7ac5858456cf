"""The KB's memory terms against the traced tensors (bench/data/traces/grid.json,
grid_families.json and grid_ppo.json; the retraced rows of grid_kto.json,
grid_full_retraced.json, grid_gpt2.json and grid_families_retraced.json replace
grid.json's and grid_families.json's rows of the same id).

Reads only the committed trace data (no side venv): each traced case becomes a
LlamaFactory `kbsolve estimate` with the case's settings, and each group of
memory terms is compared with what the trace held, at the allocated level:

| group | KB terms | traced (extrapolated to full depth) |
|---|---|---|
| weights | frozen_weights, trainable_params, reference_model, reward_model | parameters and buffers |
| gradients | gradients | gradients after backward |
| optimizer | optimizer_states | optimizer states after the step |
| activations | activations, logits, packing_mask, dora_norm, attention_scores, reference_forward | forward/backward peak less parameters and gradients |
| total | allocated | steady-state peak: max(fwd/bwd peak + states, the step's peak) |

Relative error is KB / trace - 1. The activations group is scored on the
LoRA cases only: there the states are a few MiB and the forward/backward peak
less the weights is the activations and the loss path; under full and freeze
tuning that peak also holds a phase's gradients, autocast's bf16 weight copies
or the optimizer step's temporaries, which no single KB term stands for (their
totals are scored). Targets (issue 23): median |error| <= 3 %,
worst <= 10 % per group. Also the task ratios: each task's peak over the SFT
peak of the same model, method and shape, traced and estimated.

Besides the figures it prints, per group, the worst 10 rows with the
mechanism each belongs to (`MECHANISMS`: read from the case, first match),
and the activations' and totals' median and worst per mechanism.

Rows whose CPU trace takes a code path no CUDA kernel takes
(grid.cpu_only_fallback: SDPA with attention dropout, GPT-2's attn_pdrop, or
with unequal query and value head dims, DeepSeek-V2's MLA, where torch's CPU
flash kernel refuses and the math path keeps the scores) are scored apart:
their activations and totals leave the medians and worsts (their weights,
gradients and optimizer states stay), and the summary gives their count, their
reasons and their own figures. So are the QLoRA rows traced through PEFT's
prepare_model_for_kbit_training, a path LlamaFactory ff6d4d12 never takes:
they are estimated with the generic pytorch KB (method qlora, kbit_prepare).

Models the catalog lacks (grid_families.json's GPT-2, BLOOM, Falcon,
DeepSeek-V2-Lite, Mistral v0.1) are estimated from their config.json, written
from the traced config (`--model path/config.json`). QLoRA cases are
quantization_bit 4 (with upcast_layernorm when the trace upcast the norms),
offloaded checkpointing use_unsloth_gc, ORPO
and SimPO the dpo stage with pref_loss orpo / simpo.

    python -m bench.trace_compare [--data PATH ...] [--by subset] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "traces" / "grid.json"
FAMILY_DATA = DATA.with_name("grid_families.json")
PPO_DATA = DATA.with_name("grid_ppo.json")
# Rows retraced into a file of their own, taken over the original file's rows
# of the same id wherever the original is read (docs/decisions.md, traceA):
# grid_kto.json holds grid.json's KTO rows traced after step.py's
# no_hooks_without_grad (the trackers' hooks had kept the no_grad forwards'
# layer inputs alive) and its concatenated_forward; grid_gpt2.json the families
# grid's GPT-2 rows traced with CUDA's fused dropout (a bool mask) and the DPO
# stage's dropout switched off (step.py fused_dropout, trainer_dropout).
# grid_families_retraced.json holds the families grid's other DPO, ORPO and
# SimPO rows, retraced with the same step.py (no_hooks_without_grad,
# trainer_dropout, the step's own step_peak): grid_families.json's were traced
# before those fixes, as grid.json's KTO rows were. It is read after
# grid_gpt2.json (whose GPT-2 rows were already traced with them), so its rows
# win wherever both hold an id (none do). grid_retraced.json holds grid.json's
# rows still on CPU autocast's op lists that were retraced under CUDA
# autocast's float32 list one by one, when a KB term was fitted on them (issue
# 23, qlora: Phi-3's LoRA row without checkpointing at 2 x 2048).
# grid_full_retraced.json holds grid.json's RM full and freeze rows and
# grid_kto.json's KTO full rows traced after step.py stopped its trackers' hooks
# from keeping reentrant checkpointing's recomputed layer inputs through the rest
# of backward and the optimizer step (no_hooks_without_grad, also inside a
# backward; its `why`). Both are read after grid_kto.json, so their rows win.
KTO_DATA = DATA.with_name("grid_kto.json")
MAIN_RETRACED_DATA = DATA.with_name("grid_retraced.json")
FULL_RETRACED_DATA = DATA.with_name("grid_full_retraced.json")
GPT2_DATA = DATA.with_name("grid_gpt2.json")
FAMILIES_RETRACED_DATA = DATA.with_name("grid_families_retraced.json")
RETRACES = {DATA: (KTO_DATA, MAIN_RETRACED_DATA, FULL_RETRACED_DATA),
            FAMILY_DATA: (GPT2_DATA, FAMILIES_RETRACED_DATA)}


def with_retraces(paths: list[Path]) -> list[Path]:
    """The files to read: each one followed by its retrace files, if committed."""
    out = []
    for path in paths:
        out.append(path)
        out += [again for again in RETRACES.get(path, ()) if again.exists() and again not in paths]
    return out
ADAPTERS = ("lora", "qlora")
GIB = 2**30
GROUPS = {
    "weights": ("frozen_weights", "trainable_params", "reference_model", "reward_model"),
    "gradients": ("gradients",),
    "optimizer": ("optimizer_states",),
    "activations": ("activations", "logits", "packing_mask", "dora_norm", "attention_scores",
                    "reference_forward"),
}
# the generic pytorch KB's terms, for the rows of a path LlamaFactory never takes
PYTORCH_GROUPS = {
    "weights": ("base_weights", "trainable_weights"),
    "gradients": ("gradients",),
    "optimizer": ("optimizer_states", "paged_states"),
    "activations": ("activations", "logits", "attention_scores", "bnb_saved_inputs",
                    "autocast_weight_copies"),
}
KBIT_APART = ("PEFT's prepare_model_for_kbit_training (every non-4-bit weight in fp32) is not "
              "LlamaFactory's path (ff6d4d12 src/ never calls it; its trainers bypass TRL's): "
              "estimated with the pytorch KB's kbit_prepare, whose activation terms are not fitted "
              "to the traces")
TRACED = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer_states",
          "activations": "fb_transient", "total": "peak"}
TARGET_MEDIAN, TARGET_WORST = 0.03, 0.10
# the groups a row scored apart leaves (a CPU-only attention fallback's scores;
# a path whose activation terms no trace fitted)
APART_GROUPS = ("activations", "total")


def settings(case: dict) -> dict:
    """The LlamaFactory options a traced case ran with."""
    stage = "dpo" if case["task"] in ("orpo", "simpo") else case["task"]
    out = {"finetuning_type": "lora" if case["method"] == "qlora" else case["method"], "stage": stage,
           "per_device_train_batch_size": str(case["batch"]),
           "disable_gradient_checkpointing": str(not case["checkpointing"]).lower(),
           "flash_attn": "sdpa" if case["attention"] == "sdpa" else "disabled",
           "bf16": "true",
           # the tracer steps torch.optim.AdamW(foreach=True), HF's adamw_torch
           # (bench/trace/step.py), not the fused default of torch >= 2.8
           "optim": "adamw_torch"}
    if case["method"] in ADAPTERS:
        out["lora_rank"] = str(case["lora_rank"])
        out["lora_target"] = "all" if case["lora_targets"] == "all" else "q_proj,v_proj"
    if case["method"] == "qlora":
        out["quantization_bit"] = "4"
        if case.get("upcast", "none") != "none":
            out["upcast_layernorm"] = "true"
    if stage != case["task"]:
        out["pref_loss"] = case["task"]
    if case.get("offload_checkpoints"):
        out["use_unsloth_gc"] = "true"
    if case["task"] == "ppo":
        # the tracer trains the rollout's mini-batch once (bench/trace/step.py
        # ppo_loss); a lora reward adapter under LoRA, a full reward model else
        out["ppo_epochs"] = "1"
        out["reward_model"] = "reward"
        out["reward_model_type"] = "lora" if case["method"] in ADAPTERS else "full"
    return out


def model_argument(case: dict, folder: Path | None) -> str:
    """The catalog name, or for a family the catalog lacks its config.json."""
    from bench.trace import grid
    if case["model"] not in grid.FAMILIES:
        return case["model"]
    path = folder / case["model"] / "config.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(grid.hf_config_json(case["model"])), encoding="utf-8")
    return str(path)


def kbit_prepared(case: dict) -> bool:
    return case["method"] == "qlora" and case.get("upcast") == "kbit"


def pytorch_settings(case: dict) -> dict:
    """A QLoRA row of PEFT's prepare_model_for_kbit_training path as the generic
    pytorch KB's options (a TRL / axolotl script: HF Trainer autocast, AdamW). The tracer's
    4-bit layers double-quantize (bench/trace/step.py Linear4bitPath: LlamaFactory's
    defaults), so double_quant is on."""
    return {"method": "qlora", "kbit_prepare": "true", "double_quant": "true",
            "lora_rank": str(case["lora_rank"]),
            "lora_targets": case["lora_targets"], "lora_dropout": "false",
            "precision": "bf16-mixed", "micro_batch": str(case["batch"]), "grad_accum": "1",
            "gradient_checkpointing": "full" if case["checkpointing"] else "none",
            "optimizer": "adamw", "attention": "flash", "loss": "ce", "packing": "false"}


def estimate_groups(kb, case: dict, folder: Path | None = None) -> dict[str, float]:
    from kbsolve import api
    pytorch = kbit_prepared(case)
    query = {"gpus": "1xH200", "model": model_argument(case, folder),
             "framework": "pytorch" if pytorch else "llamafactory",
             "seq_len": case["seq"], "headroom": 0.0}
    estimate = api.estimate(query, pytorch_settings(case) if pytorch else settings(case), kb)
    terms = {t.term: t.gib * GIB for t in estimate.memory.breakdown
             if t.level == "allocated" and t.location == "gpu"}
    groups = {g: sum(terms.get(t, 0.0) for t in names)
              for g, names in (PYTORCH_GROUPS if pytorch else GROUPS).items()}
    groups["total"] = estimate.memory.per_gpu_gib.allocated * GIB
    groups["step_s"] = estimate.speed.step_time_s
    # PPO's decode time (memory-bound, no FLOPs of its own beyond a forward),
    # as it enters the step: times the step's factor terms
    factors = 1.0
    for term in kb.speed.values():
        if term.framework == query["framework"] and term.kind == "factor":
            factors *= estimate.speed.terms.get(term.name, 1.0)
    groups["generation_s"] = estimate.speed.terms.get("ppo_generation", 0.0) * factors
    return groups


def evaluate(path: Path | list[Path] = DATA, models: tuple[str, ...] | None = None, kb=None) -> dict:
    """Every traced case of the file(s) (or those of `models`) against its estimate."""
    import tempfile

    from bench.trace import grid
    from kbsolve import api
    paths = with_retraces([path] if isinstance(path, Path) else list(path))
    files = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    kb = kb or api.load_kb()
    rows = []
    # a later file's row of an id replaces the earlier file's (a retrace)
    latest = {case["id"]: i for i, data in enumerate(files) for case in data["cases"]}
    position = {}
    with tempfile.TemporaryDirectory() as folder:
        for i, data in enumerate(files):
            for case in data["cases"]:
                if models and case["model"] not in models:
                    continue
                if latest[case["id"]] != i:
                    if case["id"] not in position:  # the first file's place (an id may be in three)
                        position[case["id"]] = len(rows)
                        rows.append(None)  # its place, for the retraced row
                    continue
                kb_groups = estimate_groups(kb, case, Path(folder))
                traced = {g: case["full"][key] for g, key in TRACED.items()}
                errors = {g: (kb_groups[g] / traced[g] - 1) if traced[g] else None for g in TRACED}
                if case["method"] not in ADAPTERS:
                    errors["activations"] = None
                traced["flops"] = case["full"]["flops"]
                row = {"id": case["id"], "case": case, "kb": kb_groups, "traced": traced,
                       "errors": errors,
                       "apart": grid.cpu_only_fallback(case) or (KBIT_APART if kbit_prepared(case) else None)}
                if case["id"] in position:
                    rows[position.pop(case["id"])] = row
                else:
                    rows.append(row)
    return {"environment": files[0]["environment"], "rows": [r for r in rows if r is not None],
            "failed": list({f["id"]: f for data in files for f in data.get("failed", [])
                            if f["id"] not in latest}.values())}  # a retrace's failures replace the original's


def subset(case: dict) -> str:
    """What a family-grid case tests: its family, QLoRA's upcast, offloaded
    checkpointing or a reference-free preference loss."""
    from bench.trace import grid
    if case["model"] in grid.FAMILIES:
        return case["model"]
    if case["method"] == "qlora":
        return f"qlora/{case.get('upcast', 'none')}"
    if case.get("offload_checkpoints"):
        return f"unsloth_gc/{case['method']}"
    if case["task"] in ("orpo", "simpo"):
        return f"{case['task']}/{case['method']}"
    return "catalog"


EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def _moe(case: dict) -> bool:
    from bench.trace import grid
    config = grid.case_config(case)
    return max((config.get(k) or 0) for k in EXPERT_KEYS) > 1


def _window_passed(case: dict) -> bool:
    from bench.trace import grid
    window = grid.case_config(case).get("sliding_window")
    return bool(window) and window < case["seq"]


# Which mechanism a row's residual belongs to, read from the case (never from
# its error): the first that applies. They are the mechanisms issue 23 names
# (MoE recomputation, sliding windows, GPT-2, RM's value head, KTO's KL rows;
# a task's own tensors before the model's MoE layers, as a Mixtral KTO row's
# residual is KTO's: Mixtral's SFT rows are within 2 %)
# and the code paths the terms are written per (eager scores, LoRA without
# checkpointing, fp32 full and freeze tuning).
MECHANISMS = (
    ("sliding window past the sequence", _window_passed),
    ("GPT-2: learned positions, Conv1D, GELU", lambda c: c["model_type"] == "gpt2"),
    ("Falcon / BLOOM: multi-query, ALiBi", lambda c: c["model_type"] in ("falcon", "bloom")),
    ("RM: value head, pairwise rows", lambda c: c["task"] == "rm"),
    ("KTO: KL rows and reference forwards", lambda c: c["task"] == "kto"),
    ("PPO rollout", lambda c: c["task"] == "ppo"),
    ("MoE layer recomputed", lambda c: _moe(c) and c["checkpointing"]),
    ("MoE layer, no checkpointing", lambda c: _moe(c)),
    ("eager attention scores", lambda c: c["attention"] == "eager"),
    ("full / freeze: fp32 weights, autocast copies", lambda c: c["method"] in ("full", "freeze")),
    ("LoRA without checkpointing", lambda c: not c["checkpointing"]),
    ("LoRA, checkpointed layers", lambda c: True),
)
WORST_ROWS = 10


def mechanism(case: dict) -> str:
    return next(name for name, applies in MECHANISMS if applies(case))


def worst_rows(rows: list[dict], count: int = WORST_ROWS) -> dict[str, list[dict]]:
    """The `count` rows of each group with the largest |error| (the activations
    and totals without the rows scored apart), with their mechanism."""
    out = {}
    for group in TRACED:
        scored = [r for r in rows if r["errors"][group] is not None
                  and (group not in APART_GROUPS or not r.get("apart"))]
        scored.sort(key=lambda r: -abs(r["errors"][group]))
        out[group] = [{"id": r["id"], "error": r["errors"][group], "mechanism": mechanism(r["case"]),
                       "kb_gib": r["kb"][group] / GIB, "traced_gib": r["traced"][group] / GIB}
                      for r in scored[:count]]
    return out


def mechanism_figures(rows: list[dict]) -> dict[str, dict]:
    """Median and worst |error| of the activations and totals per mechanism."""
    names = [name for name, _ in MECHANISMS]
    found = {mechanism(r["case"]) for r in rows}
    return {name: group_figures([r for r in rows if mechanism(r["case"]) == name])
            for name in names if name in found}


def group_figures(rows: list[dict], apart: bool = False) -> dict[str, dict]:
    """Median and worst |error| per group, with the worst case's id; the
    activations and totals leave out the rows scored apart (or, with
    apart=True, are those rows' own figures)."""
    out = {}
    for group in TRACED:
        pairs = [(abs(r["errors"][group]), r["errors"][group], r["id"]) for r in rows
                 if r["errors"][group] is not None
                 and (group not in APART_GROUPS or bool(r.get("apart")) == apart)]
        if not pairs:
            continue
        worst = max(pairs)
        out[group] = {"median": statistics.median(p[0] for p in pairs), "worst": worst[1],
                      "worst_case": worst[2], "cases": len(pairs),
                      "within_target": statistics.median(p[0] for p in pairs) <= TARGET_MEDIAN
                      and worst[0] <= TARGET_WORST}
    return out


def task_ratios(rows: list[dict]) -> dict[str, dict]:
    """Each task's total memory over SFT's for the same model, method,
    checkpointing, attention and shape: the median ratio, traced and estimated;
    and its FLOPs (traced) against the KB's step time over SFT's (PPO's: less
    its generation's decode time, which FLOPs do not measure)."""
    def key(case):
        return (case["model"], case["method"], case["lora_targets"], case["checkpointing"],
                case["attention"], case["batch"], case["seq"])
    rows = [r for r in rows if not r.get("apart")]
    sft = {key(r["case"]): r for r in rows if r["case"]["task"] == "sft"}
    ratios: dict[str, dict[str, list]] = {}
    for r in rows:
        task = r["case"]["task"]
        base = sft.get(key(r["case"]))
        if task == "sft" or base is None:
            continue
        for method in (r["case"]["method"], "all"):
            entry = ratios.setdefault(f"{task}/{method}", {"traced": [], "kb": [], "flops": [],
                                                            "kb_time": []})
            entry["traced"].append(r["traced"]["total"] / base["traced"]["total"])
            entry["kb"].append(r["kb"]["total"] / base["kb"]["total"])
            entry["flops"].append(r["traced"]["flops"] / base["traced"]["flops"])
            # against the traced FLOPs: the KB's time less PPO's decode time
            entry["kb_time"].append((r["kb"]["step_s"] - r["kb"]["generation_s"]) / base["kb"]["step_s"])
    return {k: {"traced": statistics.median(v["traced"]), "kb": statistics.median(v["kb"]),
                "traced_flops": statistics.median(v["flops"]),
                "kb_step_time": statistics.median(v["kb_time"]),
                "pairs": len(v["traced"])} for k, v in sorted(ratios.items())}


def apart_figures(rows: list[dict]) -> dict:
    """The rows scored apart: how many, why, and their own activations and totals."""
    marked = [r for r in rows if r.get("apart")]
    reasons: dict[str, int] = {}
    for r in marked:
        reasons[r["apart"]] = reasons.get(r["apart"], 0) + 1
    figures = group_figures(marked, apart=True) if marked else {}
    return {"rows": len(marked), "reasons": reasons,
            "groups": {g: figures[g] for g in APART_GROUPS if g in figures}}


def summarise(result: dict, by_subset: bool = False) -> dict:
    rows = result["rows"]
    by_task = {}
    for task in sorted({r["case"]["task"] for r in rows}):
        by_task[task] = group_figures([r for r in rows if r["case"]["task"] == task])["total"]
    out = {"cases": len(rows), "failed": len(result["failed"]),
           "environment": result["environment"], "groups": group_figures(rows),
           "total_by_task": by_task, "task_ratios": task_ratios(rows),
           "scored_apart": apart_figures(rows), "worst_rows": worst_rows(rows),
           "mechanisms": mechanism_figures(rows)}
    if by_subset:
        names = sorted({subset(r["case"]) for r in rows})
        out["subsets"] = {n: group_figures([r for r in rows if subset(r["case"]) == n]) for n in names}
    return out


def _print(summary: dict) -> None:
    env = summary["environment"]
    print(f"trace grid: {summary['cases']} cases ({summary['failed']} failed to trace); "
          f"torch {env['torch']}, transformers {env['transformers']}, peft {env['peft']}")
    print(f"{'group':<12} {'median |err|':>12} {'worst':>9}  worst case")
    for group, f in summary["groups"].items():
        mark = "" if f["within_target"] else "  (target: median <= 3 %, worst <= 10 %)"
        print(f"{group:<12} {f['median']:>11.1%} {f['worst']:>+9.1%}  {f['worst_case']}{mark}")
    fallbacks = summary["scored_apart"]
    if fallbacks["rows"]:
        print(f"scored apart ({', '.join(APART_GROUPS)} only): {fallbacks['rows']} rows: "
              + "; ".join(f"{g} {f['median']:.1%} / {f['worst']:+.1%} ({f['cases']})"
                          for g, f in fallbacks["groups"].items()))
        for reason, count in fallbacks["reasons"].items():
            print(f"  {count} rows: {reason}")
    print("total by task: " + ", ".join(f"{t} median {f['median']:.1%} worst {f['worst']:+.1%}"
                                        for t, f in summary["total_by_task"].items()))
    print("task / SFT, median (memory traced vs KB; FLOPs traced vs KB step time):")
    for k, v in summary["task_ratios"].items():
        print(f"  {k:<12} memory {v['traced']:.2f} vs {v['kb']:.2f}; "
              f"time {v['traced_flops']:.2f} vs {v['kb_step_time']:.2f} ({v['pairs']} pairs)")
    print("by mechanism (median |err| / worst, cases; activations on LoRA rows only):")
    for name, groups in summary["mechanisms"].items():
        print(f"  {name}: " + "; ".join(f"{g} {f['median']:.1%} / {f['worst']:+.1%} ({f['cases']})"
                                        for g, f in groups.items() if g in APART_GROUPS))
    for group in TRACED:
        print(f"worst {len(summary['worst_rows'][group])} rows, {group}:")
        for row in summary["worst_rows"][group]:
            print(f"  {row['error']:+7.1%}  {row['id']:<55} {row['kb_gib']:8.2f} vs {row['traced_gib']:8.2f} GiB"
                  f"  {row['mechanism']}")
    for name, groups in summary.get("subsets", {}).items():
        print(f"{name}: " + "; ".join(f"{g} {f['median']:.1%} / {f['worst']:+.1%} ({f['cases']})"
                                     for g, f in groups.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trace_compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[DATA, FAMILY_DATA, PPO_DATA],
                        help="trace files (default: grid.json, grid_families.json and grid_ppo.json; "
                        "the retraced rows of grid_kto.json, grid_gpt2.json and grid_families_retraced.json "
                        "replace grid.json's and "
                        "grid_families.json's)")
    parser.add_argument("--by", choices=["subset"], help="figures per family / method / task too")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    missing = [p for p in args.data if not p.exists()]
    if missing:
        print(f"bench.trace_compare: no trace data at {missing[0]} (python -m bench.trace)",
              file=sys.stderr)
        return 2
    summary = summarise(evaluate(args.data), by_subset=args.by == "subset")
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
