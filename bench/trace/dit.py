"""The DiT trace grid (bench/data/traces/grid_dit.json): diffusers' denoisers,
their text encoders and VAEs, traced by bench/trace/step_dit.py in the side venv.

    python -m bench.trace --part dit

A denoiser case is traced at reduced depths ("points": 2 and 3 blocks; FLUX
1 + 1, 2 + 1 and 1 + 2) and extrapolated to the model's blocks: every figure
is fixed + sum over block kinds of blocks x per-block, each per-block part
solved from a point that adds one block of that kind. The
steady peak is taken after extrapolating, as for the LLM grid. Text encoders
are traced at 1 and 2 layers and extrapolated the same way; VAEs at full depth.

The configs are the HF config.json values of each model's transformer (the
catalog, kb/catalog/models.yaml, holds the same sizes); diffusers' class
defaults fill the keys not written here.
"""
from __future__ import annotations

# The denoisers: diffusers family, config kwargs (the block counts apart), the
# config keys that count blocks with their full value, the text tokens of the
# joint / cross attention, and where the values come from.
DENOISERS = {
    "flux1-dev": {
        "family": "flux", "blocks": {"num_layers": 19, "num_single_layers": 38},
        "config": {"patch_size": 1, "in_channels": 64, "attention_head_dim": 128,
                   "num_attention_heads": 24, "joint_attention_dim": 4096,
                   "pooled_projection_dim": 768, "guidance_embeds": True,
                   "axes_dims_rope": [16, 56, 56]},
        "text_tokens": 512,
        "source": "hf: black-forest-labs/FLUX.1-dev transformer/config.json; T5 max_sequence_length 512 "
                  "(diffusers train_dreambooth_lora_flux.py default)"},
    "sd3.5-large": {
        "family": "sd3", "blocks": {"num_layers": 38},
        "config": {"sample_size": 128, "patch_size": 2, "in_channels": 16, "attention_head_dim": 64,
                   "num_attention_heads": 38, "joint_attention_dim": 4096, "caption_projection_dim": 2432,
                   "pooled_projection_dim": 2048, "out_channels": 16, "pos_embed_max_size": 192,
                   "qk_norm": "rms_norm"},
        "text_tokens": 154,
        "source": "hf: stabilityai/stable-diffusion-3.5-large transformer/config.json; 77 CLIP + 77 T5 "
                  "tokens (train_dreambooth_lora_sd3.py max_sequence_length default 77)"},
    "wan2.1-t2v-14b": {
        "family": "wan", "blocks": {"num_layers": 40},
        "config": {"patch_size": [1, 2, 2], "num_attention_heads": 40, "attention_head_dim": 128,
                   "in_channels": 16, "out_channels": 16, "text_dim": 4096, "freq_dim": 256,
                   "ffn_dim": 13824, "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads",
                   "eps": 1e-6},
        "text_tokens": 512,
        "source": "hf: Wan-AI/Wan2.1-T2V-14B-Diffusers transformer/config.json; umT5 512 tokens "
                  "(WanPipeline max_sequence_length 512)"},
    "wan2.1-t2v-1.3b": {
        "family": "wan", "blocks": {"num_layers": 30},
        "config": {"patch_size": [1, 2, 2], "num_attention_heads": 12, "attention_head_dim": 128,
                   "in_channels": 16, "out_channels": 16, "text_dim": 4096, "freq_dim": 256,
                   "ffn_dim": 8960, "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads",
                   "eps": 1e-6},
        "text_tokens": 512,
        "source": "hf: Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/config.json"},
    "qwen-image": {
        "family": "qwenimage", "blocks": {"num_layers": 60},
        "config": {"patch_size": 2, "in_channels": 64, "out_channels": 16, "attention_head_dim": 128,
                   "num_attention_heads": 24, "joint_attention_dim": 3584, "guidance_embeds": False,
                   "axes_dims_rope": [16, 56, 56]},
        "text_tokens": 128,
        "source": "hf: Qwen/Qwen-Image transformer/config.json; a 128-token prompt (Qwen-Image's text "
                  "is variable-length, not padded)"},
}

# (model, method, checkpointing, batch, height, width, frames)
CASES = []
for _model, (_h, _w, _f) in {"flux1-dev": (512, 512, 1), "sd3.5-large": (512, 512, 1),
                             "wan2.1-t2v-14b": (480, 832, 17), "qwen-image": (512, 512, 1)}.items():
    for _method in ("lora", "full"):
        for _gc in (True, False):
            CASES.append((_model, _method, _gc, 1, _h, _w, _f))
