"""Does the tracer keep what a training run frees? Run INSIDE the side venv.

A real (not fake) tiny Llama, full tuning with LlamaFactory's checkpointing
wrapper (step.py's trainable_layers_checkpointed, fp32 weights, bf16 autocast):
one forward and backward, then counts the recomputed layers' inputs
(torch.utils.checkpoint.detach_variable's outputs, which share the checkpoints'
storage) still alive, three ways: without the trace's trackers (a training
run), with MemTracker and FlopCounterMode as step.trace enters them but without
step.no_hooks_without_grad, and with it. Prints one JSON line:
{"layers": 4, "plain": 0, "trackers": 4, "trackers_no_hooks": 0} where a
tracker keeps them (FlopCounterMode's ModuleTracker hooks the recompute's leaf
inputs, torch/utils/module_tracker.py:128-147) and step.no_hooks_without_grad
stops it.

    python bench/trace/hooks_check.py     # with the side venv's python
"""
from __future__ import annotations

import contextlib
import gc
import json
import sys
import weakref

import torch
import torch.utils.checkpoint as checkpoint
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

import step  # beside this script (sys.path[0])

LAYERS = 4
CASE = {"model_type": "llama", "config": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
                                          "intermediate_size": 128, "vocab_size": 256},
        "layers": LAYERS, "attention": "sdpa", "task": "sft", "method": "full", "checkpointing": True}


def alive_after_backward(trackers: bool, no_hooks: bool) -> int:
    """How many recomputed layer inputs outlive the backward."""
    refs = []
    detach = checkpoint.detach_variable

    def recording(inputs):
        out = detach(inputs)
        refs.extend(weakref.ref(t) for t in out if isinstance(t, torch.Tensor))
        return out

    checkpoint.detach_variable = recording
    try:
        torch.manual_seed(0)
        model = step.build_model(CASE)
        model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=step.trainable_layers_checkpointed)
        model = step.setup_method(model, CASE)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
        ids = torch.randint(0, CASE["config"]["vocab_size"], (2, 32))
        with contextlib.ExitStack() as stack:
            if trackers:
                stack.enter_context(step.frozen_params_hookable())
                if no_hooks:
                    stack.enter_context(step.no_hooks_without_grad())
                tracker = MemTracker()
                tracker.track_external(model, optimizer)
                stack.enter_context(tracker)
                stack.enter_context(FlopCounterMode(display=False))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            loss.backward()
            del loss
            gc.collect()
            alive = sum(r() is not None for r in refs)
        assert len(refs) == LAYERS, len(refs)  # every layer recomputed once
        return alive
    finally:
        checkpoint.detach_variable = detach


def main() -> int:
    print(json.dumps({"layers": LAYERS, "plain": alive_after_backward(False, False),
                      "trackers": alive_after_backward(True, False),
                      "trackers_no_hooks": alive_after_backward(True, True)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
