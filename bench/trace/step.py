"""One traced training step, run INSIDE the side venv (torch, transformers, peft).

Reads a JSON list of cases on stdin, writes one JSON line per case on stdout.
A case: {"id", "model_type", "config" (HF config kwargs), "layers", "method",
"lora_targets", "lora_rank", "task", "checkpointing", "attention", "batch",
"seq"}. Every tensor is a FakeTensor: no weights, no compute, only shapes,
dtypes and lifetimes. Memory is MemTracker's peak snapshot (torch.distributed.
_tools.mem_tracker); FLOPs are FlopCounterMode's.

The setup follows LlamaFactory at ff6d4d12 (each step cites its line):
- weights load in bf16; trainable parameters are upcast to fp32 unless pure_bf16
  (src/llamafactory/model/adapter.py:337-349, 51-52, 133-134; LoRA through
  get_peft_model(autocast_adapter_dtype=True), adapter.py:281);
- gradient checkpointing is LlamaFactory's wrapper of torch.utils.checkpoint
  with use_reentrant=True, set before the adapters
  (model/model_utils/checkpointing.py:100-123, 141, 187-197);
- AdamW with foreach=True: optim adamw_torch (the KB's default), foreach as
  torch picks it on CUDA; the step then holds one temporary per trained weight
  (HF's default on torch>=2.8, adamw_torch_fused, would not);
- HF Trainer's bf16 mixed precision is autocast(bfloat16) around forward and loss;
- the losses are the trainers': sft/pt the model's own loss; dpo/kto
  concatenated_forward casts logits to fp32 and takes log_softmax
  (train/dpo/trainer.py:230, train/trainer_utils.py:608-612), the reference
  forward under no_grad after the policy forward (dpo/trainer.py:286-293), by
  disabling the adapter under LoRA (dpo/trainer.py:262-264); rm the value head
  on the last hidden states, pairwise (train/rm/trainer.py).
"""
from __future__ import annotations

import contextlib
import json
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

# LlamaFactory's lora_target "all" is every linear layer but the output layer
# (model/model_utils/misc.py find_all_linear_modules), as PEFT's "all-linear".
LORA_TARGETS = {"qv": ["q_proj", "v_proj"], "all": "all-linear"}


class _NoHandle:
    def remove(self) -> None:
        pass


@contextlib.contextmanager
def frozen_params_hookable():
    """MemTracker registers a gradient hook on every parameter; a frozen one
    refuses (RuntimeError: cannot register a hook on a tensor that doesn't
    require gradient). Frozen parameters never get a gradient, so a no-op
    handle is the same outcome."""
    hook, post = torch.Tensor.register_hook, torch.Tensor.register_post_accumulate_grad_hook

    def safe_hook(self, fn):
        return hook(self, fn) if self.requires_grad else _NoHandle()

    def safe_post(self, fn):
        return post(self, fn) if self.requires_grad else _NoHandle()

    torch.Tensor.register_hook, torch.Tensor.register_post_accumulate_grad_hook = safe_hook, safe_post
    try:
        yield
    finally:
        torch.Tensor.register_hook, torch.Tensor.register_post_accumulate_grad_hook = hook, post


def build_model(case):
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = dict(case["config"])
    kwargs["num_hidden_layers"] = case["layers"]
    config = AutoConfig.for_model(case["model_type"], **kwargs)
    config._attn_implementation = case["attention"]
    config.use_cache = False
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                             attn_implementation=case["attention"])
    return model


def trainable_layers_checkpointed(func, *args, **kwargs):
    """LlamaFactory's custom_gradient_checkpointing_func around
    torch.utils.checkpoint(use_reentrant=True) (model/model_utils/checkpointing.py:
    100-123, 141): layers with trainable parameters are checkpointed, their hidden
    states made to require gradients; frozen layers run plainly."""
    from functools import partial

    from torch.utils.checkpoint import checkpoint

    module = func.func.__self__ if isinstance(func, partial) else func.__self__
    if not any(p.requires_grad for p in module.parameters()):
        return func(*args, **kwargs)
    for arg in args:
        if torch.is_tensor(arg) and torch.is_floating_point(arg):
            arg.requires_grad_(True)
            break
    return checkpoint(func, *args, use_reentrant=True, **kwargs)


