"""Memory and speed accuracy against published measurements: the shared dev set
(../shared/data/memory_measurements.yaml) and the project's own rows in the same format
(bench/data/measurements/*.yaml).

Each LLM row becomes a `kbsolve estimate` of the generic `pytorch` framework with
the row's settings, compared at the level the row measured (allocated, reserved
or device), and its throughput with the estimate's tokens/s per GPU. Every figure
is given twice: with the committed calibration (kb/core/calibration.kb) on the
whole set, and leave-one-source-out (each source's rows predicted by constants
fitted without them; bench/fit.py). Beside it: two public baselines on the same
rows, weights x 4 (accelerate's estimate-memory rule of thumb for Adam training)
and model states only (DeepSpeed's formula). Rows the model cannot express
(adapters other than LoRA, diffusion and video runs) are counted and listed as
skipped.

    python bench/accuracy.py [--data PATH ...] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import statistics
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import yaml

SHARED = Path(os.environ.get("KBSOLVE_SHARED_DIR") or
              Path(__file__).resolve().parents[2] / "shared")  # as the tests find it
DATA = SHARED / "data" / "memory_measurements.yaml"
OWN = Path(__file__).resolve().parent / "data" / "measurements"
GIB = 2**30
# The data's GPU names that are not catalog names or aliases; others resolve in the catalog.
GPU_NAMES = {"A100-40GB": "A100-40G-SXM", "A100-80GB": "A100-80G-SXM", "H100-80GB": "H100-SXM",
             "unknown": "A100-80G-SXM"}
LEVEL = {"allocated": "allocated", "active": "allocated", "reserved": "reserved",
         "reserved-p99": "reserved", "nvidia-smi": "device", "unknown": "reserved"}
TARGETS = {
    ("q_proj", "v_proj"): "qv",
    ("k_proj", "q_proj", "v_proj"): "qkv",
    ("k_proj", "o_proj", "q_proj", "v_proj"): "qkvo",
    ("down_proj", "gate_proj", "up_proj"): "mlp",
    ("down_proj", "gate_proj", "k_proj", "q_proj", "up_proj", "v_proj"): "qkv_mlp",
    ("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"): "all",
    ("down_proj", "gate_proj", "o_proj", "q_proj", "up_proj", "v_proj"): "all",
    ("down_proj", "gate_proj", "k_proj", "lm_head", "o_proj", "q_proj", "up_proj",
     "v_proj"): "all_lm_head",
}
METHODS = {"lora": "lora", "dora": "lora", "qlora": "qlora", "full": "full"}
OPTIMIZERS = {"adamw": "adamw", "adamw-fused": "adamw", "adamw8bit": "adamw8bit",
              "paged-adamw": "paged-adamw", "paged-adamw8bit": "paged-adamw8bit",
              "cpu-offload-adamw": "cpu-offload-adamw", "sgd": "sgd", "muon": "muon",
              # torchao's AdamW4bit, as torchtune and axolotl (adamw_torch_4bit) call it
              "adamw4bit": "adamw4bit", "adamw4bit-torchao": "adamw4bit"}
SHARDING = {"none": "none", "ddp": "none", "fsdp-full-shard": "fsdp", "zero3": "fsdp",
            "fsdp-shard-grad-op": "shard-grad-op", "zero2": "shard-grad-op",
            "fsdp-full-shard+cpu-offload": "fsdp-offload", "zero3+offload-all": "fsdp-offload",
            # HYBRID_SHARD: sharded within each node, replicated across (skip_reason checks
            # that the row's shard group is the node)
            "fsdp-hybrid-shard": "hybrid-shard"}
# What a source's training script does that its table rows do not say, read from the
# script itself. LitGPT finetune/lora.py @8641822: FSDPStrategy(auto_wrap_policy={Block})
# puts the LoRA adapters in the same unit as the frozen block weights, and gradient
# accumulation runs under fabric.no_backward_sync (FSDP no_sync).
# torchtune (2024 recipes): TransformerDecoder.forward returns self.output(h).float(), and the
# recipes shift the fp32 logits with .contiguous() before the loss.
SCRIPT_SETTINGS = {("litgpt", "fsdp"): {"fsdp_no_sync": "true", "fsdp_mixed_units": "true"},
                   # atorch's FSDP example (dlrover@3a442b728 atorch/examples/llama2/fsdp_llama2.py)
                   # wraps each LlamaDecoderLayer with wrap_trainable_outmost for LoRA
                   # (fsdp_llama2.py:186-193): zero_optimization.py:69-102 wraps the layers with
                   # the adapters ignored and the adapters in an outermost unit of their own, so
                   # no unit mixes adapters with frozen weights (no fsdp_mixed_units). It keeps
                   # `outputs` through loss.backward() (fsdp_llama2.py:245-247) with use_cache on
                   # (torch's checkpoint_wrapper, checkpoint_optimization.py:100-131, leaves
                   # transformers' switch alone): every layer's key and value stay in
                   # outputs.past_key_values.
                   ("atorch", "fsdp"): {"kv_cache_kept": "true"},
                   ("torchtune", "none"): {"logits_fp32": "true"},
                   ("torchtune", "fsdp"): {"logits_fp32": "true"},
                   ("torchtune", "fsdp-offload"): {"logits_fp32": "true"}}


# Scripts on transformers' models before v4.46 (rows published before October 2024):
# LlamaForCausalLM.forward upcast the logits it returns (`logits = logits.float()`, removed in
# v4.46), and the loss shifts them with .contiguous() (modeling_llama.py, v4.31-v4.45).
HF_FP32_LOGITS = {"llama-recipes", "atorch", "fms-hf-tuning", "accelerate",
                  "hf-trainer", "openrlhf", "peft-sft"}
# Row groups of those scripts run on v4.46 or later (the loss still upcasts; the model no
# longer does): the Unsloth README's context-length tables (unslothai/unsloth@e3162dc5,
# 2025-01-14), whose Hugging Face + FA2 column is the HF Trainer, and fms-acceleration's
# benchmark (scripts/benchmarks/refs/requirements.txt @876e2ed: transformers 4.48.1).
HF_AFTER_4_46 = ("[ctx:unsloth-ctx]", "[ctx:fmsaccel]")
# axolotl rows at commits that pin transformers before v4.46 (requirements.txt): 2a1589f6
# (2024-03-21, transformers@73a73b41) and 35130711 (2023-08-27, transformers main). Its Llama
# runs without sample packing keep transformers' own LlamaForCausalLM (the flash-attention
# hijack, and with it its cross-entropy patch, only under sample_packing:
# src/axolotl/utils/models.py L312-L340 @2a1589f6). Later axolotl rows run v4.46+ or CCE.
AXOLOTL_BEFORE_4_46 = ("axolotl@2a1589f6", "axolotl@35130711")
# torchtitan row groups whose runs compiled the loss with the model: torchtitan's
# build_cross_entropy_loss (components/loss.py, from bbb1b616e, 2025-04-02; at e7c0cae and
# 2c8b59479) wraps cross_entropy_loss (pred.float() and F.cross_entropy) in torch.compile when
# training.compile is set. The Trainy H200 runs name torchtitan e7c0cae; the torchao float8
# README's MI300X table ran torchtitan 2c8b5947 (bench/data/measurements/torchao_float8.yaml).
# The December 2024 benchmark (train_configs at 9dec370) ran after e8977b007 (2024-12-18) had
# commented the loss compile out ("compiling loss function causes CUDA errors"), and torchtune's
# recipes call training.compile_loss(self._loss_fn) without keeping its result, which compiles
# only CEWithChunkedOutputLoss in place (torchtune@3fddc5694 recipes/full_finetune_single_device.py
# :235, training/_compile.py:80-85): neither compiles a plain cross-entropy.
COMPILED_LOSS = ("torchtitan e7c0cae", "[MI300x table]")
# Scripts on DeepSpeed's fp16/bf16 engine whose model returns 16-bit logits and whose loss does
# not upcast them: the engine casts the model itself, so the HF Trainer leaves autocast off
# (transformers trainer.py: use_cuda_amp only when not is_deepspeed_enabled) and the
# cross-entropy runs in 16 bits (the option loss_16bit). Qwen (v1)'s modeling_qwen.py
# (lm_logits = self.lm_head(hidden_states); CrossEntropyLoss on the shifted copy) under
# finetune_qlora_single_gpu.sh's --deepspeed finetune/ds_config_zero2.json (QwenLM/Qwen@05577de);
# DeepSpeed-Chat step 1 on OPT (OPTForCausalLM: logits = self.lm_head(...).contiguous()).
LOSS_16BIT = {"qwen-finetune", "deepspeed-chat"}
# DeepSpeed ZeRO-1/2 gradient buckets (the option zero_bucket_elements): reduce_bucket_size,
# twice under overlap_comm, from each script's DeepSpeed config. Qwen's
# finetune/ds_config_zero2.json (QwenLM/Qwen@af22d5e0): reduce_bucket_size 2e8, overlap_comm
# true; DeepSpeed-Chat's utils/ds_utils.py get_train_ds_config sets neither: DeepSpeed's
# defaults, 5e8 and overlap off below stage 3 (deepspeed/runtime/zero/config.py @077e42e6).
# LlamaFactory's examples/deepspeed/ds_z2_config.json (hiyouga/LlamaFactory@ff6d4d12):
# reduce_bucket_size 5e8, overlap_comm false: one bucket.
ZERO_BUCKETS = {"qwen-finetune": 2 * 200_000_000, "deepspeed-chat": 500_000_000,
                "llamafactory": 500_000_000}


# Scripts that wrap with FSDP1 (FullyShardedDataParallel, limit_all_gathers on: the option fsdp1):
# Answer.AI's train.py @4cd6923 (FSDP(..., limit_all_gathers=True), L724-737); llama-recipes'
# FSDP runs (PR #41 names limit_all_gathers=True); accelerate's FSDP plugin, FSDP1 with
# limit_all_gathers on by default, under the HF Trainer (fms-hf-tuning), PEFT's examples/sft and
# axolotl; torchtune's distributed recipes until the FSDP2 migration (recipes/*_distributed.py:
# FSDP(...) at 5b0dc57 and fef3ed10d; training.shard_model / fully_shard at 3fddc5694, after
# 6deeda92c 'LoRA FSDP2 recipe migration', 2024-09-10). torchtitan runs FSDP2.
FSDP1_SCRIPTS = {"fsdp_qlora", "llama-recipes", "fms-hf-tuning", "peft-sft", "axolotl"}
TORCHTUNE_FSDP1_COMMITS = ("5b0dc57", "fef3ed10d")


def ds_script(row: dict) -> str:
    """script(row), with DeepSpeed-Chat's step-1 runs named apart from DeepSpeed's other demos."""
    name = script(row)
    return "deepspeed-chat" if name == "deepspeed" and "DeepSpeed-Chat" in row.get("source", "") \
        else name
# torchtune commits that pinned torchao==0.1, whose to_nf4 quantizes a whole weight in one pass
# as the QLoRA recipes load it on the GPU (the option nf4_load_unchunked; pyproject.toml at each).
TORCHAO_01_COMMITS = ("5b0dc57", "0914d5cfb", "20747cd87", "135cf2ef0")
# Scripts whose bf16-mixed is FSDP's MixedPrecision (param_dtype bf16), not autocast:
# torchtitan (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), fms-fsdp and
# llm-foundry (FSDP mixed_precision bf16 param dtype), NeMo AutoModel (FSDP2 MixedPrecisionPolicy);
# DeepSpeed's bf16 mode (any zero* row) keeps bf16 weights beside fp32 masters.
# PEFT's examples/sft/train.py under accelerate's FSDP plugin (peft@aa2ca83ca, 6008f272a): with
# mixed_precision bf16 accelerate sets FSDP MixedPrecision(param_dtype=bf16) (accelerate v0.28.0
# state.py:825, utils/dataclasses.py:1174), and the script loads the model without torch_dtype
# (fp32) unless it quantizes it, so it is not a BASE_16BIT script.
OWN_MIXED_PRECISION = {"torchtitan", "fms-fsdp", "llm-foundry", "nemo-automodel", "peft-sft"}


# bitsandbytes double quantization where a QLoRA row does not state it: the script's own
# setting (the option's default is transformers' BitsAndBytesConfig's, off).
# ms-swift 1.x SftArguments (modelscope/ms-swift@46922151 swift/llm/utils/argument.py:
# bnb_4bit_use_double_quant: bool = True); fms-acceleration's bnb plugin, which the
# 'baseline-peft-bnb' runs load through (plugins/accelerated-peft/.../framework_plugin_bnb.py
# BNBAccelerationPlugin.model_loader: bnb_4bit_use_double_quant=True); axolotl's loader
# (src/axolotl/loaders/model.py: "bnb_4bit_use_double_quant": True, @067b021c); LlamaFactory's
# double_quantization (hparams/model_args.py: default True, @ff6d4d12).
DOUBLE_QUANT_SCRIPTS = {"ms-swift": True, "fms-hf-tuning": True, "axolotl": True,
                        "llamafactory": True}


# ---- the row's published settings as pytorch-framework options (issue 16, parts 3-4) --------
# Row precision -> the option's. fp8 rows run fp8 linear layers beside bf16 autocast or FSDP
# mixed precision with fp32 master weights (the data files' notes: "fp8 linears, bf16
# elsewhere, fp32 master weights unless noted"); fp8_settings adds the fp8 options.
PRECISIONS = {"bf16-true": "bf16-true", "bf16-mixed": "bf16-mixed", "fp16-mixed": "fp16-mixed",
              "fp32": "fp32", "fp8": "bf16-mixed"}
# Attention kernels that keep no s x s scores (the option's "flash"): SDPA's flash and
# memory-efficient backends, FlashAttention-2/3, xformers' memory-efficient attention and
# PyTorch's flex attention all recompute the scores in backward from the logsumexp. Their
# speeds differ; the option prices them as SDPA's.
FLASH_KERNELS = {"sdpa", "fa2", "fa3", "xformers", "flex"}
# Where the row does not state the kernel, the script's default, from its source:
ATTENTION_DEFAULTS = {
    # llm-foundry scripts/train/benchmarking/submit_benchmarks.py @8c8dd48: --attn_impl
    # defaults to 'triton' (its Triton flash-attention kernel)
    "llm-foundry": "flash",
    # LlamaFactory flash_attn 'auto' (hparams/model_args.py, 0.8+) leaves transformers its
    # default, SDPA (modeling_utils.py _check_and_enable_sdpa, transformers >= 4.36)
    "llamafactory": "flash",
}
LOSSES = {"ce": "ce", "chunked-ce": "chunked-ce", "cut-cross-entropy": "fused-ce"}
# Scripts whose "selective" activation checkpointing is torchtitan's per-op policy, the
# option's "selective" (torchtitan/models/llama3/parallelize_llama.py _apply_ac_to_transformer_block,
# selective_ac_option 'op'); torchtitan's 'selective layer' (every k-th block) is another policy.
SELECTIVE_OP = {"torchtitan"}
# Scripts that run TP with sequence parallelism on the norms (torchtitan
# parallelize_llama.py apply_tp: SequenceParallel() on attention_norm/ffn_norm and the
# final norm, loss_parallel on the output).
TP_SEQUENCE_PARALLEL = {"torchtitan"}
# Engines whose features the pytorch framework does not express: a row of these is skipped.
ENGINES = {
    "nemo": "Megatron-core engine (distributed optimizer, Transformer Engine layers, "
            "TP communication overlap)",
    "megatron": "Megatron-core engine (distributed optimizer, Transformer Engine layers, "
                "TP communication overlap)",
    "megatron-bridge": "Megatron-core engine (Megatron-FSDP or distributed optimizer, "
                       "Transformer Engine layers)",
    "nemo-automodel": "NeMo AutoModel's Transformer Engine layers and Triton LoRA kernels "
                      "('TE + triton' in its tables)",
    "unsloth": "Unsloth's Triton kernels (fused LoRA MLP and QKV, RoPE, RMSNorm, "
               "cross-entropy) and its own gradient checkpointing",
}
# Scripts whose every sample is exactly seq_len tokens although the row's packing is false:
# compute and memory are those of full-length (packed) micro-batches.
FIXED_LENGTH = {
    # Answer.AI fsdp_qlora train.py @4cd6923: the dummy dataset's output is context_length*2
    # copies of 'output' truncated to context_length
    "fsdp_qlora",
    # DeepSpeed-Chat step 1 (utils/data/data_utils.py @3a77097a: tokenizer(...,
    # padding='max_length', max_length=max_seq_len)) and the DeepSpeed fine-tune demo
    # (finetune_llama.py: padding='max_length')
    "deepspeed",
    # Qwen (v1) finetune.py @00dceebb preprocess: every sample padded to model_max_length
    "qwen-finetune",
}
def cluster(row: dict) -> tuple[int, int]:
    """(GPUs per node, network per node in Gbit/s; 0 when not stated) of the row's run, from
    its source; one node of all its GPUs where the source gives no nodes."""
    name, gpus = script(row), row["gpus"]
    if name == "torchtitan":
        # benchmarks/llama3_h100_202412_torchtitan.md: Grand Teton hosts of 8 H100 with
        # 400 Gb/s RDMA per GPU; docs/performance.md (2024) names neither hosts nor network
        per_node = 8
        network = 3200 if "llama3_h100_202412" in row.get("source", "") else 0
    elif name == "fms-fsdp":
        # README @4ffb9bd: 8-GPU nodes; its '400Gbps' and '800Gbps' do not say per node or per
        # GPU, so the network is not stated
        per_node, network = 8, 0
    elif name == "atorch":
        # dlrover atorch llama2 README: nodes of 8 A100-80GB, NVLink, 800 Gb/s RDMA
        per_node, network = 8, 800
    elif name == "llm-foundry":
        # scripts/train/benchmarking/README.md: MosaicML platform nodes of 8 GPUs
        per_node, network = 8, 0
    else:
        per_node, network = gpus, 0
    return (per_node, network) if gpus > per_node else (gpus, 0)


def script(row: dict) -> str:
    """The training program: the row's `framework`, else its source (the id's first token)."""
    return row.get("framework") or row["id"].split("-")[0]


def full_length(row: dict) -> bool:
    """Every micro-batch is seq_len tokens: packed, or samples of fixed length."""
    return row.get("packing") is True or script(row) in FIXED_LENGTH


def skip_reason(row: dict, model: dict | None) -> str | None:
    """Why the pytorch framework cannot express the row, or None."""
    model = model or {}
    if model.get("kind") != "llm":
        return (f"{model.get('kind')} model: the LLM bench models decoder-only LLMs"
                + (" (bench/dit_accuracy.py scores diffusion rows)"
                   if model.get("kind") in ("video", "diffusion") else ""))
    if row.get("duplicate_of"):
        return f"duplicate of {row['duplicate_of']}"
    if row["method"] not in METHODS:
        return f"method {row['method']}: adapters other than LoRA"
    if script(row) in ENGINES:
        return ENGINES[script(row)]
    if row.get("distributed", "none") not in SHARDING:
        return f"distributed {row['distributed']}"
    if row.get("optimizer") not in OPTIMIZERS:
        return f"optimizer {row.get('optimizer')}"
    if row.get("precision", "bf16-true") not in PRECISIONS:
        return f"precision {row['precision']}"
    fp8 = row.get("fp8") or {}
    if row.get("precision") == "fp8" and (fp8.get("library") != "torchao"
                                           or fp8.get("recipe", "tensorwise") != "tensorwise"):
        return (f"fp8 by {fp8.get('library')} ({fp8.get('recipe') or 'recipe not stated'}): "
                f"only torchao's tensorwise Float8Linear is an option")
    ckpt = row.get("gradient_checkpointing", "full")
    if ckpt == "unknown":
        return "activation checkpointing not stated"
    if ckpt == "selective" and (script(row) not in SELECTIVE_OP
                                or "selective layer" in row.get("notes", "")):
        return "selective checkpointing of some blocks (a share the row does not give)"
    if ckpt not in ("none", "full", "selective"):
        return f"gradient checkpointing {ckpt}"
    if row.get("activation_offload") and ckpt != "full":
        return "activation offloading without full checkpointing"
    attention = row.get("attention", "sdpa")
    if attention == "unknown" and script(row) not in ATTENTION_DEFAULTS:
        return "attention kernel not stated"
    if row.get("loss", "ce") not in LOSSES:
        return f"loss {row['loss']}"
    if "use_kernels true" in row.get("notes", "") or "[ctx:axolotl-gptoss]" in row.get("notes", ""):
        # axolotl's gpt-oss configs (examples/gpt-oss, the data file's context block):
        # use_kernels true loads the hub's MoE kernels
        return "the hub's MoE kernels (use_kernels)"
    par = row.get("parallelism") or {}
    if par.get("cp", 1) > 1:
        return "context parallelism"
    if par.get("vpp", 1) > 1 or "Interleaved" in str(par.get("pp_schedule", "")):
        return "interleaved pipeline stages"
    if par.get("async_tp"):
        return "async TP (TP communication overlapped with compute)"
    degrees = [par.get(k, 1) for k in ("tp", "pp", "cp", "dp_shard", "dp")]
    if par and math.prod(degrees) != row["gpus"]:
        return f"parallel degrees {par} do not multiply to {row['gpus']} GPUs"
    if par.get("dp", 1) > 1 and par.get("dp_shard", 1) > 1:
        return "HSDP (replicas of FSDP groups) set by degrees"
    if row.get("distributed") == "fsdp-hybrid-shard" and (
            row.get("shard_group_size") != cluster(row)[0] or cluster(row)[0] == row["gpus"]):
        return "hybrid sharding over groups other than the nodes"
    if not row.get("micro_batch"):
        return "micro-batch not given"
    if row.get("measurement_kind") and row.get("outcome") != "oom" and not row.get("seq_len"):
        return "fit limit without its value"
    if method_targets(row) is False:
        return f"LoRA targets {(row.get('lora') or {}).get('targets')}"
    return None


def method_targets(row: dict) -> str | None | bool:
    """The option's lora_targets for the row's targets (None for full fine-tuning, False
    when no value of the option is the row's set)."""
    if METHODS.get(row["method"]) == "full":
        return None
    targets = (row.get("lora") or {}).get("targets")
    if targets is None or targets in ALL_LINEAR:
        return "all"
    key = TARGETS.get(tuple(sorted(targets))) if isinstance(targets, list) else None
    return False if key is None else key


# Target lists the data files write out for "every linear layer of the blocks": PEFT's
# all-linear, and DeepSpeed-Chat's --lora_module_name decoder.layers on OPT (q, k, v, out_proj,
# fc1, fc2: the option's "all" for a two-matrix MLP)
ALL_LINEAR = ("all-linear", "all nn.Linear in decoder.layers (q, k, v, out_proj, fc1, fc2)")


def row_settings(row: dict, model: dict, out: dict) -> dict:
    """The settings the row's precision, fp8, checkpointing, attention, loss, parallelism
    and script add to the base mapping."""
    extra = {}
    if row.get("precision") == "fp8":
        extra["fp8_linear"] = "true"
        if (row.get("fp8") or {}).get("fsdp_float8_all_gather") and \
                out["sharding"] in ("fsdp", "fsdp-offload", "hybrid-shard"):
            extra["fp8_all_gather"] = "true"
    if row.get("activation_offload"):
        extra["activation_offload"] = "true"
    extra["loss"] = LOSSES[row.get("loss", "ce")]
    if row.get("attention") == "unknown":
        extra["attention"] = ATTENTION_DEFAULTS[script(row)]
    par = row.get("parallelism") or {}
    if par.get("tp", 1) > 1:
        extra["tp"] = str(par["tp"])
        sp = par.get("sequence_parallel", script(row) in TP_SEQUENCE_PARALLEL)
        extra["sp"] = str(bool(sp)).lower()
    if par.get("pp", 1) > 1:
        extra["pp"] = str(par["pp"])
    if row.get("grad_accum"):
        extra["grad_accum"] = str(row["grad_accum"])
    if full_length(row):
        extra["packing"] = "true"
    if out["method"] == "lora" and out["precision"] in ("bf16-mixed", "fp16-mixed") and \
            script(row) in BASE_16BIT:
        extra["base_weights_16bit"] = "true"
    return extra


# Scripts whose mixed precision keeps the frozen base in its 16-bit load dtype and upcasts
# only the trainable (LoRA) weights: LlamaFactory (src/llmtuner/model/adapter.py @0507637:
# init_adapter casts the parameters that require grad to float32), the HF Trainer with PEFT
# (the model loaded with torch_dtype, autocast on top), DeepSpeed's fp16/bf16 engine
# (runtime/engine.py _configure_distributed_model: module.half() / module.bfloat16()).
# ms-swift 1.x (swift/llm/sft.py: the model loaded in --dtype, PEFT on top) and Qwen's finetune.py
# (QwenLM/Qwen@00dceebb: the remote code sets bf16 itself, PEFT on top) do the same.
BASE_16BIT = {"llamafactory", "hf-trainer", "deepspeed", "ms-swift", "qwen-finetune"}


def model_spec(name: str, m: dict) -> dict:
    return {"name": name, "kind": "llm", "family": name.split("-")[0], "model_type": name,
            "hf_id": m.get("hf_id"), "params_b": m["params_b"], "layers": m["num_hidden_layers"],
            "hidden": m["hidden_size"], "heads": m["num_attention_heads"],
            "kv_heads": m.get("num_key_value_heads", m["num_attention_heads"]),
            "intermediate": m.get("intermediate_size", 4 * m["hidden_size"]),
            "vocab": m["vocab_size"], "tied_embeddings": bool(m.get("tie_word_embeddings")),
            "max_positions": m.get("max_position_embeddings", 2048),
            "mlp": "swiglu" if m.get("mlp") == "swiglu" else "gelu",
            **({"experts": m["num_experts"], "experts_active": m["num_experts_per_tok"],
                "moe_intermediate": m.get("moe_intermediate_size", m.get("intermediate_size"))}
               if m.get("num_experts") else {}),
            "source": "shared/data/memory_measurements.yaml"}


def _math_attention(row: dict, model: dict) -> bool:
    """Eager attention, or SDPA with fewer K/V heads than Q heads where the script does not
    expand them: PyTorch < 2.5 SDPA then falls back to its math kernel (flash and
    memory-efficient kernels need equal head counts), and LitGPT @8641822 skips the K/V
    expansion for multi-query models (lit_gpt/model.py, CausalSelfAttention.forward)."""
    if row.get("attention") == "eager":
        return True
    return row["id"].startswith("litgpt") and model.get("num_key_value_heads") == 1


def settings_for(row: dict, model: dict | None = None) -> dict | None:
    """The row as pytorch-framework settings, or None when it cannot be expressed."""
    method = METHODS.get(row["method"])
    sharding = SHARDING.get(row.get("distributed", "none"))
    optimizer = OPTIMIZERS.get(row.get("optimizer"))
    if None in (method, sharding, optimizer) or skip_reason(row, {"kind": "llm", **(model or {})}):
        return None
    out = {"method": method, "precision": PRECISIONS.get(row.get("precision", "bf16-true")),
           "optimizer": optimizer,
           "optimizer_in_backward": str(bool(row.get("optimizer_in_backward"))).lower(),
           "gradient_checkpointing": row.get("gradient_checkpointing", "full"),
           "loss": "ce" if row.get("loss") in (None, "ce") else "chunked-ce",
           "micro_batch": str(row["micro_batch"]), "sharding": sharding}
    out.update(SCRIPT_SETTINGS.get((script(row), sharding), {}))
    if (script(row) in HF_FP32_LOGITS or script(row) == "axolotl" and any(
            commit in row.get("source", "") for commit in AXOLOTL_BEFORE_4_46)) and \
            out["loss"] == "ce" and not any(
            group in row.get("notes", "") for group in HF_AFTER_4_46):
        out["logits_fp32"] = "true"
    if row.get("distributed", "").startswith("zero") and ds_script(row) in LOSS_16BIT and \
            out["loss"] == "ce" and out["precision"] in ("bf16-mixed", "fp16-mixed"):
        out["loss_16bit"] = "true"
    if row.get("distributed") in ("zero1", "zero2") and ds_script(row) in ZERO_BUCKETS:
        out["zero_bucket_elements"] = str(ZERO_BUCKETS[ds_script(row)])
    if script(row) == "torchtitan" and row.get("compile") is True and out["loss"] == "ce" and any(
            group in row.get("notes", "") for group in COMPILED_LOSS):
        out["loss_compiled"] = "true"
    if out["precision"] in ("bf16-mixed", "fp16-mixed") and sharding != "none" and (
            script(row) in OWN_MIXED_PRECISION or row.get("distributed", "").startswith("zero")):
        out["fsdp_mixed_precision"] = "true"
    if sharding != "none" and row.get("distributed", "").startswith("zero"):
        out["deepspeed_zero"] = "true"  # DeepSpeed's ZeRO optimizer, not FSDP
    out["packing"] = "false" if row.get("packing") is False else "true"
    out["compile"] = "true" if row.get("compile") is True else "false"
    if row["method"] == "dora":
        out["dora"] = "true"
    out["attention"] = ("eager" if row.get("attention") == "eager" else "math") \
        if _math_attention(row, model or {}) else "flash"
    if sharding in ("fsdp", "fsdp-offload", "hybrid-shard") and (
            script(row) in FSDP1_SCRIPTS or (script(row) == "torchtune" and any(
                commit in row.get("source", "") for commit in TORCHTUNE_FSDP1_COMMITS))):
        out["fsdp1"] = "true"
    if row.get("outputs_kept"):
        out["kv_cache_kept"] = "true"
    if sharding != "none" and "custom_sharded_layers" in row.get("notes", ""):
        out["fsdp_root_embeddings"] = "false"
    if method == "qlora":
        library = (row.get("quantization") or {}).get("library", "")
        # AutoGPTQ checkpoints (Qwen's Int4 models) run QuantLinear's torch path: the
        # option's "gptq" (kb/pytorch/memory.kb gptq_dequantized_weights)
        out["quant_library"] = "torchao" if library.startswith("torchao") else \
            "gptq" if library == "auto-gptq" else "bnb"
        if out["quant_library"] == "bnb":
            stated = (row.get("quantization") or {}).get("double_quant")
            double = DOUBLE_QUANT_SCRIPTS.get(script(row), False) if stated is None else stated
            out["double_quant"] = str(bool(double)).lower()
        if out["quant_library"] == "torchao" and script(row) == "torchtune" and any(
                commit in row.get("source", "") for commit in TORCHAO_01_COMMITS):
            out["nf4_load_unchunked"] = "true"
    if method != "full":
        lora = row.get("lora") or {}
        key = method_targets(row)
        if not key:
            return None
        out.update(lora_rank=str(lora.get("rank", 8)), lora_targets=key,
                   lora_dropout=str(bool(lora.get("dropout", 0.05))).lower())
    out.update(row_settings(row, model or {}, out))
    return out


# Rows the data file or the source itself calls unrepresentative, kept out of the figures
# and listed as skipped with the reason:
EXCLUDED = {
    "torchtune-23": "the data file: same config name as torchtune-22 but ~2x the memory; "
                    "'treat as a noise warning'",
    "torchtune-25": "the data file: same config name as torchtune-24 yet ~2x memory (noise warning)",
    # pytorch/torchtune@5b0dc57 README.md (2024-04-14) marks every row '*': an estimate on A100s
    # capped with set_per_process_memory_fraction; Llama-2-7B's 6.74 B weights, gradients and
    # AdamW's two bf16 moments (8 bytes a parameter, 7B_full.yaml: torch.optim.AdamW, dtype bf16,
    # FULL_SHARD over 4) are 12.55 GiB per GPU, above its 12.01 GB (11.19 GiB), and
    # full_finetune_distributed.py at that commit logs memory only after model init (L298).
    # fef3ed10d ('Memory update (#775)', 2024-04-16) replaced it with 22.9 GB on 4 x RTX 4090
    # (torchtune2-9).
    "torchtune-apr24-e": "below the run's own sharded weights, gradients and AdamW moments "
                         "(12.55 GiB a GPU for 12.01 GB): an estimate the source replaced two "
                         "days later with 22.9 GB measured (torchtune2-9)",
    "llamarecipes-1": "FSDP without its all-gather rate limiter (limit_all_gathers=False): "
                      "gathers run ahead of compute without bound, which no option expresses",
}


def length_unknown(row: dict) -> bool:
    """Batches padded to a length the row does not give: packing not stated, or a seq_len
    that is only the truncation limit of shorter samples. The estimate at seq_len is then an
    upper bound: such rows count for under-prediction and fit, not for MAPE or speed. So is a
    row with no seq_len at all (untruncated Alpaca, padded to its longest sample), estimated at
    2048 tokens, the longest Alpaca sample being shorter."""
    if row.get("seq_len") is None and not row.get("measurement_kind"):
        return True
    return row.get("packing") == "unknown" or (
        row.get("packing") is False and "only the truncation limit" in row.get("seq_len_note", ""))


def _gpu_name(kb, name: str) -> str | None:
    name = GPU_NAMES.get(name, name)
    entry = kb.catalog.find("gpu", name)
    return entry.name if entry else None


def measured_gib(row: dict) -> float | None:
    if row.get("peak") is None:
        return None
    scale = {"GB": 1e9, "GiB": GIB, "MB": 1e6, "MiB": 2**20}[row.get("unit", "GB")]
    return row["peak"] * scale / GIB


def data_files() -> list[Path]:
    return [DATA] + sorted(OWN.glob("*.yaml"))


def load_rows(paths: list[Path]) -> tuple[dict, list[dict]]:
    """Models and measurements of every file; a model key names one model everywhere."""
    models, rows = {}, []
    for path in paths:
        data = yaml.safe_load(path.read_text()) or {}
        for key, model in (data.get("models") or {}).items():
            models.setdefault(key, model)
        rows += data.get("measurements") or []
    return models, rows


def evaluate(paths: list[Path] | Path | None = None) -> dict:
    from kbsolve import api
    from kbsolve.diagnostics import KbError
    if isinstance(paths, Path):
        paths = [paths]
    models, measurements = load_rows(paths or data_files())
    kb = api.load_kb()
    results, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for row in measurements:
            if row["id"] in EXCLUDED:
                skipped.append((row["id"], f"excluded: {EXCLUDED[row['id']]}", ""))
                continue
            if row.get("model") not in models:
                skipped.append((row["id"], "unknown model", ""))
                continue
            model = models[row["model"]]
            reason = skip_reason(row, model)
            settings = settings_for(row, model) if reason is None else None
            if settings is None:
                skipped.append((row["id"], reason or row.get("method"), model.get("kind")))
                continue
            spec = Path(tmp) / f"{row['model']}.yaml"
            if not spec.exists():
                spec.write_text(yaml.safe_dump(model_spec(row["model"], model)))
            query = _query(kb, row, spec, Path(tmp))
            if isinstance(query, str):
                skipped.append((row["id"], query, ""))
                continue
            per_node, network = cluster(row)
            if row["gpus"] > per_node and network:
                settings["inter_node_gbps"] = str(network)
            speed_note = None
            accum = settings.get("grad_accum")
            if accum is not None and Fraction(accum) not in kb.options["pytorch.grad_accum"].domain:
                del settings["grad_accum"]  # memory does not read it (no pipeline here)
                speed_note = f"grad_accum {accum} outside the option's domain"
            try:
                estimate = api.estimate(query, settings, kb)
            except KbError as error:
                skipped.append((row["id"], f"error: {error.diagnostics[0].message}", ""))
                continue
            result = _compare(row, estimate, model, _gpu_name(kb, _card(row)))
            gpu_known = (row.get("emulated_gpu") or row["gpu"]) != "unknown"
            result["fit_known"] = gpu_known or bool(row.get("memory_budget"))
            if row.get("measurement_kind"):
                result.update(_limit(row, estimate))
            if (speed_note or not gpu_known) and "tokens_per_s_gpu" in result:
                result.pop("tokens_per_s_gpu")
                result.pop("predicted_tokens_per_s_gpu", None)
                result["speed_skipped"] = speed_note or "GPU not stated"
            results.append(result)
    return {"rows": results, "skipped": skipped}


# The GPU that stands in for an unnamed one: memory does not depend on the card, so its
# memory rows compare; its fit uses the row's memory budget; its speed is not compared.
STAND_IN = "A100-80G-SXM"


def _query(kb, row: dict, spec: Path, tmp: Path) -> dict | str:
    """The estimate's query: the row's GPUs by node, the card (or a spec of the same card
    with the row's memory), its sequence length; or why there is none."""
    name = row.get("emulated_gpu") or row["gpu"]
    gpu = _gpu_name(kb, _card(row))
    if gpu is None:
        return f"unknown GPU {row['gpu']}"
    per_node, _ = cluster(row)
    nodes = row["gpus"] // per_node
    count = f"{nodes}x{per_node}" if nodes > 1 else f"{row['gpus']}"
    query = {"model": str(spec), "framework": "pytorch", "headroom": 0.0,
             "seq_len": row.get("seq_len") or _LIMIT_FLOOR.get(row.get("measurement_kind"), 2048)}
    memory = _memory_gib(kb, row, name, gpu)
    if memory is None:
        query["gpus"] = f"{count}x{gpu}"
        return query
    fields = kb.catalog.gpu(gpu).model_dump(exclude_none=True)
    for key in ("aliases", "alias_note", "notes"):
        fields.pop(key, None)
    fields.update(name=f"{gpu}-{memory:g}GiB", memory_gib=memory,
                  source=f"bench: {gpu} with the row's memory ({row['id']})")
    path = tmp / f"gpu-{gpu}-{memory:g}.yaml"
    path.write_text(yaml.safe_dump(fields))
    query.update(gpus=count, gpu_spec=str(path))
    return query


def _card(row: dict) -> str:
    """The catalog card the estimate runs on: the emulated one, the named one, or the
    stand-in for an unnamed one."""
    name = row.get("emulated_gpu") or row["gpu"]
    return STAND_IN if name == "unknown" else name


def _memory_gib(kb, row: dict, name: str, gpu: str) -> float | None:
    """The row's device memory where it is not the catalog card's: a stated memory budget
    (read as the KB reads a size typed in GB: kb/catalog/gpus.yaml datasheet_gb_reported),
    unless it is the named card's own size, or a card of the same part with more memory
    (torchtitan's 96 GB Grand Teton H100s: the part's nvidia-smi share of its size)."""
    from kbsolve.program.facts import gpu_memory
    entry = kb.catalog.gpu(gpu)
    size = re.search(r"(\d+)GB", name)
    nominal = int(size.group(1)) if size else round(entry.memory_gib)
    budget = row.get("memory_budget")
    if budget:
        if name != "unknown" and budget["value"] == nominal and budget["unit"] == "GB":
            return None
        return gpu_memory(kb, f"{budget['value']}{budget['unit']}")[0]
    if row.get("gpu_memory_gb") and row["gpu_memory_gb"] != nominal:
        return round(entry.memory_gib * row["gpu_memory_gb"] / nominal, 2)
    return None


# A fit limit with no value ("no context length fits"): the shortest sequence stands for
# every length, since memory grows with the sequence.
_LIMIT_FLOOR = {"max_seq_len_that_fits": 1, "max_micro_batch_that_fits": 1}


def _limit(row: dict, estimate) -> dict:
    """A fit limit compared as fit/OOM agreement: the row fits at its published limit, and
    a limit that is 'none fits' overflows at the smallest value. Where a source says the next
    step failed, that step is a row of its own with outcome oom (torchtitan-28)."""
    fits = estimate.memory.per_gpu_gib.device <= estimate.memory.gpu_gib
    return {"kind": "limit", "limit_agrees": fits if row.get("outcome") == "fits" else not fits}


def _compare(row: dict, estimate, model: dict, card: str | None = None) -> dict:
    level = LEVEL.get(row.get("metric"), "allocated")
    levels = estimate.memory.per_gpu_gib.model_dump()
    predicted = levels[level]
    params = model["params_b"] * 1e9
    trainable = params if row["method"] == "full" else 0.01 * params
    weight_bytes = 0.516 if row["method"] == "qlora" else 2
    shards = row["gpus"] if row.get("distributed", "none").startswith("fsdp") else 1
    accelerate = params * 2 * 4 / GIB
    deepspeed = (params * weight_bytes + trainable * 16) / shards / GIB
    out = {"id": row["id"], "source": row["id"].split("-")[0], "grade": row.get("grade"),
           "method_class": METHODS.get(row["method"]), "gpus": row["gpus"],
           "length_unknown": length_unknown(row),
           "levels": levels, "breakdown": {i.term: i.gib for i in estimate.memory.breakdown
                                           if i.location == "gpu"},
           "step_time_s": estimate.speed.step_time_s,
           "speed_terms": {k: v for k, v in estimate.speed.terms.items()
                           if k not in factor_terms()},
           "speed_factors": {k: v for k, v in estimate.speed.terms.items()
                             if k in factor_terms()},
           "metric": row.get("metric"),
           "level": level, "predicted": round(predicted, 3),
           # a table that repeats another row's memory figure (memory_repeats, the data file's
           # notes) is one memory reading: its speed counts, its memory only under that row
           "measured": None if row.get("memory_repeats") else measured_gib(row),
           "accelerate": round(accelerate, 3), "deepspeed": round(deepspeed, 3),
           "outcome": row.get("outcome"), "gpu_gib": estimate.memory.gpu_gib,
           "predicted_fits": levels["device"] <= estimate.memory.gpu_gib}
    measured_tput = tokens_per_s_gpu(row, model, estimate.memory.gpu_gib and _peak(card or estimate.gpu))
    if measured_tput and full_length(row):  # padded batches: tokens per step unknown
        out["tokens_per_s_gpu"] = measured_tput
        out["predicted_tokens_per_s_gpu"] = (estimate.speed.tokens_per_s or 0) / row["gpus"]
    return out


def tokens_per_s_gpu(row: dict, model: dict, peak_flops: float) -> float | None:
    """The row's published throughput as tokens/s per GPU, where its unit allows.

    A per-GPU figure that would need more than the GPU's peak (at 4N FLOPs per token with
    a frozen base, 6N for full training, no recompute counted) is the total over the GPUs:
    torchtune's distributed recipes all-reduce num_tokens over the ranks and then log
    num_tokens / time_per_step as tokens_per_second_per_gpu (recipes/
    lora_finetune_distributed.py and full_finetune_distributed.py, 2024; later versions
    divide by the world size)."""
    tput = row.get("throughput") or {}
    value, unit = tput.get("value"), tput.get("unit")
    if not value:
        return None
    if unit == "tok/s":
        return value / row["gpus"]
    if unit == "tflops/gpu" and tput.get("flops_per_token"):
        return value * 1e12 / tput["flops_per_token"]
    if unit == "tflops/gpu" and script(row) in FLOPS_COUNTED:
        return value * 1e12 / FLOPS_COUNTED[script(row)](row, model)
    if unit == "samples/s" and script(row) == "deepspeed" and row.get("seq_len"):
        # DeepSpeed's ThroughputTimer (deepspeed/utils/timer.py) counts train_batch_size
        # samples per step over all GPUs; DeepSpeed-Chat pads every sample to max_seq_len
        return value * row["seq_len"] / row["gpus"]
    if unit == "s/benchmark-run" and script(row) == "fsdp_qlora" and row.get("seq_len"):
        # Answer.AI benchmarks_03_2024.md: 'Time (s)' to train the template's
        # --dataset_samples 1024, each exactly context_length tokens, spread over the GPUs
        return 1024 * row["seq_len"] / value / row["gpus"]
    if unit != "tok/s/gpu":
        return None
    flops_per_token = (6 if row["method"] == "full" else 4) * model["params_b"] * 1e9
    if script(row) == "torchtune" and row["gpus"] > 1 and value * flops_per_token > peak_flops:
        return value / row["gpus"]
    return value


def _atorch_flops(row: dict, model: dict) -> float:
    """Hardware FLOPs per token as dlrover's atorch llama2 example counts them
    (atorch/examples/llama2/example_utils.py @358a3c9 compute_llama2_training_flops, the
    Megatron-LM appendix formula): per layer 8sh^2 + 4s^2h for attention (MHA projections)
    and 6shi for the three MLP matrices, 2shV for the logits; backward twice the forward
    (once for LoRA); one more forward of the layers under gradient checkpointing."""
    s, h = row["seq_len"], model["hidden_size"]
    i, v, layers = model.get("intermediate_size", 4 * h), model["vocab_size"], model["num_hidden_layers"]
    layer = 8 * s * h * h + 4 * s * s * h + 6 * s * h * i
    logits = 2 * s * h * v
    factor = 2 if row["method"] != "full" else 3
    recompute = 1 if row.get("gradient_checkpointing") == "full" else 0
    return (layers * layer * (factor + recompute) + logits * factor) / s


# Scripts whose published TFLOP/s per GPU follow a FLOP count of their own:
FLOPS_COUNTED = {"atorch": _atorch_flops}


def _peak(card: str) -> float:
    """The GPU's dense 16-bit peak in FLOP/s, from the catalog."""
    from kbsolve import api
    gpu = api.load_kb().catalog.gpu(card)
    return (gpu.bf16_tflops or gpu.fp16_tflops) * 1e12


@functools.lru_cache(maxsize=1)
def factor_terms() -> frozenset:
    """The pytorch framework's speed terms that multiply the step time, not add to it."""
    from kbsolve import api
    return frozenset(t.name for t in api.load_kb().speed.values()
                     if t.kind == "factor" and t.framework == "pytorch")


def _mape(pairs) -> float | None:
    pairs = [(m, p) for m, p in pairs if m]
    return round(100 * statistics.mean(abs(p - m) / m for m, p in pairs), 1) if pairs else None


def _spearman(xs, ys) -> float | None:
    if len(xs) < 3:
        return None

    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        r = [0.0] * len(values)
        for rank, i in enumerate(order):
            r[i] = rank
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return round(1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1)), 3)


