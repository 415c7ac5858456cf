"""One traced DiT training step (or encoder / VAE pass), run INSIDE the side venv
(torch, diffusers, transformers, peft).

Reads a JSON list of cases on stdin, writes one JSON line per case on stdout,
as bench/trace/step.py does for the LLMs (its MemTracker helpers are reused).
Every tensor is a FakeTensor: shapes, dtypes and lifetimes, no compute.

A denoiser case ("phase": "train") builds diffusers' FluxTransformer2DModel,
SD3Transformer2DModel, WanTransformer3DModel or QwenImageTransformer2DModel
from the HF config values at a reduced depth ("blocks": the config keys that
set it) and runs one step as diffusers' train_dreambooth_lora_flux.py /
train_dreambooth_flux.py and Flow-Factory's trainers do it:
- the frozen transformer in bf16 (weight_dtype under mixed_precision bf16;
  diffusers examples/dreambooth/train_dreambooth_lora_flux.py, weight_dtype
  cast of the transformer);
- method "lora": PEFT adapters (r = lora_alpha = rank, gaussian init) on
  to_q, to_k, to_v and to_out.0, as the script's attention-only list and
  Flow-Factory's adapters' default target modules; the adapters in the base
  layer's dtype (bf16: the script upcasts them only under fp16);
- method "full": every weight trains in bf16 with bf16 AdamW moments
  (Flow-Factory's master_weight_dtype bfloat16, its default);
  method "full32": every weight in fp32 under bf16 autocast (diffusers'
  train_dreambooth_flux.py: from_pretrained without torch_dtype; Flow-Factory
  with master_weight_dtype float32);
- gradient checkpointing as diffusers' enable_gradient_checkpointing():
  torch.utils.checkpoint(use_reentrant=False) around every block
  (diffusers/models/modeling_utils.py ModelMixin.enable_gradient_checkpointing);
- the flow-matching loss: noisy = (1 - s) x + s n, target n - x, the MSE of
  the prediction and the target in fp32 (train_dreambooth_lora_flux.py's
  loss: weighting * (model_pred.float() - target.float()) ** 2);
- torch AdamW(foreach=True) over the trained parameters (adamw as on CUDA);
- two micro-batches before the step: the first one's peak is the step of a
  run without accumulation (diffusers' scripts' default), the second one's
  runs beside the accumulated gradients (Flow-Factory accumulates over the
  trained timesteps and micro-batches of every optimizer step).

An encoder case ("phase": "encode") builds a text encoder (T5-XXL, umT5-XXL,
CLIP-L) from its config at a reduced depth, in bf16, and runs one no_grad
forward over the prompt tokens; a VAE case ("phase": "vae") builds the VAE
(AutoencoderKL for FLUX/SD3, AutoencoderKLWan for Wan) at full depth and
encodes one sample (or decodes one latent) under no_grad. Their figures:
the weights and the pass's peak.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_autocast import cuda_policy  # noqa: E402
from step import (_adapter_to_base_dtype, _category_bytes, _total, serve,  # noqa: E402
                  frozen_params_hookable, same_device_moves_skipped)

DIFFUSERS_CLASSES = {"flux": "FluxTransformer2DModel", "sd3": "SD3Transformer2DModel",
                     "wan": "WanTransformer3DModel", "qwenimage": "QwenImageTransformer2DModel"}
LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0"]


def _cast(module, dtype):
    """Module.to(dtype) swaps parameters, which FakeTensors refuse; .data does the same cast."""
    for p in module.parameters():
        p.data = p.data.to(dtype)
    for name, b in module.named_buffers():
        if b.is_floating_point():
            b.data = b.data.to(dtype)
    return module


def build_denoiser(case):
    import diffusers
    cls = getattr(diffusers, DIFFUSERS_CLASSES[case["family"]])
    config = dict(case["config"], **case["blocks"])
    if "patch_size" in config and isinstance(config["patch_size"], list):
        config["patch_size"] = tuple(config["patch_size"])
    model = cls(**config)
    return _cast(model, torch.bfloat16)


def latent_inputs(case, model):
    """The denoiser's inputs for one micro-batch: latents at the case's
    resolution (and frames), the prompt embeddings, the timestep."""
    b, h, w = case["batch"], case["height"] // 8, case["width"] // 8
    text = case["text_tokens"]
    bf = torch.bfloat16
    family = case["family"]
    if family == "flux":
        tokens = (h // 2) * (w // 2)
        x = torch.randn(b, tokens, 64, dtype=bf)  # 2x2-packed 16-channel latents
        kwargs = {"encoder_hidden_states": torch.randn(b, text, 4096, dtype=bf),
                  "pooled_projections": torch.randn(b, 768, dtype=bf), "timestep": torch.rand(b),
                  "img_ids": torch.zeros(tokens, 3), "txt_ids": torch.zeros(text, 3)}
        if model.config.guidance_embeds:
            kwargs["guidance"] = torch.full((b,), 3.5)
        return x, kwargs
    if family == "sd3":
        x = torch.randn(b, 16, h, w, dtype=bf)
        return x, {"encoder_hidden_states": torch.randn(b, text, 4096, dtype=bf),
                   "pooled_projections": torch.randn(b, 2048, dtype=bf), "timestep": torch.rand(b) * 1000}
    if family == "wan":
        f = (case["frames"] - 1) // 4 + 1
        x = torch.randn(b, 16, f, h, w, dtype=bf)
        return x, {"encoder_hidden_states": torch.randn(b, text, 4096, dtype=bf),
                   "timestep": torch.rand(b) * 1000}
    if family == "qwenimage":
        tokens = (h // 2) * (w // 2)
        x = torch.randn(b, tokens, 64, dtype=bf)
        return x, {"encoder_hidden_states": torch.randn(b, text, 3584, dtype=bf),
                   "encoder_hidden_states_mask": torch.ones(b, text, dtype=torch.int64),
                   "timestep": torch.rand(b), "img_shapes": [[(1, h // 2, w // 2)]] * b}
    raise ValueError(family)


def setup_method(model, case):
    method = case["method"]
    if method in ("full", "full32"):
        if method == "full32":
            _cast(model, torch.float32)
        model.requires_grad_(True)
        return model
    model.requires_grad_(False)
    from peft import LoraConfig
    from peft.tuners import tuners_utils
    tuners_utils.BaseTunerLayer._move_adapter_to_device_of_base_layer = _adapter_to_base_dtype
    config = LoraConfig(r=case["lora_rank"], lora_alpha=case["lora_rank"], init_lora_weights="gaussian",
                        target_modules=case.get("lora_targets") or LORA_TARGETS)
    with same_device_moves_skipped():
        model.add_adapter(config)
    return model


class _Again(torch.nn.Module):
    """A fresh root for the second micro-batch's forward: MemTracker refuses a
    repeated root call in one iteration (bench/trace/step.py's _Again)."""

    def __init__(self, model):
        super().__init__()
        object.__setattr__(self, "inner", model)

    def forward(self, **kwargs):
        return self.inner(**kwargs)


def micro_batch(model, latents, kwargs, cuda_autocast=False):
    """One forward under bf16 autocast (CUDA's float32 list when asked), the
    flow-matching loss, backward."""
    # the policy stays on through backward: checkpointing recomputes a block
    # there under the autocast state it saved, as on CUDA
    with cuda_policy(cuda_autocast):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            noise = torch.randn_like(latents)
            sigma = torch.rand(latents.shape[0]).view(-1, *([1] * (latents.ndim - 1)))
            noisy = ((1 - sigma) * latents + sigma * noise).to(latents.dtype)
            pred = model(hidden_states=noisy, return_dict=False, **kwargs)[0]
            target = noise - latents
            loss = torch.mean((pred.float() - target.float()) ** 2)
        del pred, noisy, noise
        loss.backward()


def train_trace(case):
    torch.manual_seed(0)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = build_denoiser(case)
        if case["checkpointing"]:
            model.enable_gradient_checkpointing()
        model = setup_method(model, case)
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-5, foreach=True)
        latents, kwargs = latent_inputs(case, model)
        tracker = MemTracker()
        with frozen_params_hookable():
            tracker.track_external(model, optimizer)
            with tracker:
                states = _category_bytes(tracker.get_tracker_snapshot("current"), ("PARAM", "BUFFER"))
                micro_batch(model, latents, kwargs, case.get("cuda_autocast", False))
                fb_peak = tracker.get_tracker_snapshot("peak")
                grads = _category_bytes(tracker.get_tracker_snapshot("current"), ("GRAD",))
                # a second micro-batch before the step (gradient accumulation, as
                # Flow-Factory's trainers always do): its forward and backward run
                # beside the first one's gradients
                micro_batch(_Again(model), latents, kwargs, case.get("cuda_autocast", False))
                fb_peak_accum = _total(tracker.get_tracker_snapshot("peak"))
                # the step's own peak: at reduced depth the forward/backward may
                # peak higher than the step, and a cumulative peak would hide the
                # step's (each phase is extrapolated on its own)
                tracker._peak_mem_snap = tracker.get_tracker_snapshot("current")
                tracker._peak_mem = {dev: snap["Total"] for dev, snap in tracker._peak_mem_snap.items()}
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                optimizer_states = _category_bytes(tracker.get_tracker_snapshot("current"), ("OPT",))
                step_peak = tracker.get_tracker_snapshot("peak")
    fb_total = _total(fb_peak)
    return {"weights": states, "gradients": grads, "optimizer_states": optimizer_states,
            "fb_peak": fb_total,
            "fb_transient": fb_total - _category_bytes(fb_peak, ("PARAM", "BUFFER", "GRAD")),
            "fb_peak_accum": fb_peak_accum, "step_peak": _total(step_peak),
            "peak": max(fb_total + optimizer_states, _total(step_peak)),
            "peak_accum": max(fb_peak_accum + optimizer_states, _total(step_peak))}


