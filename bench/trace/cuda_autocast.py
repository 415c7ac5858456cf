"""CUDA autocast's float32 policy on a CPU trace (run INSIDE the side venv).

The traces run under `torch.autocast("cpu", bfloat16)`, whose lists differ
from CUDA's: CUDA runs layer_norm, group_norm, softmax, log_softmax, pow,
rsqrt, exp, sum, the losses ... in float32 (their bf16 inputs cast up, their
outputs float32), CPU leaves them in the input's dtype. A training run on a
GPU therefore keeps float32 copies the CPU trace never makes: the layer
norm's saved input, its float32 output modulated in float32 (adaLN), and one
bf16 cast of that output per linear layer that reads it (autocast caches the
casts of leaf weights only, never of activations).

`cuda_policy()` makes the CPU trace do what CUDA does for the ops of CUDA's
float32 list: floating inputs in a lower precision are cast to float32 before
the op (kernels at the AutocastCPU dispatch key, above autograd, so the op saves
the float32 copy as CUDA's does); the
lower-precision list (linear, matmul, conv, SDPA) is the same on both devices
and is left to CPU autocast.

Source: PyTorch's autocast op reference (docs/source/amp.rst, "CUDA Ops that
can autocast to float32" and "CPU Ops that can autocast to float32"; the
kernels in aten/src/ATen/autocast_mode.cpp); ops called with an explicit
dtype= are not eligible, as on CUDA.
"""
from __future__ import annotations

import contextlib

import torch

# CUDA's float32 list (aten/src/ATen/autocast_mode.cpp, KERNEL_CUDA(..., fp32)
# and fp32_set_opt_dtype), as the aten overloads a model reaches. The
# set_opt_dtype ops (softmax, sum, ...) keep an explicit dtype= when given.
_FLOAT32_OPS = ("layer_norm", "native_layer_norm", "group_norm", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
                "rsqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "reciprocal", "softplus",
                "mse_loss", "l1_loss", "smooth_l1_loss", "nll_loss", "kl_div",
                "binary_cross_entropy_with_logits", "cosine_similarity", "logsumexp")
_SET_OPT_DTYPE = ("softmax.int", "log_softmax.int", "sum", "sum.dim_IntList", "cumsum", "prod")
_LOWER = (torch.bfloat16, torch.float16)
_AUTOCAST_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_ON = {"enabled": False}
_LIBRARY = None


def _up(value):
    if isinstance(value, torch.Tensor) and value.dtype in _LOWER:
        return value.to(torch.float32)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_up(v) for v in value)
    return value


def _explicit_dtype(args, kwargs) -> bool:
    """softmax(x, dim, dtype) passes it positionally, sum(..., *, dtype) by keyword."""
    return kwargs.get("dtype") is not None or any(isinstance(a, torch.dtype) for a in args)


def _kernel(op, optional_dtype: bool):
    def run(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_CPU):
            if _ON["enabled"] and not (optional_dtype and _explicit_dtype(args, kwargs)):
                args, kwargs = _up(args), {k: _up(v) for k, v in kwargs.items()}
            return op(*args, **kwargs)
    return run


def _register() -> None:
    """AutocastCPU kernels for CUDA's float32 ops (once per process): they
    run at the autocast key, above autograd, so the op saves the float32
    copy, and checkpointing's recomputation, which restores the autocast
    state, runs them again the same way."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    _LIBRARY = torch.library.Library("aten", "IMPL")
    for name, optional in [(n, False) for n in _FLOAT32_OPS] + [(n, True) for n in _SET_OPT_DTYPE]:
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base)
        op = getattr(packet, overload or "default")
        _LIBRARY.impl(name, _kernel(op, optional), "AutocastCPU")


@contextlib.contextmanager
def cuda_policy(enabled: bool = True):
    """Under CPU autocast, CUDA's float32 list too (a no-op when not enabled)."""
    if not enabled:
        yield
        return
    _register()
    _ON["enabled"] = True
    try:
        yield
    finally:
        _ON["enabled"] = False