PREDICTORS = ("predicted", "accelerate", "deepspeed")
GRADES = ("A", "B")  # the targets are on grades A and B


def _figures(rows: list[dict]) -> dict:
    """MAPE and share under-predicted by more than 10 %, for kbsolve and each baseline."""
    out = {}
    for name in PREDICTORS:
        out[name] = {"mape_pct": _mape((r["measured"], r[name]) for r in rows),
                     "under_10pct_share": round(sum(r[name] < 0.9 * r["measured"] for r in rows)
                                                / len(rows), 3) if rows else None}
    return out


def fit_rows(result: dict) -> list[dict]:
    """The rows the fit and the figures use: grades A and B."""
    return [r for r in result["rows"] if r["grade"] in GRADES]


def _speed_figures(rows: list[dict]) -> dict:
    tput = [r for r in rows if r.get("tokens_per_s_gpu") and r.get("predicted_tokens_per_s_gpu")]
    errors = sorted(abs(r["predicted_tokens_per_s_gpu"] / r["tokens_per_s_gpu"] - 1) for r in tput)
    return {"throughput_rows": len(tput),
            "spearman": _spearman([r["tokens_per_s_gpu"] for r in tput],
                                  [r["predicted_tokens_per_s_gpu"] for r in tput]),
            "median_abs_error_pct": round(100 * statistics.median(errors), 1) if errors else None}


