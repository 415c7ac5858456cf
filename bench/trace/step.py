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
- HF Trainer's bf16 mixed precision is accelerate's native AMP, CUDA autocast
  around the model's forward (accelerate 1.11.0 accelerator.py:584-592,
  1750-1760: not under DeepSpeed or Megatron, whose engines cast the model and
  leave autocast off); the tracer runs autocast(bfloat16) around forward and
  loss, with CUDA's float32 op list when the case says cuda_autocast (every
  LLM grid case: grid.CUDA_AUTOCAST);
- the losses are the trainers': sft/pt the model's own loss; dpo/kto
  concatenated_forward casts logits to fp32 and takes log_softmax
  (train/dpo/trainer.py:230, train/trainer_utils.py:608-612), the reference
  forward under no_grad after the policy forward (dpo/trainer.py:286-293), by
  disabling the adapter under LoRA (dpo/trainer.py:262-264); rm the value head
  on the last hidden states, pairwise (train/rm/trainer.py); orpo and simpo
  (the dpo stage with pref_loss orpo / simpo) the pairwise rows without a
  reference model, log-probabilities averaged over the tokens
  (hparams/finetuning_args.py:593, dpo/trainer.py:150-166, 234-235);
- QLoRA: bitsandbytes cannot run on CPU, so its Linear4bit is stood in for by
  the tensors its PyTorch path holds (Linear4bitPath): the packed NF4 weight
  and its double-quantised statistics, the bf16 weight its kernel dequantises
  in forward and again in backward, no saved input; the norms in fp32 under
  upcast_layernorm (model_utils/checkpointing.py:142-146), or every weight
  that is not 4-bit in fp32 under PEFT's prepare_model_for_kbit_training (the
  TRL / axolotl path);
- use_unsloth_gc: LlamaFactory's UnslothGradientCheckpointing
  (model_utils/checkpointing.py:34-68), each checkpointed input copied to the
  host and back for the recompute.
"""
from __future__ import annotations

import contextlib
import gc
import json
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

from cuda_autocast import cuda_policy  # beside this script (sys.path[0])

# LlamaFactory's lora_target "all" is every linear layer but the output layer
# (model/model_utils/misc.py find_all_linear_modules), as PEFT's "all-linear".
LORA_TARGETS = {"qv": ["q_proj", "v_proj"], "all": "all-linear"}
ADAPTERS = ("lora", "qlora")


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


@contextlib.contextmanager
def no_hooks_without_grad():
    """MemTracker's ModTracker (torch/distributed/_tools/mod_tracker.py:215-248 at
    torch 2.13) and FlopCounterMode's ModuleTracker (torch/utils/module_tracker.py:
    128-147) register a multi-grad hook on every module input and output that
    requires grad, also in a forward under no_grad. The no_grad forwards of KTO,
    DPO and PPO make such tensors as leaves: PEFT's enable_input_require_grads
    on the embedding output, the checkpointing wrapper's requires_grad_ on each
    layer input (trainable_layers_checkpointed). A hook on a leaf holds it
    through its AccumulateGrad node (register_multi_grad_hook keeps the nodes,
    torch/autograd/graph.py:643), a cycle through C++ the cycle collector does
    not break, and ModuleTracker keeps the handles until it exits: the trace kept
    each no_grad forward's embedding output and, in KTO's KL forward, every
    checkpointed layer input, which a training run (no trackers) frees. Under
    no_grad no backward reaches the hook, so registering none tracks the same.

    Nor inside a backward: reentrant checkpointing's recompute runs each layer
    again on `detach_variable` of its saved input (torch/utils/checkpoint.py:308),
    a leaf that requires grad and shares the checkpoint's storage. ModTracker
    registers no hook in backward (mod_tracker.py:226, 245, `if not
    self.is_bw`), ModuleTracker does (module_tracker.py:128-147), so the trace
    kept every layer's checkpoint to the end of the step: full tuning's fp32
    layer inputs (4 h bytes per token and layer, 8 h under RM's pairwise rows)
    in the late backward and the optimizer step, which a real run frees as each
    layer's backward ends (a real tiny Llama with FlopCounterMode on: all 4
    detached inputs alive after backward; off, or with this: none). The hooks
    only attribute FLOPs to modules; the counts are the dispatcher's, the same."""
    from torch.distributed._tools import mod_tracker
    from torch.utils import module_tracker

    register = torch.autograd.graph.register_multi_grad_hook

    def only_with_grad(tensors, fn, **kwargs):
        in_backward = torch._C._current_graph_task_id() != -1
        return register(tensors, fn, **kwargs) if torch.is_grad_enabled() and not in_backward else _NoHandle()

    mod_tracker.register_multi_grad_hook = module_tracker.register_multi_grad_hook = only_with_grad
    try:
        yield
    finally:
        mod_tracker.register_multi_grad_hook = module_tracker.register_multi_grad_hook = register