CASES += [("flux1-dev", "full32", True, 1, 512, 512, 1),     # diffusers' train_dreambooth_flux.py
          ("flux1-dev", "lora", True, 2, 512, 512, 1),
          ("flux1-dev", "lora", True, 1, 1024, 1024, 1),
          ("sd3.5-large", "lora", True, 2, 512, 512, 1),
          ("qwen-image", "lora", True, 1, 1024, 1024, 1),
          # the video case: 480x832, 81 frames (32,760 tokens)
          ("wan2.1-t2v-14b", "lora", True, 1, 480, 832, 81),
          ("wan2.1-t2v-14b", "full", True, 1, 480, 832, 81),
          ("wan2.1-t2v-14b", "lora", False, 1, 480, 832, 81),
          ("wan2.1-t2v-1.3b", "lora", True, 1, 480, 832, 81),
          ("wan2.1-t2v-1.3b", "full", True, 1, 480, 832, 81),
          # diffusers' train_dreambooth_lora_flux.py default target list (diffusers#10994's run)
          ("flux1-dev", "lora_default", False, 1, 512, 512, 1)]
# train_dreambooth_lora_flux.py's default target_modules (lora_layers unset)
FLUX_DEFAULT_TARGETS = ["attn.to_k", "attn.to_q", "attn.to_v", "attn.to_out.0", "attn.add_k_proj",
                        "attn.add_q_proj", "attn.add_v_proj", "attn.to_add_out", "ff.net.0.proj",
                        "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2"]

# Text encoders (transformers configs; the depth key and its full value) and VAEs.
ENCODERS = {
    "t5-v1_1-xxl": {"encoder_type": "t5", "layers": ("num_layers", 24), "text_tokens": 512,
                    "config": {"vocab_size": 32128, "d_model": 4096, "d_kv": 64, "d_ff": 10240,
                               "num_heads": 64, "feed_forward_proj": "gated-gelu",
                               "is_encoder_decoder": False},
                    "source": "hf: google/t5-v1_1-xxl config.json (FLUX.1 / SD3 text_encoder_2 / _3)"},
    "umt5-xxl": {"encoder_type": "umt5", "layers": ("num_layers", 24), "text_tokens": 512,
                 "config": {"vocab_size": 256384, "d_model": 4096, "d_kv": 64, "d_ff": 10240,
                            "num_heads": 64, "feed_forward_proj": "gated-gelu",
                            "is_encoder_decoder": False},
                 "source": "hf: Wan-AI/Wan2.1-T2V-14B-Diffusers text_encoder/config.json (umT5-XXL)"},
    "clip-vit-large-patch14": {"encoder_type": "clip_text_model", "layers": ("num_hidden_layers", 12),
                               "text_tokens": 77,
                               "config": {"vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072,
                                          "num_attention_heads": 12, "max_position_embeddings": 77,
                                          "projection_dim": 768},
                               "source": "hf: openai/clip-vit-large-patch14 config.json text_config"},
}
VAES = {
    "flux-vae": {"vae_class": "AutoencoderKL",
                 "config": {"in_channels": 3, "out_channels": 3, "latent_channels": 16,
                            "block_out_channels": [128, 256, 512, 512], "layers_per_block": 2,
                            "down_block_types": ["DownEncoderBlock2D"] * 4,
                            "up_block_types": ["UpDecoderBlock2D"] * 4,
                            "use_quant_conv": False, "use_post_quant_conv": False},
                 "source": "hf: black-forest-labs/FLUX.1-dev vae/config.json"},
    "wan-vae": {"vae_class": "AutoencoderKLWan", "config": {},
                "source": "hf: Wan-AI/Wan2.1-T2V-14B-Diffusers vae/config.json (diffusers' defaults)"},
}
VAE_CASES = [("flux-vae", "encode", 512, 512, 1), ("flux-vae", "decode", 512, 512, 1),
             ("wan-vae", "encode", 480, 832, 17), ("wan-vae", "decode", 480, 832, 81)]
LORA_RANK = 16
LORA_TARGETS_NOTE = "to_q, to_k, to_v, to_out.0 (PEFT, r = alpha = 16, bf16 beside the bf16 transformer)"


