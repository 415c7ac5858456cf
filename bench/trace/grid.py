"""The trace grid: which models, methods, tasks and shapes are traced.

Models come from kb/catalog/models.yaml (the catalog's facts are the HF
config.json values); each becomes the keyword arguments of its transformers
config class. A case is traced at two reduced depths (DEPTHS) and extrapolated
to the catalog's layer count.
"""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "kb" / "catalog" / "models.yaml"
DEPTHS = (1, 2)
FREEZE_DEPTHS = (2, 3)  # freeze tuning trains the last 2 layers: both depths must hold them


def depths(case: dict) -> tuple[int, int]:
    return FREEZE_DEPTHS if case["method"] == "freeze" else DEPTHS

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
                        reference=task in ("dpo", "kto"))
            case["id"] = "-".join([name, task, method + (f"_{targets}" if targets else ""),
                                   "gc" if ckpt else "nogc", attention, f"b{batch}", f"s{seq}"])
            out.append(case)
    if not full:
        out = [c for c in out if c["model"] in ("qwen3-0.6b", "llama3.2-1b") and c["batch"] == 1]
    return out
