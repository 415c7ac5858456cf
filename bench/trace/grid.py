"""The trace grid: which models, methods, tasks and shapes are traced.

Models come from kb/catalog/models.yaml (the catalog's facts are the HF
config.json values); each becomes the keyword arguments of its transformers
config class. A case is traced at two reduced depths (DEPTHS) and extrapolated
to the catalog's layer count.
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "kb" / "catalog" / "models.yaml"
DEPTHS = (1, 2)
FREEZE_DEPTHS = (2, 3)  # freeze tuning trains the last 2 layers: both depths must hold them


def depths(case: dict) -> tuple[int, int]:
    return FREEZE_DEPTHS if case["method"] == "freeze" else DEPTHS


# Every LLM case models LlamaFactory on one GPU without DeepSpeed: the HF
# Trainer's bf16 mixed precision is accelerate's native AMP, which wraps the
# model's forward in CUDA autocast (accelerate 1.11.0 accelerator.py:584-592,
# native_amp for bf16 unless DeepSpeed or Megatron; :1750-1760, prepare_model);
# the PPO trainer enters torch.autocast itself (train/ppo/trainer.py:176, 412,
# 454 at ff6d4d12). So the traces take CUDA autocast's float32 op list
# (cuda_autocast.py). Under DeepSpeed's bf16 engine autocast is off (the engine
# casts the module; native_amp False), a path these cases do not model.
CUDA_AUTOCAST = True

# One model per family, each a catalog name; the transformers model_type it is
# built as (Gemma 3's text-only causal LM is gemma3_text), and the attention
# implementations it supports (transformers 5.24 refuses SDPA for Gemma 2).
MODELS = {
    "qwen3-8b": ("qwen3", ("sdpa", "eager")),
    "qwen3-0.6b": ("qwen3", ("sdpa", "eager")),
    "qwen2.5-7b": ("qwen2", ("sdpa", "eager")),
    "qwen2.5-0.5b": ("qwen2", ("sdpa", "eager")),
    "llama3-8b": ("llama", ("sdpa", "eager")),
    "llama3.2-1b": ("llama", ("sdpa", "eager")),
    "qwen3-30b-a3b": ("qwen3_moe", ("sdpa",)),
    "mixtral-8x7b": ("mixtral", ("sdpa",)),
    "gemma2-9b": ("gemma2", ("eager",)),
    "gemma3-4b": ("gemma3_text", ("sdpa", "eager")),
    "phi3-mini": ("phi3", ("sdpa", "eager")),
    "mistral-7b-v0.3": ("mistral", ("sdpa",)),
}

# (method, LoRA targets, checkpointing) for SFT; preference tasks take the first two.
SFT_METHODS = [("lora", "all", True), ("lora", "all", False), ("lora", "qv", True),
               ("full", "", True), ("full", "", False), ("freeze", "", True)]
TASK_METHODS = [("lora", "all", True), ("full", "", True)]
SHAPES = [(1, 1024), (2, 2048)]


def hf_config(model: dict, model_type: str) -> dict:
    """The transformers config kwargs of a catalog model (depth set per trace)."""
    config = {"hidden_size": model["hidden"], "num_attention_heads": model["heads"],
              "num_key_value_heads": model["kv_heads"], "intermediate_size": model["intermediate"],
              "vocab_size": model["vocab"], "tie_word_embeddings": bool(model["tied_embeddings"]),
              "max_position_embeddings": model["max_positions"]}
    if model.get("head_dim"):
        config["head_dim"] = model["head_dim"]
    if model_type == "qwen3_moe":
        config.update(num_experts=model["experts"], num_experts_per_tok=model["experts_active"],
                      moe_intermediate_size=model["moe_intermediate"])
    if model_type == "mixtral":
        config.update(num_local_experts=model["experts"], num_experts_per_tok=model["experts_active"])
    return config


def catalog_models() -> dict[str, dict]:
    data = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    return {m["name"]: m for m in data["models"]}


def cases(full: bool = True) -> list[dict]:
    """Every case of the grid (without depth); full=False: a small subset."""
    catalog = catalog_models()
    out = []
    for name, (model_type, attentions) in MODELS.items():
        model = catalog[name]
        base = {"model": name, "model_type": model_type, "config": hf_config(model, model_type),
                "full_layers": model["layers"], "lora_rank": 8}
        combos = []
        for batch, seq in SHAPES:
            for method, targets, ckpt in SFT_METHODS:
                combos.append(("sft", method, targets, ckpt, attentions[0], batch, seq))
            for attention in attentions[1:]:
                combos.append(("sft", "lora", "all", True, attention, batch, seq))
                combos.append(("sft", "lora", "all", False, attention, batch, seq))
            for task in ("dpo", "kto", "rm"):
                for method, targets, ckpt in TASK_METHODS:
                    combos.append((task, method, targets, ckpt, attentions[0], batch, seq))
            combos.append(("pt", "lora", "all", True, attentions[0], batch, seq))
        if model_type == "phi3":  # fused qkv_proj: no q_proj / v_proj to target
            combos = [c for c in combos if c[2] != "qv"]
        for task, method, targets, ckpt, attention, batch, seq in combos:
            case = dict(base, task=task, method=method, lora_targets=targets or "all",
                        checkpointing=ckpt, attention=attention, batch=batch, seq=seq,
                        reference=task in ("dpo", "kto"), cuda_autocast=CUDA_AUTOCAST)
            case["id"] = "-".join([name, task, method + (f"_{targets}" if targets else ""),
                                   "gc" if ckpt else "nogc", attention, f"b{batch}", f"s{seq}"])
            out.append(case)
    if not full:
        out = [c for c in out if c["model"] in ("qwen3-0.6b", "llama3.2-1b") and c["batch"] == 1]
    return out


# ---- the second grid (bench/data/traces/grid_families.json) ---------------------
# Families the catalog lacks, as their Hugging Face config.json values (the
# layer count apart: each trace sets its own depth). Each entry: model_type,
# the attention implementations transformers 5.8 has for it, the layer count,
# the config, the shapes (batch, seq) and where the values come from.
FAMILIES = {
    "gpt2-xl": {
        "model_type": "gpt2", "attentions": ("sdpa", "eager"), "layers": 48,
        "config": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 1600, "n_head": 25,
                   "activation_function": "gelu_new", "attn_pdrop": 0.1},
        # learned positions: no sequence longer than n_positions
        "shapes": ((1, 1024), (2, 1024)),
        "source": "hf: openai-community/gpt2-xl config.json"},
    "bloom-7b1": {
        "model_type": "bloom", "attentions": ("eager",), "layers": 30,
        "config": {"vocab_size": 250880, "hidden_size": 4096, "n_head": 32,
                   "layer_norm_epsilon": 1e-5, "slow_but_exact": False, "pretraining_tp": 1},
        "shapes": ((1, 1024), (2, 2048)),
        "source": "hf: bigscience/bloom-7b1 config.json (ALiBi; transformers 5.8's BloomPreTrainedModel "
                  "has no SDPA)"},
    "falcon-7b": {
        "model_type": "falcon", "attentions": ("sdpa", "eager"), "layers": 32,
        "config": {"vocab_size": 65024, "hidden_size": 4544, "num_attention_heads": 71,
                   "multi_query": True, "parallel_attn": True, "bias": False, "alibi": False,
                   "new_decoder_architecture": False},
        "shapes": ((1, 1024), (2, 2048)),
        "source": "hf: tiiuae/falcon-7b config.json"},
    "deepseek-v2-lite": {
        "model_type": "deepseek_v2", "attentions": ("sdpa", "eager"), "layers": 27,
        "config": {"vocab_size": 102400, "hidden_size": 2048, "intermediate_size": 10944,
                   "moe_intermediate_size": 1408, "n_routed_experts": 64, "n_shared_experts": 2,
                   "num_experts_per_tok": 6, "first_k_dense_replace": 1, "num_attention_heads": 16,
                   "num_key_value_heads": 16, "q_lora_rank": None, "kv_lora_rank": 512,
                   "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                   "n_group": 1, "topk_group": 1, "topk_method": "greedy", "norm_topk_prob": False,
                   "routed_scaling_factor": 1.0, "max_position_embeddings": 163840,
                   "tie_word_embeddings": False},
        # depth 1 is the dense first layer, depth 2 adds one MoE layer: the
        # per-layer figure is an MoE layer's, as are the other 26
        "shapes": ((1, 1024), (2, 2048)),
        "source": "hf: deepseek-ai/DeepSeek-V2-Lite config.json (MLA, 64 routed + 2 shared experts)"},
    "mistral-7b-v0.1": {
        "model_type": "mistral", "attentions": ("sdpa", "eager"), "layers": 32,
        "config": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                   "num_attention_heads": 32, "num_key_value_heads": 8,
                   "max_position_embeddings": 32768, "sliding_window": 4096,
                   "tie_word_embeddings": False},
        # sliding-window attention past its 4096-token window
        "shapes": ((1, 8192), (2, 8192)),
        "source": "hf: mistralai/Mistral-7B-v0.1 config.json (sliding_window 4096 on every layer)"},
}
FAMILY_METHODS = [("lora", "all", True), ("lora", "all", False), ("full", "", True),
                  ("full", "", False)]
# QLoRA and offloaded checkpointing on catalog models; ORPO / SimPO (LlamaFactory's
# dpo stage with pref_loss orpo / simpo: no reference model) on catalog models
METHOD_MODELS = ("llama3-8b", "qwen2.5-7b", "qwen3-8b")
# (method, upcast, checkpointing): quantization_bit 4 through LlamaFactory
# (upcast none, or upcast_layernorm), or through PEFT's
# prepare_model_for_kbit_training ("kbit": every non-4-bit weight in fp32)
QLORA_VARIANTS = [("qlora", "none", True), ("qlora", "layernorm", True), ("qlora", "kbit", True),
                  ("qlora", "kbit", False)]
PREF_MODELS = ("qwen3-0.6b", "llama3.2-1b", "qwen2.5-7b", "llama3-8b")
PREF_TASKS = ("orpo", "simpo")
FAMILY_SHAPES = [(1, 1024), (2, 2048)]


def _case(base: dict, task: str, method: str, targets: str, ckpt, attention: str,
          batch: int, seq: int, **extra) -> dict:
    """ckpt: True, False or "unsloth" (LlamaFactory's use_unsloth_gc)."""
    case = dict(base, task=task, method=method, lora_targets=targets or "all", checkpointing=bool(ckpt),
                offload_checkpoints=ckpt == "unsloth", attention=attention, batch=batch, seq=seq,
                reference=task in ("dpo", "kto"), upcast=extra.get("upcast", "none"),
                cuda_autocast=CUDA_AUTOCAST)
    gc = {True: "gc", False: "nogc", "unsloth": "unslothgc"}[ckpt]
    upcast = f"_{case['upcast']}" if method == "qlora" else ""
    case["id"] = "-".join([base["model"], task, method + upcast + (f"_{targets}" if targets else ""),
                           gc, attention, f"b{batch}", f"s{seq}"])
    return case


def family_cases(full: bool = True) -> list[dict]:
    """The cases of grid_families.json: the families the catalog lacks, QLoRA's
    dtypes, offloaded checkpointing and the reference-free preference losses."""
    out = []
    for name, family in FAMILIES.items():
        base = {"model": name, "model_type": family["model_type"], "config": dict(family["config"]),
                "full_layers": family["layers"], "lora_rank": 8}
        first = family["attentions"][0]
        for batch, seq in family["shapes"]:
            for method, targets, ckpt in FAMILY_METHODS:
                out.append(_case(base, "sft", method, targets, ckpt, first, batch, seq))
            for attention in family["attentions"][1:]:
                for ckpt in (True, False):
                    out.append(_case(base, "sft", "lora", "all", ckpt, attention, batch, seq))
            for task in ("dpo", "orpo"):
                out.append(_case(base, task, "lora", "all", True, first, batch, seq))
    catalog = catalog_models()
    for name in METHOD_MODELS:
        model_type, attentions = MODELS[name]
        base = {"model": name, "model_type": model_type,
                "config": hf_config(catalog[name], model_type),
                "full_layers": catalog[name]["layers"], "lora_rank": 8}
        for batch, seq in FAMILY_SHAPES:
            for method, upcast, ckpt in QLORA_VARIANTS:
                out.append(_case(base, "sft", method, "all", ckpt, attentions[0], batch, seq,
                                 upcast=upcast))
            out.append(_case(base, "sft", "lora", "all", "unsloth", attentions[0], batch, seq))
            out.append(_case(base, "sft", "full", "", "unsloth", attentions[0], batch, seq))
    for name in PREF_MODELS:
        model_type, attentions = MODELS[name]
        base = {"model": name, "model_type": model_type,
                "config": hf_config(catalog[name], model_type),
                "full_layers": catalog[name]["layers"], "lora_rank": 8}
        for batch, seq in FAMILY_SHAPES:
            for task in PREF_TASKS:
                for method, targets in (("lora", "all"), ("full", "")):
                    out.append(_case(base, task, method, targets, True, attentions[0], batch, seq))
    for case in out:
        if attention_dropout_stand_in(case):
            case["attention_dropout_off"] = True
    if not full:
        out = [c for c in out if c["batch"] == 1 and c["model"] in ("gpt2-xl", "qwen3-0.6b")]
    return out


# ---- the PPO grid (bench/data/traces/grid_ppo.json) -------------------------------
# LlamaFactory's ppo stage: two small catalog models, LoRA (reward_model_type
# lora) and full (reward_model_type full), checkpointing on; the query and the
# generated response take half the sequence each.
PPO_MODELS = ("qwen3-0.6b", "llama3.2-1b")
PPO_METHODS = [("lora", "all", True), ("full", "", True)]
PPO_SHAPES = [(1, 1024)]


def kto_cases(full: bool = True) -> list[dict]:
    """The cases of grid_kto.json: grid.json's KTO rows retraced after step.py's
    no_hooks_without_grad (the trackers' hooks had kept the no_grad forwards'
    layer inputs) and its concatenated_forward (the policy's fp32 target logits
    freed when it returns); LoRA rows first. trace_compare takes these rows over
    grid.json's rows of the same id."""
    rows = [c for c in cases(full) if c["task"] == "kto"]
    first = ("mistral-7b-v0.3", "mixtral-8x7b")  # the rows issue 23 named
    return sorted(rows, key=lambda c: (c["method"] not in ("lora", "qlora"), c["model"] not in first))


def ppo_cases(full: bool = True) -> list[dict]:
    """The cases of grid_ppo.json (full=False: the same few)."""
    catalog = catalog_models()
    out = []
    for name in PPO_MODELS:
        model_type, attentions = MODELS[name]
        base = {"model": name, "model_type": model_type,
                "config": hf_config(catalog[name], model_type),
                "full_layers": catalog[name]["layers"], "lora_rank": 8}
        for batch, seq in PPO_SHAPES:
            for method, targets, ckpt in PPO_METHODS:
                out.append(_case(base, "ppo", method, targets, ckpt, attentions[0], batch, seq))
    for case in out:
        case["reference"] = True
    return out


def hf_config_json(name: str) -> dict:
    """The config.json kbsolve reads for a family model (`--model path`): the
    traced config at the model's full depth, without the keys the HF file
    leaves null."""
    family = FAMILIES[name]
    config = {k: v for k, v in family["config"].items() if v is not None}
    return dict(config, model_type=family["model_type"], num_hidden_layers=family["layers"])


# ---- rows whose CPU trace takes a path no CUDA kernel takes ------------------------
# Keys under which a transformers config gives the attention dropout probability.
ATTENTION_DROPOUT_KEYS = ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob")


def case_config(case: dict) -> dict:
    """The HF config kwargs a grid case (or a row of a grid file) was traced with."""
    if case["model"] in FAMILIES:
        return FAMILIES[case["model"]]["config"]
    model_type = MODELS[case["model"]][0]
    return hf_config(_catalog()[case["model"]], model_type)


@functools.lru_cache(maxsize=1)
def _catalog() -> dict[str, dict]:
    return catalog_models()


def cpu_only_fallback(case: dict) -> str | None:
    """Why the CPU trace of this case materialises attention scores that a CUDA
    kernel would not, or None. Under SDPA, torch's CPU flash kernel refuses
    attention dropout and unequal query/key and value head dims
    (aten/src/ATen/native/transformers/sdp_utils_cpp.cpp, use_flash_attention_cpp:
    check_for_dropout, check_head_dim_size_cpp), so the trace takes the math
    path and keeps the fp32 scores and softmax; on CUDA flash attention takes
    dropout (it keeps the RNG state, no mask) and the memory-efficient kernel a
    value head dim unlike the query's, neither keeping scores. Eager attention
    keeps the scores on every device, so eager rows are never marked."""
    if case["attention"] != "sdpa":
        return None
    config = case_config(case)
    dropout = max((config.get(k) or 0.0) for k in ATTENTION_DROPOUT_KEYS)
    if dropout > 0 and not case.get("attention_dropout_off"):
        return (f"attention dropout {dropout}: torch's CPU flash kernel refuses dropout (math path, "
                "fp32 scores kept); CUDA's flash kernel takes it")
    if config.get("qk_nope_head_dim") is not None:
        qk = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
        v = config.get("v_head_dim", qk)
        if qk != v:
            return (f"query/key head dim {qk} != value head dim {v}: torch's CPU flash kernel needs "
                    "equal head dims (math path, fp32 scores kept); CUDA's memory-efficient kernel "
                    "takes them")
    return None


def attention_dropout_stand_in(case: dict) -> bool:
    """SDPA with attention dropout: the tracer runs it without the dropout, so
    torch's CPU flash kernel takes it and keeps what CUDA's flash kernel keeps
    with dropout (the output and the log-sum-exp; the dropout mask is
    regenerated from the saved RNG state, never stored). The only tensors the
    CPU math path adds are its scores and mask."""
    if case["attention"] != "sdpa":
        return False
    config = case_config(case)
    return max((config.get(k) or 0.0) for k in ATTENTION_DROPOUT_KEYS) > 0