def points(blocks: dict) -> list[dict]:
    """The reduced depths traced: a base, then one more block of each kind.
    The base holds two blocks: a model's first block differs from the others
    (traced, Wan with checkpointing: 1 -> 2 blocks adds 6 bytes per token and
    hidden unit, 2 -> 3 adds 2, the checkpointed bf16 input), so every
    per-block part is taken past the first block; FLUX's base is one
    dual-stream and one single-stream block."""
    base = {k: 1 for k in blocks} if len(blocks) > 1 else {k: 2 for k in blocks}
    return [base] + [dict(base, **{k: base[k] + 1}) for k in blocks]


def cases(full: bool = True) -> list[dict]:
    out = []
    for model, method, gc, batch, h, w, f in CASES:
        spec = DENOISERS[model]
        shape = f"{h}x{w}" + (f"x{f}" if spec["family"] == "wan" else "")
        targets = FLUX_DEFAULT_TARGETS if method == "lora_default" else None
        out.append({"id": "-".join([model, method, "gc" if gc else "nogc", f"b{batch}", shape]),
                    "phase": "train", "model": model, "family": spec["family"],
                    "config": spec["config"], "full_blocks": spec["blocks"],
                    "method": "lora" if targets else method, "lora_targets": targets,
                    "checkpointing": gc, "batch": batch, "height": h, "width": w, "frames": f,
                    "text_tokens": spec["text_tokens"], "lora_rank": LORA_RANK,
                    # diffusers' scripts (accelerate's native AMP) and Flow-Factory
                    # (trainers/abc.py: torch.autocast(device_type, bf16)) train
                    # under CUDA autocast: its float32 list (cuda_autocast.py)
                    "cuda_autocast": True})
    for name, spec in ENCODERS.items():
        key, layers = spec["layers"]
        out.append({"id": f"{name}-encode-b1-t{spec['text_tokens']}", "phase": "encode", "model": name,
                    "encoder_type": spec["encoder_type"], "config": spec["config"],
                    "full_blocks": {key: layers}, "batch": 1, "text_tokens": spec["text_tokens"]})
    for name, direction, h, w, f in VAE_CASES:
        spec = VAES[name]
        out.append({"id": f"{name}-{direction}-b1-{h}x{w}" + (f"x{f}" if f > 1 else ""), "phase": "vae",
                    "model": name, "vae_class": spec["vae_class"], "config": spec["config"],
                    "direction": direction, "full_blocks": {}, "batch": 1, "height": h, "width": w,
                    "frames": f})
    if not full:
        out = [c for c in out if c["phase"] != "train" or (c["model"] == "flux1-dev" and c["batch"] == 1
                                                             and c["height"] == 512)]
    return out


def jobs(case: dict) -> list[dict]:
    """The traces of one case: one per reduced depth (a VAE: one at full depth)."""
    if not case["full_blocks"]:
        return [dict(case, id=f"{case['id']}@full", point=[], blocks={})]
    return [dict(case, id=f"{case['id']}@" + ",".join(str(v) for v in p.values()), point=list(p.values()),
                 blocks=p) for p in points(case["full_blocks"])]


TRAIN_FIGURES = ("weights", "gradients", "optimizer_states", "fb_peak", "fb_transient", "fb_peak_accum",
                 "step_peak")
PASS_FIGURES = ("weights", "pass_peak", "pass_transient")


def extrapolate(case: dict, traces: list[dict]) -> dict:
    """fixed + sum_k blocks_k x per_block_k; traces in points() order."""
    figures = TRAIN_FIGURES if case["phase"] == "train" else PASS_FIGURES
    if not case["full_blocks"]:
        return {k: traces[0][k] for k in figures}
    base = traces[0]
    counts = points(case["full_blocks"])[0]
    out = {}
    for key in figures:
        value = base[key]
        for (name, full), more in zip(case["full_blocks"].items(), traces[1:]):
            value += (full - counts[name]) * (more[key] - base[key])
        out[key] = round(value)
    if case["phase"] == "train":
        # each phase extrapolated on its own, then the larger: without
        # accumulation the first micro-batch's forward/backward (beside the
        # optimizer states of earlier steps) or the step; with it the second's
        out["peak"] = max(out["fb_peak"] + out["optimizer_states"], out["step_peak"])
        out["peak_accum"] = max(out["fb_peak_accum"] + out["optimizer_states"], out["step_peak"])
    return out