def _fit_figures(rows: list[dict]) -> dict:
    """OOM rows predicted to overflow, and rows that ran predicted to fit, at the band's
    upper end."""
    rows = [r for r in rows if r.get("fit_known", True)]  # a GPU and memory the row names
    limits = [r for r in rows if r.get("kind") == "limit"]
    oom = [r for r in rows if r["outcome"] == "oom" and r.get("kind") != "limit"]
    ran = [r for r in rows if r["outcome"] == "fits" and r.get("kind") != "limit"]
    return {"oom_rows": len(oom),
            "oom_agreement_pct": round(100 * sum(not r["predicted_fits"] for r in oom)
                                       / len(oom), 1) if oom else None,
            "ran_rows": len(ran),
            "ran_predicted_to_fit_pct": round(100 * sum(r["predicted_fits"] for r in ran)
                                              / len(ran), 1) if ran else None,
            "limit_rows": len(limits),
            "limit_agreement_pct": round(100 * sum(r["limit_agrees"] for r in limits)
                                         / len(limits), 1) if limits else None}


def _all_figures(rows: list[dict]) -> dict:
    measured = [r for r in rows if r["measured"] is not None and not r["length_unknown"]]
    bounds = [r for r in rows if r["measured"] is not None and r["length_unknown"]]
    return {"rows_compared": len(measured), **_figures(measured)["predicted"],
            "bound_rows": len(bounds),
            "bound_rows_under_10pct": sum(r["predicted"] < 0.9 * r["measured"] for r in bounds),
            **_fit_figures(rows), **_speed_figures(rows)}