def setup_method(model, case):
    """LlamaFactory's adapter.py: which parameters train, in which dtype."""
    method = case["method"]
    if method == "full":
        for p in model.parameters():
            p.data = p.data.to(torch.float32)
        return model
    if method == "freeze":  # freeze_trainable_layers 2 by default: the last two layers train
        layers = model.model.layers
        trainable = {f"layers.{i}." for i in range(len(layers) - case.get("freeze_layers", 2), len(layers))}
        for name, p in model.named_parameters():
            if any(t in name for t in trainable):
                p.data = p.data.to(torch.float32)
            else:
                p.requires_grad_(False)
        return model
    from peft import LoraConfig, get_peft_model
    from peft.tuners import tuners_utils

    tuners_utils.BaseTunerLayer._move_adapter_to_device_of_base_layer = _adapter_to_base_dtype
    config = LoraConfig(r=case["lora_rank"], lora_alpha=2 * case["lora_rank"], lora_dropout=0.0,
                        target_modules=LORA_TARGETS[case["lora_targets"]], task_type="CAUSAL_LM")
    with same_device_moves_skipped():
        return get_peft_model(model, config, autocast_adapter_dtype=True)


@contextlib.contextmanager
def same_device_moves_skipped():
    """PEFT moves each new LoRA layer to its base weight's device with
    Module.to(device); on FakeTensors Module._apply swaps every parameter with
    itself, which torch.utils.swap_tensors refuses. All tensors are on one fake
    CPU device, so a move to a device is the identity."""
    move = torch.nn.Module.to

    def to(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], (torch.device, str)):
            return self
        return move(self, *args, **kwargs)

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = move


def _adapter_to_base_dtype(self, adapter_name, device=None):
    """PEFT moves new adapters with Module.to(), which swaps parameters and fails
    on FakeTensors ("_apply(): Couldn't swap"); the same cast by .data works.
    Everything is on one (fake CPU) device, so only the dtype moves."""
    dtype = self.get_base_layer().weight.dtype
    for name in self.adapter_layer_names + self.other_param_names:
        layer = getattr(self, name, None)
        if isinstance(layer, torch.nn.Module) and adapter_name in layer:
            for param in layer[adapter_name].parameters():
                param.data = param.data.to(dtype)


def sequence_logps(logits, labels):
    """LlamaFactory's get_batch_logps (train/trainer_utils.py:608-612)."""
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    return torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2).sum(-1)


class _Again(torch.nn.Module):
    """A fresh parent for a model's second top-level forward in one step:
    MemTracker takes a repeated root call for the next iteration and refuses
    it, while it tracks a module that a parent calls more than once."""

    def __init__(self, model):
        super().__init__()
        object.__setattr__(self, "inner", model)  # not registered: no second copy of its stats

    def forward(self, **kwargs):
        return self.inner(**kwargs)


def _policy_logps(model, ids, grad, again=False):
    if again:
        model = _Again(model)
    with contextlib.nullcontext() if grad else torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits.to(torch.float32)
        return logits, sequence_logps(logits, ids)


