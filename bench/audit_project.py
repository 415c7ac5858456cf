"""Audit time on a generated 1,000-file project: one LlamaFactory config with its
DeepSpeed file and launch script, the rest ordinary project files (Python, data,
notes, other YAML) of the sizes a real repository has."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.command import KBSOLVE

CONFIG = """model_name_or_path: Qwen/Qwen3-8B
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
dataset: identity,alpaca_en_demo
template: qwen3
cutoff_len: 4096
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
bf16: true
deepspeed: ds_z3.json
output_dir: saves/qwen3-8b/lora/sft
"""
DEEPSPEED = {"zero_optimization": {"stage": 3, "overlap_comm": True},
             "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}
LAUNCH = "#!/bin/bash\nFORCE_TORCHRUN=1 NNODES=1 llamafactory-cli train configs/train.yaml\n"


def generate(root: Path, files: int = 1000, seed: int = 0) -> None:
    """`files` files in nested folders; three of them make the training unit."""
    rng = random.Random(seed)
    (root / "configs").mkdir(parents=True)
    (root / "configs" / "train.yaml").write_text(CONFIG)
    (root / "configs" / "ds_z3.json").write_text(json.dumps(DEEPSPEED))
    (root / "train.sh").write_text(LAUNCH)
    kinds = [(".py", lambda i: f"import torch\n\ndef step_{i}(x):\n    return x * {i}\n" * 20),
             (".md", lambda i: f"# note {i}\n\n" + "text " * rng.randint(10, 400)),
             (".jsonl", lambda i: "\n".join(json.dumps({"instruction": f"q{i}-{k}",
                                                        "output": "a" * 50}) for k in range(40))),
             (".yaml", lambda i: f"name: item{i}\nvalues: [1, 2, 3]\nlabel: other\n"),
             (".txt", lambda i: "line\n" * rng.randint(1, 200))]
    for i in range(files - 3):
        ext, body = kinds[i % len(kinds)]
        folder = root / f"pkg{i % 13}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i}{ext}").write_text(body(i))


def measure(files: int = 1000, repeat: int = 3) -> dict:
    from kbsolve import api
    kb = api.load_kb()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        generate(root, files)
        counted = sum(len(f) for _, _, f in os.walk(root))
        times, units = [], 0
        for _ in range(repeat):
            start = time.perf_counter()
            report, _ = api.audit(str(root), "8xA100", kb)
            times.append(time.perf_counter() - start)
            units = len(report.units)
        start = time.perf_counter()
        done = subprocess.run(KBSOLVE + ["audit", str(root), "--gpus", "8xA100", "--format",
                               "json"], capture_output=True)
        cli = time.perf_counter() - start
    return {"files": counted, "units_found": units,
            "warm_median_ms": round(statistics.median(times) * 1000, 1),
            "cli_ms": round(cli * 1000, 1), "cli_exit_code": done.returncode}


if __name__ == "__main__":
    print(measure())