def summarise(result: dict) -> dict:
    from bench import fit
    graded = fit_rows(result)
    committed = fit.committed_constants()
    whole_rows = fit.whole(graded, committed)
    loso_rows = fit.loso(graded, committed)
    rows = [r for r in graded if r["measured"] is not None]
    known = [r for r in rows if r["metric"] != "unknown"]
    summary = {"rows_compared": len(rows), "rows_known_metric": len(known),
               "rows_skipped": len(result["skipped"]),
               "sources": sorted({r["source"] for r in graded}),
               "whole": _all_figures(whole_rows), "loso": _all_figures(loso_rows)}
    summary["all"] = _figures(rows)
    summary["known_metric"] = _figures(known)
    for key in ("source", "grade"):
        groups = {}
        for r in rows:
            groups.setdefault(r[key], []).append(r)
        summary[f"by_{key}"] = {k: {"rows": len(v), **_figures(v)} for k, v in sorted(groups.items())}
    loso_by_source = {}
    for r in loso_rows:
        loso_by_source.setdefault(r["source"], []).append(r)
    summary["loso_by_source"] = {k: _all_figures(v) for k, v in sorted(loso_by_source.items())}
    summary["under_predicted_rows"] = sorted(
        (r["id"], round(r["predicted"] / r["measured"], 2)) for r in loso_rows
        if r["measured"] and r["predicted"] < 0.9 * r["measured"])
    refit = fit.refit(graded)
    summary["calibration"] = refit["constants"]
    summary["calibration_drift"] = {k: list(v) for k, v in refit["drift"].items()}
    summary["calibration_held"] = {k: list(v) for k, v in refit["held"].items()}
    summary["band_coverage"] = {cls: {"covered": c, "runs": n, "share": round(c / n, 3) if n else None}
                                for cls, (c, n) in refit["coverage"].items()}
    summary["band_because_stale"] = refit["stale_because"]
    worst = sorted(rows, key=lambda r: -abs(r["predicted"] - r["measured"]) / r["measured"])[:8]
    summary["worst_rows"] = [(r["id"], r["metric"], round(r["measured"], 2), r["predicted"])
                             for r in worst]
    tput = [r for r in whole_rows if r.get("tokens_per_s_gpu") and r.get("predicted_tokens_per_s_gpu")]
    summary["worst_speed_rows"] = [
        (r["id"], r["tokens_per_s_gpu"], round(r["predicted_tokens_per_s_gpu"]))
        for r in sorted(tput, key=lambda r: -abs(math.log(r["predicted_tokens_per_s_gpu"]
                                                          / r["tokens_per_s_gpu"])))[:8]]
    return summary