@contextlib.contextmanager
def fused_dropout():
    """CUDA's dropout: at::dropout takes the fused native_dropout for a CUDA input
    (aten/src/ATen/native/Dropout.cpp, is_fused_kernel_acceptable: input.is_cuda(),
    0 < p < 1), which saves a bool mask (1 byte per element) for backward; on a
    CPU input it multiplies by a noise tensor of the input's dtype (bf16: 2 bytes
    saved). The trace runs on the fake CPU device, so dropout in training goes
    through native_dropout here, as it would on the GPU."""
    functional = torch.nn.functional
    dropout = functional.dropout

    def cuda_dropout(input, p=0.5, training=True, inplace=False):
        if training and 0 < p < 1 and not inplace and input.numel() > 0:
            return torch.native_dropout(input, p, True)[0]
        return dropout(input, p, training, inplace)

    functional.dropout = cuda_dropout
    try:
        yield
    finally:
        functional.dropout = dropout


def trainer_dropout(model, case) -> None:
    """LlamaFactory's DPO and KTO trainers (the dpo stage's orpo and simpo too)
    call trl's disable_dropout_in_model on the policy and the reference model
    (train/dpo/trainer.py:57-60, train/kto/trainer.py:56-59 at ff6d4d12): every
    nn.Dropout's p set to 0. The other stages keep the model's dropout."""
    if case["task"] in ("dpo", "kto", "orpo", "simpo"):
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0


def build_model(case):
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = dict(case["config"])
    kwargs["num_hidden_layers"] = case["layers"]
    if case.get("attention_dropout_off"):  # grid.attention_dropout_stand_in: CUDA flash's tensors
        for key in ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob"):
            if key in kwargs:
                kwargs[key] = 0.0
    if case["model_type"] == "gpt2":
        kwargs["n_layer"] = case["layers"]
    config = AutoConfig.for_model(case["model_type"], **kwargs)
    config._attn_implementation = case["attention"]
    config.use_cache = False
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                             attn_implementation=case["attention"])
    trainer_dropout(model, case)
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
    if offloaded_checkpoints:
        return UnslothGradientCheckpointing.apply(partial(func, **kwargs) if kwargs else func, *args)
    return checkpoint(func, *args, use_reentrant=True, **kwargs)


offloaded_checkpoints = False  # set per case: use_unsloth_gc