def task_loss(model, case, rows):
    """The loss as LlamaFactory's trainer for the task computes it."""
    task, vocab, seq = case["task"], case["config"]["vocab_size"], case["seq"]
    if task == "dpo":
        rows *= 2  # chosen and rejected rows in one batch (dpo/trainer.py:237-239)
    ids = torch.randint(0, vocab, (rows, seq))
    if task in ("pt", "sft"):
        return model(input_ids=ids, labels=ids, use_cache=False).loss
    if task == "rm":
        # pairwise: chosen and rejected rows, a value head on the last hidden
        # state (rm/trainer.py:98-106; trl's value head upcasts the logits)
        ids = torch.randint(0, vocab, (2 * rows, seq))
        out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
        logits = out.logits.float()
        values = case["value_head"](out.hidden_states[-1]).squeeze(-1)
        del logits, out
        chosen, rejected = values.split(rows)
        return -torch.nn.functional.logsigmoid(chosen[:, -1].float() - rejected[:, -1].float()).mean()
    reference = case.get("reference_model") or model
    ref_context = model.disable_adapter() if case["method"] == "lora" else contextlib.nullcontext()
    if task == "dpo":
        logits, logps = _policy_logps(model, ids, grad=True)
        if case["reference"]:
            with ref_context:
                _, ref_logps = _policy_logps(reference, ids, grad=False, again=True)
            logps = logps - ref_logps
        chosen, rejected = logps.split(rows // 2)
        return -torch.nn.functional.logsigmoid(0.1 * (chosen - rejected)).mean()
    # kto: the target rows with gradients, their KL rows without
    # (kto/trainer.py:184-199), then the reference forwards of both
    logits, logps = _policy_logps(model, ids, grad=True)
    # boolean indexing copies the rows (kto/trainer.py:194-196); index_select
    # copies the same bytes without nonzero's data-dependent shape
    kept = (logits.index_select(0, torch.arange(0, rows, 2)), logits.index_select(0, torch.arange(1, rows, 2)))
    _, kl_logps = _policy_logps(model, ids, grad=False, again=True)
    if case["reference"]:
        with ref_context:
            _, ref_logps = _policy_logps(reference, ids, grad=False, again=True)
            _, ref_kl = _policy_logps(reference, ids, grad=False, again=True)
        logps, kl_logps = logps - ref_logps, kl_logps - ref_kl
    del kept
    return (1 - torch.sigmoid(0.1 * (logps - kl_logps.mean()))).mean()


def _category_bytes(snapshot, names):
    by_device = next(iter(snapshot.values()), {})
    return sum(int(v) for k, v in by_device.items() if k != "Total" and str(k).split(".")[-1] in names)


def _total(snapshot):
    by_device = next(iter(snapshot.values()), {})
    return int(by_device.get("Total", 0))


def trace(case):
    """One training step; sizes in bytes: the persistent states (parameters,
    gradients after backward, optimizer states after the step), the forward and
    backward peak with what is transient in it, and the optimizer step's peak."""
    torch.manual_seed(0)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = build_model(case)
        if case["checkpointing"]:  # before the adapters, as LlamaFactory's loader does
            model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=trainable_layers_checkpointed)
        model = setup_method(model, case)
        model.train()
        extra = []
        if case["task"] == "rm":
            case["value_head"] = torch.nn.Linear(case["config"]["hidden_size"], 1, dtype=torch.float32)
            extra.append(case["value_head"])
        if case["reference"] and case["method"] != "lora":
            ref = build_model(case)
            ref.eval().requires_grad_(False)
            case["reference_model"] = ref
            extra.append(ref)
        params = [p for m in [model, *extra] for p in m.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-5, foreach=True)  # adamw_torch, foreach as on CUDA
        tracker = MemTracker()
        with frozen_params_hookable():
            tracker.track_external(model, optimizer, *extra)
            flops = FlopCounterMode(display=False)
            with tracker, flops:
                states = _category_bytes(tracker.get_tracker_snapshot("current"), ("PARAM", "BUFFER"))
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = task_loss(model, case, case["batch"])
                loss.backward()
                del loss
                fb_peak = tracker.get_tracker_snapshot("peak")
                grads = _category_bytes(tracker.get_tracker_snapshot("current"), ("GRAD",))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                optimizer_states = _category_bytes(tracker.get_tracker_snapshot("current"), ("OPT",))
                step_peak = tracker.get_tracker_snapshot("peak")
    fb_total = _total(fb_peak)
    return {
        "id": case["id"], "layers": case["layers"],
        "weights": states, "gradients": grads, "optimizer_states": optimizer_states,
        "fb_peak": fb_total,
        "fb_transient": fb_total - _category_bytes(fb_peak, ("PARAM", "BUFFER", "GRAD")),
        "step_peak": _total(step_peak),
        # steady state: from the second step on the optimizer states live through
        # forward and backward too
        "peak": max(fb_total + optimizer_states, _total(step_peak)),
        "flops": int(flops.get_total_flops()),
    }


def main() -> int:
    cases = json.load(sys.stdin)
    for case in cases:
        try:
            result = trace(case)
        except Exception as error:  # one failed case must not stop the grid
            result = {"id": case["id"], "error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