def _print(summary: dict, skipped: list) -> None:
    def line(label, figures, rows=None):
        cells = [f"{figures[n]['mape_pct']:>6} % ({100 * figures[n]['under_10pct_share']:4.0f} % under)"
                 for n in PREDICTORS]
        count = f"{rows:>4}" if rows is not None else "    "
        print(f"  {label:<22}{count}  " + "  ".join(cells))
    print(f"memory MAPE at the matching level, grades {'/'.join(GRADES)} "
          f"(share of rows under-predicted by more than 10 %)")
    print(f"  {'rows':<22}{'n':>4}  {'kbsolve':<24}{'weights x 4':<26}model states only")
    line("all", summary["all"], summary["rows_compared"])
    line("known metric", summary["known_metric"], summary["rows_known_metric"])
    for key in ("source", "grade"):
        for name, figures in summary[f"by_{key}"].items():
            line(f"{key} {name}", figures, figures["rows"])
    print("under-predicted by more than 10 % (leave-one-source-out):", summary["under_predicted_rows"])
    for name in ("whole", "loso"):
        f = summary[name]
        print(f"{name:>5}: memory MAPE {f['mape_pct']} % over {f['rows_compared']} rows, "
              f"{100 * f['under_10pct_share']:.0f} % under by >10 %; OOM rows predicted to "
              f"overflow {f['oom_agreement_pct']} % of {f['oom_rows']}; rows that ran predicted "
              f"to fit {f['ran_predicted_to_fit_pct']} % of {f['ran_rows']}; fit limits agree "
              f"{f['limit_agreement_pct']} % of {f['limit_rows']}; speed rho "
              f"{f['spearman']}, median abs error {f['median_abs_error_pct']} % over "
              f"{f['throughput_rows']} rows")
    print("calibration:", summary["calibration"], "drift:", summary["calibration_drift"])
    print("band coverage on sources left out (constants and band fitted without each source):",
          ", ".join(f"{cls} {c['covered']} of {c['runs']}" for cls, c in summary["band_coverage"].items()))
    print("worst speed rows (id, measured, predicted tok/s/GPU):", summary["worst_speed_rows"])
    print("worst rows (id, metric, measured GiB, predicted GiB):")
    for row in summary["worst_rows"]:
        print("  ", row)
    reasons = {}
    for _, reason, _kind in skipped:
        reasons[reason] = reasons.get(reason, 0) + 1
    print(f"skipped {len(skipped)} rows, by reason:")
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {count:>4}  {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = evaluate(args.data)
    summary = summarise(result)
    if args.json:
        print(json.dumps({"summary": summary, **result}, indent=2))
        return
    _print(summary, result["skipped"])


if __name__ == "__main__":
    sys.exit(main())