class UnslothGradientCheckpointing(torch.autograd.Function):
    """LlamaFactory's use_unsloth_gc function (model_utils/checkpointing.py:34-68)
    with its two device moves made explicit: the forward copies the layer's
    input to the host (`.to("cpu", non_blocking=True)`, :46), so the device
    keeps nothing; the backward copies it back (`.to("cuda")`, :59), a fresh
    device tensor of the input's size, and recomputes the layer. On the fake
    CPU device the first move would alias, so the host copy is its shape."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, forward_function, hidden_states, *args):
        ctx.host = (hidden_states.shape, hidden_states.dtype)
        with torch.no_grad():
            outputs = forward_function(hidden_states, *args)
        ctx.forward_function = forward_function
        ctx.args = args
        return outputs

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad_output):
        shape, dtype = ctx.host
        hidden_states = torch.empty(shape, dtype=dtype)  # back from the host
        hidden_states.requires_grad_(True)
        with torch.enable_grad():
            outputs = ctx.forward_function(hidden_states, *ctx.args)
            output = outputs[0] if isinstance(outputs, tuple) else outputs
        torch.autograd.backward(output, grad_output)
        return (None, hidden_states.grad) + (None,) * len(ctx.args)


class _MatMul4bit(torch.autograd.Function):
    """bitsandbytes' MatMul4Bit (autograd/_functions.py): forward dequantises
    the weight to the input's dtype and runs F.linear; it keeps the packed
    weight, not the input (the weight is frozen); backward dequantises again
    for the input's gradient. The CUDA kernel writes the same bf16 weight the
    stand-in allocates, so the tensors are bitsandbytes'; what differs is the
    kernel's own workspace (none for dequantize_4bit)."""

    @staticmethod
    def forward(ctx, x, packed, bias, shape):
        ctx.save_for_backward(packed)
        ctx.shape = shape
        weight = torch.empty(shape, dtype=x.dtype)  # F.dequantize_4bit(B, quant_state).to(A.dtype)
        return torch.nn.functional.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        weight = torch.empty(ctx.shape, dtype=grad_output.dtype)
        return torch.matmul(grad_output, weight), None, None, None


