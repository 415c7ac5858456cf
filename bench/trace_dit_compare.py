"""The KB's DiT memory terms against the traced tensors (bench/data/traces/grid_dit.json).

Reads only the committed trace data (no side venv). Each traced denoiser step
becomes a `kbsolve estimate` with the case's settings, on one GPU, for every
framework whose KB models that code path:

- flow-factory (every model): finetune_type lora (target_modules default:
  to_q, to_k, to_v, to_out.0) or full, master_weight_dtype bfloat16 (float32
  for the "full32" rows), enable_gradient_checkpointing, per_device_batch_size;
  guidance_scale 1 (the trace runs one conditional forward), no EMA, no KL;
- diffusers (FLUX, SD3): train_dreambooth_lora_flux.py / _sd3.py with the
  attention-only lora_layers, or train_dreambooth_flux.py for "full32"
  (fp32 weights under autocast); mixed_precision bf16, cache_latents.

Groups of KB terms against the traced figures (extrapolated to full depth), at
the allocated level:

| group | flow-factory terms | diffusers terms | traced |
|---|---|---|---|
| weights | denoiser_weights, trainable_weights | transformer_weights, lora_weights | parameters and buffers |
| gradients | gradients | lora_gradients, full_gradients | gradients after backward |
| optimizer | optimizer_states | optimizer_states, full_optimizer_states | optimizer states after the step |
| activations | activations | activations, autocast_weight_copies | forward/backward peak less parameters and gradients |
| total | the groups + optimizer_step_temporary + phase_overlap | the same | flow-factory: peak_accum, max(the second micro-batch's fwd/bwd peak + moments, the step's peak); diffusers: peak, the same with the first micro-batch |

Flow-Factory accumulates gradients over the trained timesteps and micro-batches
of every optimizer step, so its total is scored against the trace's second
micro-batch (run beside the first one's gradients); diffusers' scripts default
to one micro-batch per step. The total is the denoiser's training step alone: the VAE, the text encoders,
the reward models and the rollout samples are terms of their own (the
encoder and VAE rows of the grid are compared with them separately). The
activations group is scored on LoRA rows (as bench/trace_compare.py does):
under full tuning the forward/backward peak comes at the end of backward,
where the gradients have replaced the activations. Relative error is
KB / trace - 1; targets (issue 23): median |error| <= 3 %, worst <= 10 %.

    python -m bench.trace_dit_compare [--data PATH] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "traces" / "grid_dit.json"
GIB = 2**30
TARGET_MEDIAN, TARGET_WORST = 0.03, 0.10
GROUPS = {
    "flow-factory": {"weights": ("denoiser_weights", "trainable_weights"), "gradients": ("gradients",),
                     "optimizer": ("optimizer_states",), "activations": ("activations",),
                     "step": ("optimizer_step_temporary", "phase_overlap")},
    "diffusers": {"weights": ("transformer_weights", "lora_weights"),
                  "gradients": ("lora_gradients", "full_gradients"),
                  "optimizer": ("optimizer_states", "full_optimizer_states"),
                  "activations": ("activations", "autocast_weight_copies"),
                  "step": ("optimizer_step_temporary", "phase_overlap")},
}
TRACED = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer_states",
          "activations": "fb_transient", "total": "peak"}
DIFFUSERS_SCRIPTS = {"flux": "train_dreambooth_lora_flux.py", "sd3": "train_dreambooth_lora_sd3.py"}


def frameworks(case: dict) -> list[str]:
    """The frameworks whose KB models the traced code path."""
    # the flux script's default adapter list is diffusers' only;
    # SD3's LoRA rows run diffusers' default prompt (77 CLIP + 77 T5 tokens);
    # Flow-Factory pads T5 to 512 (the catalog's joint_text_tokens 589), so
    # only its full rows, whose peak is the optimizer step's, compare
    out = [] if (case["family"] == "sd3" and case["method"] == "lora") or case.get("lora_targets") \
        else ["flow-factory"]
    if case["family"] in DIFFUSERS_SCRIPTS and (case["method"] == "lora" or
                                                (case["method"] == "full32" and case["family"] == "flux")):
        out.append("diffusers")
    return out


def settings(case: dict, framework: str) -> dict:
    if framework == "flow-factory":
        out = {"finetune_type": "lora" if case["method"] == "lora" else "full",
               "master_weight_dtype": "float32" if case["method"] == "full32" else "bfloat16",
               "enable_gradient_checkpointing": str(case["checkpointing"]).lower(),
               "per_device_batch_size": str(case["batch"]), "guidance_scale": "1",
               "ema_decay": "0", "kl_beta": "0", "mixed_precision": "bf16"}
        if case["method"] == "lora":
            out.update(lora_rank=str(case["lora_rank"]), target_modules="default")
        if case["family"] == "qwenimage":  # the traced prompt's length (a property of the data)
            out["prompt_tokens"] = str(case["text_tokens"])
        return out
    out = {"mixed_precision": "bf16", "gradient_checkpointing": str(case["checkpointing"]).lower(),
           "train_batch_size": str(case["batch"]), "resolution": str(case["height"]),
           "cache_latents": "true", "max_sequence_length": str(case["text_tokens"] - (77 if case["family"] == "sd3" else 0))}
    if case["method"] == "full32":
        out["script"] = "train_dreambooth_flux.py"
    else:
        out.update(script=DIFFUSERS_SCRIPTS[case["family"]], rank=str(case["lora_rank"]),
                   lora_layers="default" if case.get("lora_targets") else "attn.to_k,attn.to_q,attn.to_v,attn.to_out.0")
    return out


def estimate_groups(kb, case: dict, framework: str) -> dict[str, float]:
    from kbsolve import api
    query = {"gpus": "1xH200", "model": case["model"], "framework": framework,
             "resolution": f"{case['height']}x{case['width']}", "headroom": 0.0}
    if case["family"] == "wan":
        query["frames"] = case["frames"]
    estimate = api.estimate(query, settings(case, framework), kb)
    terms = {t.term: t.gib * GIB for t in estimate.memory.breakdown
             if t.level == "allocated" and t.location == "gpu"}
    groups = {g: sum(terms.get(t, 0.0) for t in names) for g, names in GROUPS[framework].items()}
    groups["total"] = sum(groups.values())
    del groups["step"]
    return groups


def evaluate(path: Path = DATA, kb=None) -> dict:
    from kbsolve import api
    data = json.loads(path.read_text(encoding="utf-8"))
    kb = kb or api.load_kb()
    rows = []
    for case in data["cases"]:
        if case["phase"] != "train":
            continue
        for framework in frameworks(case):
            traced = {g: case["full"][key] for g, key in TRACED.items()}
            if framework == "flow-factory":
                traced["total"] = case["full"]["peak_accum"]
            kb_groups = estimate_groups(kb, case, framework)
            errors = {g: (kb_groups[g] / traced[g] - 1) if traced[g] else None for g in TRACED}
            if case["method"] != "lora":
                errors["activations"] = None
            rows.append({"id": case["id"], "framework": framework, "case": case, "kb": kb_groups,
                         "traced": traced, "errors": errors})
    return {"environment": data["environment"], "rows": rows, "failed": data.get("failed", []),
            "passes": [c for c in data["cases"] if c["phase"] != "train"], "rollout": rollout(kb)}


# ---- Flow-Factory's rollout buffer -----------------------------------------------
# What one Wan text-to-video rollout sample keeps (WanT2VSample), tensor by tensor, as the
# sampler at flow-factory a0b2bc5 builds it: computed from the code's shapes, not traced (the
# sampler needs the whole pipeline), and compared with the KB's rollout_buffer term for one
# sample on the GPU (offload_samples_to_cpu: one micro-batch of one sample).
ROLLOUT_CASES = [("wan2.1-t2v-14b", 480, 832, 81, 1), ("wan2.1-t2v-14b", 480, 832, 81, 4),
                 ("wan2.1-t2v-14b", 256, 256, 5, 1)]


def rollout_sample_bytes(height: int, width: int, frames: int, sde_steps: int, cfg: bool) -> dict:
    """One WanT2VSample's tensors (flow-factory src/flow_factory/models/wan/wan2_t2v.py)."""
    latent = 16 * ((frames - 1) // 4 + 1) * (height // 8) * (width // 8)
    # positions i and i + 1 of every trained timestep, drawn at random without two adjacent
    # (utils/trajectory_collector.py#L344-L388; scheduler current_sde_steps: randperm)
    positions = 2 * sde_steps
    out = {"all_latents": positions * latent * 2,        # cast_latents to fp16 (models/abc.py#L172-L182)
           "log_probs": sde_steps * 4,                   # one fp32 value per trained step
           "video": frames * 3 * height * width * 2,     # decode_latents, the VAE in bf16 (#L215-L230)
           "prompt_embeds": 512 * 4096 * 2,              # umT5's 512 x 4096 in the transformer dtype (#L307-L310)
           "prompt_ids": 512 * 8}
    if cfg:
        out.update(negative_prompt_embeds=512 * 4096 * 2, negative_prompt_ids=512 * 8)
    return out


def rollout(kb) -> list[dict]:
    from kbsolve import api
    rows = []
    for model, h, w, f, steps in ROLLOUT_CASES:
        query = {"gpus": "8xH200", "model": model, "framework": "flow-factory",
                 "resolution": f"{h}x{w}", "frames": f, "headroom": 0.0}
        settings = {"offload_samples_to_cpu": "true", "per_device_batch_size": "1",
                    "num_sde_steps": str(steps), "latent_storage_dtype": "fp16", "guidance_scale": "5"}
        estimate = api.estimate(query, settings, kb)
        kb_bytes = next(t.gib for t in estimate.memory.breakdown if t.term == "rollout_buffer") * GIB
        code = rollout_sample_bytes(h, w, f, steps, cfg=True)
        rows.append({"id": f"{model}-{h}x{w}x{f}-sde{steps}", "code": code, "code_total": sum(code.values()),
                     "kb": kb_bytes, "error": kb_bytes / sum(code.values()) - 1})
    return rows


def group_figures(rows: list[dict]) -> dict[str, dict]:
    out = {}
    for group in TRACED:
        pairs = [(abs(r["errors"][group]), r["errors"][group], f"{r['framework']}:{r['id']}") for r in rows
                 if r["errors"][group] is not None]
        if not pairs:
            continue
        worst = max(pairs)
        median = statistics.median(p[0] for p in pairs)
        out[group] = {"median": median, "worst": worst[1], "worst_case": worst[2], "cases": len(pairs),
                      "within_target": median <= TARGET_MEDIAN and worst[0] <= TARGET_WORST}
    return out


def summarise(result: dict) -> dict:
    rows = result["rows"]
    out = {"rows": len(rows), "failed": len(result["failed"]), "environment": result["environment"],
           "groups": group_figures(rows)}
    out["by_framework"] = {f: group_figures([r for r in rows if r["framework"] == f])
                           for f in sorted({r["framework"] for r in rows})}
    out["rollout"] = result.get("rollout", [])
    out["by_family"] = {f: group_figures([r for r in rows if r["case"]["family"] == f])
                        for f in sorted({r["case"]["family"] for r in rows})}
    return out


def _print(summary: dict, rows: list[dict]) -> None:
    env = summary["environment"]
    print(f"DiT trace grid: {summary['rows']} rows ({summary['failed']} cases failed to trace); "
          f"torch {env['torch']}, diffusers {env.get('diffusers')}, peft {env['peft']}")
    for r in rows:
        print(f"  {r['framework']:<12} {r['id']:<42} " + " ".join(
            f"{g} {e:+.1%}" for g, e in r["errors"].items() if e is not None))
    print(f"{'group':<12} {'median |err|':>12} {'worst':>9}  worst case")
    for group, f in summary["groups"].items():
        mark = "" if f["within_target"] else "  (target: median <= 3 %, worst <= 10 %)"
        print(f"{group:<12} {f['median']:>11.1%} {f['worst']:>+9.1%}  {f['worst_case']}{mark}")
    for r in summary["rollout"]:
        print(f"rollout sample {r['id']}: code {r['code_total'] / 2**20:.1f} MiB, KB {r['kb'] / 2**20:.1f} MiB "
              f"({r['error']:+.1%})")
    for name, groups in {**summary["by_framework"], **summary["by_family"]}.items():
        print(f"{name}: " + "; ".join(f"{g} {f['median']:.1%} / {f['worst']:+.1%} ({f['cases']})"
                                     for g, f in groups.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trace_dit_compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"bench.trace_dit_compare: no trace data at {args.data} (python -m bench.trace --part dit)",
              file=sys.stderr)
        return 2
    result = evaluate(args.data)
    summary = summarise(result)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print(summary, result["rows"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