class _Pass(torch.nn.Module):
    """A root for MemTracker around an encoder's or VAE's one call."""

    def __init__(self, inner, call):
        super().__init__()
        self.inner, self.call = inner, call

    def forward(self, *args):
        return self.call(self.inner, *args)


def build_encoder(case):
    from transformers import AutoConfig, AutoModel, T5EncoderModel, UMT5EncoderModel, CLIPTextModel
    kwargs = dict(case["config"], **case["blocks"])
    model_type = case["encoder_type"]
    config = AutoConfig.for_model(model_type, **kwargs)
    cls = {"t5": T5EncoderModel, "umt5": UMT5EncoderModel, "clip_text_model": CLIPTextModel}.get(model_type, AutoModel)
    return _cast(cls(config), torch.bfloat16)


def build_vae(case):
    import diffusers
    cls = getattr(diffusers, case["vae_class"])
    return _cast(cls(**case["config"]), torch.bfloat16)


def pass_trace(case):
    """Weights and the peak of one no_grad encoder or VAE pass, in bf16."""
    torch.manual_seed(0)
    with FakeTensorMode(allow_non_fake_inputs=True):
        if case["phase"] == "encode":
            model = build_encoder(case)
            ids = torch.randint(0, case["config"]["vocab_size"], (case["batch"], case["text_tokens"]))
            args, call = (ids,), lambda m, i: m(input_ids=i).last_hidden_state
        else:
            model = build_vae(case)
            b, h, w = case["batch"], case["height"], case["width"]
            video = case["vae_class"] == "AutoencoderKLWan"
            if case["direction"] == "encode":
                shape = (b, 3, case["frames"], h, w) if video else (b, 3, h, w)
                call = lambda m, x: m.encode(x).latent_dist.mean  # noqa: E731
            else:
                f = (case["frames"] - 1) // 4 + 1
                shape = (b, 16, f, h // 8, w // 8) if video else (b, 16, h // 8, w // 8)
                call = lambda m, x: m.decode(x).sample  # noqa: E731
            args = (torch.randn(shape, dtype=torch.bfloat16),)
        model.eval().requires_grad_(False)
        root = _Pass(model, call)
        tracker = MemTracker()
        with frozen_params_hookable():
            tracker.track_external(root)
            with tracker, torch.no_grad():
                weights = _category_bytes(tracker.get_tracker_snapshot("current"), ("PARAM", "BUFFER"))
                out = root(*args)
                peak = _total(tracker.get_tracker_snapshot("peak"))
                del out
    return {"weights": weights, "pass_peak": peak, "pass_transient": peak - weights}


def trace(case):
    result = train_trace(case) if case["phase"] == "train" else pass_trace(case)
    return dict(result, id=case["id"], point=case["point"])


def main() -> int:
    return serve(trace)


if __name__ == "__main__":
    sys.exit(main())