class Linear4bitPath(torch.nn.Linear):
    """bitsandbytes' Linear4bit as transformers loads it with LlamaFactory's
    defaults (quantization_type nf4, double_quantization true, compute dtype
    bf16): a Params4bit of ceil(n/2) uint8 bytes, the quantisation state
    (absmax quantised to one byte per 64-weight block, an fp32 absmax per 256
    blocks, the 16-value NF4 code), the bias in 16 bits. Its forward is
    Linear4bit.forward (nn/modules.py): input cast to the compute dtype, the
    4-bit matmul, the output cast back to the input's dtype. A subclass of
    nn.Linear, so PEFT wraps it with its plain LoRA layer (the bnb LoRA layer
    adds one clone of the base output, a transient)."""

    def __init__(self, linear, compute_dtype=torch.bfloat16):
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        n = self.in_features * self.out_features
        blocks = -(-n // 64)
        self.weight = torch.nn.Parameter(torch.empty(-(-n // 2), 1, dtype=torch.uint8), requires_grad=False)
        self.register_buffer("absmax", torch.empty(blocks, dtype=torch.uint8))
        self.register_buffer("nested_absmax", torch.empty(-(-blocks // 256), dtype=torch.float32))
        self.register_buffer("code", torch.empty(16, dtype=torch.float32))
        self.bias = linear.bias
        if self.bias is not None:
            self.bias.requires_grad_(False)
        self.compute_dtype = compute_dtype

    def forward(self, x):
        inp_dtype = x.dtype
        x = x.to(self.compute_dtype)
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        return _MatMul4bit.apply(x, self.weight, bias, (self.out_features, self.in_features)).to(inp_dtype)


def quantize_4bit(model):
    """transformers' bitsandbytes integration replaces every nn.Linear but the
    output layer (get_keys_to_not_convert: lm_head) by a Linear4bit."""
    head = model.get_output_embeddings()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and child is not head:
                setattr(parent, name, Linear4bitPath(child))
    for p in model.parameters():
        p.requires_grad_(False)
    model.is_loaded_in_4bit = True


def setup_method(model, case):
    """LlamaFactory's adapter.py: which parameters train, in which dtype."""
    method = case["method"]
    if method == "qlora":
        quantize_4bit(model)
        if case.get("upcast") == "layernorm":  # upcast_layernorm (checkpointing.py:142-146)
            norm_names = ("norm", "ln_f", "ln_attn", "ln_mlp")  # extras/constants.py LAYERNORM_NAMES
            for name, p in model.named_parameters():
                if p.ndim == 1 and any(n in name for n in norm_names):
                    p.data = p.data.to(torch.float32)
        elif case.get("upcast") == "kbit":
            from peft import prepare_model_for_kbit_training
            prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
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
    Everything is on one (fake CPU) device, so only the dtype moves, and as in
    PEFT only to a floating base dtype (a 4-bit base leaves them fp32)."""
    dtype = self.get_base_layer().weight.dtype
    if not dtype.is_floating_point:
        return
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


DECODED = 3  # response tokens the PPO trace generates one decode step at a time


class _ValueHead(torch.nn.Module):
    """trl's AutoModelForCausalLMWithValueHead.forward (trl 0.9.6, the newest
    LlamaFactory's PPO trainer accepts, ppo/trainer.py:86-93): the model's last
    hidden state through the ValueHead (dropout 0.1, cast to the head's dtype,
    Linear(hidden, 1)), the LM logits upcast to fp32. A fresh parent per call, as
    _Again: the policy runs several top-level forwards in one PPO step."""

    def __init__(self, model, head):
        super().__init__()
        object.__setattr__(self, "inner", model)
        object.__setattr__(self, "head", head)

    def forward(self, **kwargs):
        out = self.inner(output_hidden_states=True, use_cache=False, **kwargs)
        hidden = torch.nn.functional.dropout(out.hidden_states[-1], 0.1, self.inner.training)
        values = self.head(hidden.to(self.head.weight.dtype)).squeeze(-1)
        return out.logits.float(), values


def _logprobs_from_logits(logits, labels):
    """trl.core.logprobs_from_logits (0.9.6)."""
    return torch.gather(logits.log_softmax(2), 2, labels.unsqueeze(2)).squeeze(-1)


def ppo_loss(model, case, rows):
    """One PPO step as LlamaFactory's CustomPPOTrainer.ppo_train runs it over one
    mini-batch (train/ppo/trainer.py:215-245 at ff6d4d12, trl 0.9.6's
    PPOTrainer.step with ppo_epochs 1): the rollout in eval mode without
    gradients (generate: a prefill of the query and one decode step per response
    token into the KV cache, get_inputs :337-355; the reward model's value of the
    full sequence, get_rewards :370-395: a second adapter of the policy under
    reward_model_type lora, replace_model, or a full reward model), then in
    train mode the policy's and the reference's log-probabilities and values
    without gradients (the reference by disabling the adapter under LoRA, a
    separate model under full tuning), then the mini-batch's forward with
    gradients (batched_forward_pass :420-488: fp32 logits, log_softmax, the
    return_logits cat) and trl's clipped policy and value loss (the entropy
    of the logits is computed for the stats and dropped before backward).
    The query and the response share the sequence (LlamaFactory's cutoff_len
    for the query, max_new_tokens for the response)."""
    seq, vocab = case["seq"], case["config"]["vocab_size"]
    head = case["value_head"]
    model.eval()
    with torch.no_grad():
        # generate: prefill (logits of the last position only), then decode. The
        # tracer prefills all but the last DECODED response tokens with the query
        # (the same KV cache and FLOPs; a decode step per token costs ~1 s of
        # CPU under FakeTensorMode) and decodes those one by one.
        prefilled = torch.randint(0, vocab, (rows, seq - DECODED))
        out = model(input_ids=prefilled, use_cache=True, logits_to_keep=1)
        cache, tokens = out.past_key_values, [prefilled, out.logits[:, -1].argmax(-1, keepdim=True)]
        del out
        for _ in range(DECODED - 1):
            out = _Again(model)(input_ids=tokens[-1], past_key_values=cache, use_cache=True, logits_to_keep=1)
            tokens.append(out.logits[:, -1].argmax(-1, keepdim=True))
            del out
        del cache
        ids = torch.cat(tokens, dim=1)
        del tokens
        # get_rewards: the reward model's value at the last token
        if case["method"] in ADAPTERS:
            model.set_adapter("reward")  # replace_model(target="reward")
            _, rewards = _ValueHead(model, head)(input_ids=ids)
            model.set_adapter("default")
        else:
            _, rewards = _ValueHead(case["reward_model"], case["reward_head"])(input_ids=ids)
        rewards = rewards[:, -1].float()
    model.train()
    labels = ids[:, 1:]
    with torch.no_grad():
        logits, old_values = _ValueHead(model, head)(input_ids=ids)
        old_logprobs = _logprobs_from_logits(logits[:, :-1], labels)
        del logits
        if case["method"] in ADAPTERS:
            with model.disable_adapter():
                logits, _ = _ValueHead(model, head)(input_ids=ids)
        else:
            logits, _ = _ValueHead(case["reference_model"], case["reward_head"])(input_ids=ids)
        ref_logprobs = _logprobs_from_logits(logits[:, :-1], labels)
        del logits
        # compute_rewards (KL penalty) and compute_advantages: per-token rows
        scores = -0.05 * (old_logprobs - ref_logprobs)
        scores[:, -1] += rewards
        values = old_values[:, :-1]
        returns = scores + values
        advantages = returns - values
    logits, vpreds = _ValueHead(model, head)(input_ids=ids)
    logprobs = _logprobs_from_logits(logits[:, :-1], labels)
    logits = torch.cat([logits])[:, :-1]  # batched_forward_pass(return_logits=True)
    vpreds = torch.cat([vpreds])[:, :-1]
    # trl 0.9.6 PPOTrainer.loss
    vpredclipped = torch.max(torch.min(vpreds, values + 0.2), values - 0.2)
    vf_loss = 0.5 * torch.max((vpreds - returns) ** 2, (vpredclipped - returns) ** 2).mean()
    ratio = torch.exp(logprobs - old_logprobs)
    pg_loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 0.8, 1.2)).mean()
    pd = torch.nn.functional.softmax(logits, dim=-1)  # entropy_from_logits, for the stats
    entropy = (torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)).mean().detach()
    del pd, entropy, logits
    return pg_loss + 0.1 * vf_loss


def task_loss(model, case, rows):
    """The loss as LlamaFactory's trainer for the task computes it."""
    task, vocab, seq = case["task"], case["config"]["vocab_size"], case["seq"]
    if task == "ppo":
        return ppo_loss(model, case, rows)
    if task in ("dpo", "orpo", "simpo"):
        rows *= 2  # chosen and rejected rows in one batch (dpo/trainer.py:237-239)
    ids = torch.randint(0, vocab, (rows, seq))
    if task in ("orpo", "simpo"):
        # no reference model (finetuning_args.py:593); average log-probabilities
        # (dpo/trainer.py:234-235); the losses of dpo/trainer.py:150-166
        _, logps = _policy_logps(model, ids, grad=True)
        chosen, rejected = (logps / (seq - 1)).split(rows // 2)
        beta = 0.1
        if task == "orpo":
            log_odds = (chosen - rejected) - (torch.log1p(-torch.exp(chosen)) - torch.log1p(-torch.exp(rejected)))
            losses = -chosen + beta * -torch.nn.functional.logsigmoid(log_odds)
        else:
            losses = -torch.nn.functional.logsigmoid(beta * ((chosen - rejected) - 0.5 / beta))
        return losses.mean()
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
    ref_context = model.disable_adapter() if case["method"] in ADAPTERS else contextlib.nullcontext()
    if task == "dpo":
        logits, logps = _policy_logps(model, ids, grad=True)
        if case["reference"]:
            with ref_context:
                _, ref_logps = _policy_logps(reference, ids, grad=False, again=True)
            logps = logps - ref_logps
        chosen, rejected = logps.split(rows // 2)
        return -torch.nn.functional.logsigmoid(0.1 * (chosen - rejected)).mean()
    # kto: LlamaFactory's concatenated_forward (kto/trainer.py:183-199) for the
    # policy, then under no_grad for the reference (compute_reference_log_probs,
    # :201-218): the target rows (with gradients for the policy), the KL rows
    # without, then the chosen/rejected copies of the target logits; only the
    # copies and the log-probabilities leave it, so each call's fp32 target and
    # KL logits are freed when it returns (the policy's log-softmax stays saved
    # for backward)
    def concatenated_forward(runner, grad, again):
        logits, logps = _policy_logps(runner, ids, grad=grad, again=again)
        kl_logits, kl_logps = _policy_logps(runner, ids, grad=False, again=True)
        # boolean indexing copies the rows (kto/trainer.py:194-196); index_select
        # copies the same bytes without nonzero's data-dependent shape
        kept = (logits.index_select(0, torch.arange(0, rows, 2)), logits.index_select(0, torch.arange(1, rows, 2)))
        del logits, kl_logits
        return kept, logps, kl_logps

    kept, logps, kl_logps = concatenated_forward(model, grad=True, again=False)
    if case["reference"]:
        with ref_context, torch.no_grad():
            _, ref_logps, ref_kl = concatenated_forward(reference, grad=False, again=True)
        logps, kl_logps = logps - ref_logps, kl_logps - ref_kl
    del kept
    return (1 - torch.sigmoid(0.1 * (logps - kl_logps.mean()))).mean()


def ppo_models(model, case):
    """The PPO stage's other models (train/ppo/workflow.py:50-52, trainer_utils.py
    create_ref_model / create_reward_model at ff6d4d12). LoRA: no reference model
    (trl disables the adapter), the reward model a second adapter of the policy
    (reward_model_type lora: load_adapter(reward_model, "reward"), its value head
    as two buffers). Full: a frozen bf16 reference with a value head, and a
    frozen bf16 reward model (reward_model_type full: LoRA rewards need
    finetuning_type lora); frozen models' fp32 parameters go to the compute
    dtype (model/loader.py: not is_trainable)."""
    hidden = case["config"]["hidden_size"]
    if case["method"] in ADAPTERS:
        from peft import LoraConfig
        config = LoraConfig(r=case["lora_rank"], lora_alpha=2 * case["lora_rank"], lora_dropout=0.0,
                            target_modules=LORA_TARGETS[case["lora_targets"]], task_type="CAUSAL_LM")
        with same_device_moves_skipped():
            model.add_adapter("reward", config)
        for name, p in model.named_parameters():  # the reward adapter is frozen
            if ".reward." in name:
                p.requires_grad_(False)
        model.register_buffer("reward_head_weight", torch.empty(1, hidden), persistent=False)
        model.register_buffer("reward_head_bias", torch.empty(1), persistent=False)
        return []
    extra = []
    for key in ("reference_model", "reward_model"):
        other = build_model(case)
        other.eval().requires_grad_(False)
        case[key] = other
        extra.append(other)
    case["reward_head"] = torch.nn.Linear(hidden, 1, dtype=torch.bfloat16).requires_grad_(False)
    return extra + [case["reward_head"]]


def _device(snapshot):
    """The (fake) CPU device's figures: the device the model runs on."""
    return next((v for k, v in snapshot.items() if torch.device(k).type == "cpu"), {})


def _category_bytes(snapshot, names):
    by_device = _device(snapshot)
    return sum(int(v) for k, v in by_device.items() if k != "Total" and str(k).split(".")[-1] in names)


def _total(snapshot):
    by_device = _device(snapshot)
    return int(by_device.get("Total", 0))


def collect_cycles_per_layer(model) -> None:
    """Run Python's cycle collector as each decoder layer starts (its forward,
    and under reentrant checkpointing its recompute in backward). Some tensor of
    each layer's backward is freed only by the cycle collector (a reference
    cycle, not a reference count), so without this the peak holds as many of
    them as the collector has not yet reached: the figures depended on where
    its thresholds fell, i.e. on the cases traced before in the same process
    (Mixtral's and Mistral's RM rows held one extra layer input per layer, 2x
    the checkpoint's bytes per layer, in grid.json of 2026-12-02). A training
    process creates thousands of Python objects per layer, so its collector
    runs about once per layer: this frees them as promptly, and makes the
    trace independent of what ran before."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    def collect(module, args):
        gc.collect()  # a forward pre-hook's return value would replace the inputs

    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            module.register_forward_pre_hook(collect)


def trace(case):
    """One training step; sizes in bytes: the persistent states (parameters,
    gradients after backward, optimizer states after the step), the forward and
    backward peak with what is transient in it, and the optimizer step's own
    peak (from the end of backward: not the forward/backward's)."""
    global offloaded_checkpoints
    torch.manual_seed(0)
    offloaded_checkpoints = bool(case.get("offload_checkpoints"))
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = build_model(case)
        if case["checkpointing"]:  # before the adapters, as LlamaFactory's loader does
            model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=trainable_layers_checkpointed)
        model = setup_method(model, case)
        model.train()
        collect_cycles_per_layer(model)
        extra = []
        if case["task"] in ("rm", "ppo"):
            case["value_head"] = torch.nn.Linear(case["config"]["hidden_size"], 1, dtype=torch.float32)
            extra.append(case["value_head"])
        if case["task"] == "ppo":
            extra += ppo_models(model, case)
        elif case["reference"] and case["method"] not in ADAPTERS:
            ref = build_model(case)
            ref.eval().requires_grad_(False)
            case["reference_model"] = ref
            extra.append(ref)
        params = [p for m in [model, *extra] for p in m.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-5, foreach=True)  # adamw_torch, foreach as on CUDA
        tracker = MemTracker()
        with frozen_params_hookable(), no_hooks_without_grad(), fused_dropout():
            tracker.track_external(model, optimizer, *extra)
            flops = FlopCounterMode(display=False)
            with tracker, flops:
                states = _category_bytes(tracker.get_tracker_snapshot("current"), ("PARAM", "BUFFER"))
                # CUDA autocast's float32 list when the case asks (cuda_autocast.py;
                # every LLM grid case: grid.CUDA_AUTOCAST)
                with cuda_policy(case.get("cuda_autocast", False)):
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        loss = task_loss(model, case, case["batch"])
                    loss.backward()
                    del loss
                fb_peak = tracker.get_tracker_snapshot("peak")
                grads = _category_bytes(tracker.get_tracker_snapshot("current"), ("GRAD",))
                # the step's own peak (as step_dit.py): at reduced depth the
                # forward/backward may peak higher than the step, and a cumulative
                # peak would hide the step's line, whose slope (weights, gradients,
                # states and foreach temporaries per layer) is the steepest at full
                # depth (gemma3-4b full b2 x 2048: 16.25 GiB cumulative at depth 1,
                # the step's own 14.29)
                tracker._peak_mem_snap = tracker.get_tracker_snapshot("current")
                tracker._peak_mem = {dev: snap["Total"] for dev, snap in tracker._peak_mem_snap.items()}
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


def serve(trace_case) -> int:
    """Trace each case of the JSON list on stdin; one JSON line per result."""
    cases = json.load(sys.stdin)
    for case in cases:
        gc.collect()  # each case starts from the same collector state (collect_cycles_per_layer)
        try:
            result = trace_case(case)
        except Exception as error:  # one failed case must not stop the grid
            result = {"id": case["id"], "error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(json.dumps(result), flush=True)
    return 0


def main() -> int:
    return serve(trace)


if __name__ == "__main__":
    sys.exit(main())
