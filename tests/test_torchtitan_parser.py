"""The real parsers on the emitted torchtitan launch (slow: a side virtual
environment with torchtitan 0.3.0 and a CPU build of torch).

For each plan the test emits run.sh, runs it (every node of a multi-node plan)
with a stub torchrun that records its argv, and hands the argv to torchrun's
own argument parser and the training arguments to torchtitan's
`ConfigManager().parse_args` (tyro over flux_dev's dataclasses). An argument
that either refuses is a failure. The parsed config is then checked the way
the trainer checks it before it touches a GPU: ParallelDims over the world
size (parallel_dims.py 170-189), the global batch as a whole multiple of
local_batch_size x the batch degree with no accumulation (trainer.py 414-433,
flux/trainer.py 309-310), and the plan's own values."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

from kbsolve import api
from plans import shipped_kb, solved
from test_torchtitan import BASH, torchrun_argv

TORCHTITAN = "torchtitan==0.3.0"
# name -> query; the targets of issue 17 and the paths the launch line branches on
CASES = {
    "8x8xA100": {"gpus": "8x8xA100", "model": "flux1-dev"},
    "1x8xH100": {"gpus": "1x8xH100", "model": "flux1-dev"},
    "2x8xH100": {"gpus": "2x8xH100", "model": "flux1-dev"},
    "4xL40S": {"gpus": "4xL40S", "model": "flux1-dev"},
    "local_batch_pin": {"gpus": "1x8xH100", "model": "flux1-dev",
                        "set": ["training.local_batch_size=4"]},
    "no_ac_cp2_1024": {"gpus": "1x8xH100", "model": "flux1-dev", "resolution": "1024x1024",
                       "global_batch": 8,
                       "set": ["activation_checkpoint=none", "context_parallel_degree=2"]},
    "selective_bf16": {"gpus": "2x8xH100", "model": "flux1-dev", "allow": ["bf16_states"],
                       "set": ["activation_checkpoint=selective", "training.dtype=bfloat16"]},
}

CHECK = r"""
import json, sys
from torch.distributed.run import get_args_parser
from torchtitan.config import ConfigManager
from torchtitan.distributed.parallel_dims import ParallelDims

out = []
for case in json.load(open(sys.argv[1])):
    seen = {"name": case["name"]}
    try:
        run = get_args_parser().parse_args(case["argv"])
        seen["torchrun"] = {"nnodes": run.nnodes, "node_rank": run.node_rank,
                            "nproc_per_node": run.nproc_per_node, "standalone": run.standalone,
                            "module": run.module, "script": run.training_script}
        config = ConfigManager().parse_args(list(run.training_script_args))
    except BaseException as error:  # tyro and argparse refuse with SystemExit
        seen["refused"] = f"{type(error).__name__}: {error}"
        out.append(seen)
        continue
    p, t = config.parallelism, config.training
    dims = ParallelDims.from_config(p, case["world"])  # asserts the degrees factor the world
    batch_degree = dims.dp_replicate * dims.dp_shard
    global_batch = t.global_batch_size if t.global_batch_size > 0 else t.local_batch_size * batch_degree
    assert global_batch % (t.local_batch_size * batch_degree) == 0, "trainer.py 421-427"
    img = config.dataloader.img_size
    seen.update(
        dp_replicate=dims.dp_replicate, dp_shard=dims.dp_shard, cp=dims.cp, tp=dims.tp, pp=dims.pp,
        local_batch=t.local_batch_size, global_batch=global_batch,
        accumulation=global_batch // (t.local_batch_size * batch_degree),
        img_size=img, t5_len=config.tokenizer.max_t5_encoding_len,
        seq_len=(img // 8 // 2) ** 2 + config.tokenizer.max_t5_encoding_len,
        ac=type(config.activation_checkpoint).__qualname__ if config.activation_checkpoint else None,
        compile=config.compile.enable, param_dtype=t.mixed_precision_param,
        reduce_dtype=t.mixed_precision_reduce, dtype=t.dtype, cpu_offload=t.enable_cpu_offload,
        checkpoint=config.checkpoint.enable, interval=config.checkpoint.interval,
        folder=config.checkpoint.folder, workers=config.dataloader.num_workers,
        prefetch=config.dataloader.prefetch_factor, dataset=config.dataloader.dataset,
        dataset_path=config.dataloader.dataset_path,
        autoencoder=config.encoder.autoencoder_path)
    out.append(seen)
print(json.dumps(out))
"""


def _side_venv() -> Path:
    """torchtitan 0.3.0 and what its config manager imports, with a CPU build of torch,
    built once in the temp folder (or $KBSOLVE_TEST_VENVS) and reused; skips when no
    package index is in reach."""
    root = Path(os.environ.get("KBSOLVE_TEST_VENVS") or Path(os.environ.get("TMPDIR", "/tmp")))
    folder = root / "kbsolve-test-venv-torchtitan"
    python = folder / "bin" / "python"
    ready = folder / "ready"
    if ready.exists() and python.exists() and ready.read_text(encoding="utf-8") == TORCHTITAN:
        return python
    venv.create(folder, with_pip=True, clear=True)

    def pip(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "pip", "install", "-q", *args],
                              capture_output=True, text=True, timeout=3600)

    # a CPU build of torch first, so that torchtitan's requirements do not pull a CUDA
    # build: a local wheel (pip's configured find-links) and its dependencies, else the
    # PyTorch CPU index, else whatever the default index offers
    if pip("torch", "--no-index", "--no-deps").returncode == 0:  # a local wheel; then its deps
        done = pip("torch")
    else:
        done = pip("torch", "--index-url", "https://download.pytorch.org/whl/cpu")
        if done.returncode != 0:
            done = pip("torch")
    if done.returncode != 0:
        _give_up(done)
    # triton: torchtitan.distributed imports it; transformers, sentencepiece: FLUX's
    # requirements (.ci/docker/requirements-flux.txt)
    done = pip(TORCHTITAN, "triton", "transformers>=4.51.1", "sentencepiece")
    if done.returncode != 0:
        _give_up(done)
    ready.write_text(TORCHTITAN, encoding="utf-8")
    return python


def _give_up(done: subprocess.CompletedProcess) -> None:
    text = done.stdout + done.stderr
    if any(s in text for s in ("No matching distribution", "Could not fetch",
                               "NewConnectionError", "Temporary failure in name")):
        pytest.skip(f"cannot install torchtitan: {text.strip().splitlines()[-1]}")
    raise AssertionError(f"pip install failed:\n{text[-3000:]}")


@pytest.mark.slow
@pytest.mark.skipif(not Path(BASH).is_file(), reason=f"needs {BASH}")
def test_torchtitan_and_torchrun_accept_the_emitted_arguments(tmp_path):
    python = _side_venv()
    cases, plans = [], {}
    for name, query in CASES.items():
        plan = solved({**query, "framework": "torchtitan", "top": 0})
        assert plan.status in ("optimal", "feasible"), (name, plan.status)
        plans[name] = plan
        folder = tmp_path / name
        api.emit(plan, str(folder), shipped_kb())
        parts = query["gpus"].split("x")
        nodes, world = (int(parts[0]) if len(parts) == 3 else 1), _world(query["gpus"])
        for rank in range(nodes):
            work = tmp_path / f"{name}-{rank}"
            work.mkdir()
            argv = torchrun_argv(folder, {"NODE_RANK": str(rank), "MASTER_ADDR": "10.1.2.3"}
                                 if nodes > 1 else {}, work)
            cases.append({"name": f"{name}:{rank}", "argv": argv, "world": world,
                          "nodes": nodes, "rank": rank})
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp_path / "check.py").write_text(CHECK, encoding="utf-8")
    done = subprocess.run([str(python), str(tmp_path / "check.py"), str(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {r["name"]: r for r in json.loads(done.stdout.splitlines()[-1])}
    for case in cases:
        got = results[case["name"]]
        assert "refused" not in got, (case["name"], got["refused"], case["argv"])
        name = case["name"].split(":")[0]
        config = plans[name].config
        run = got["torchrun"]
        assert run["module"] and run["script"] == "torchtitan.train"
        assert int(run["nproc_per_node"]) * case["nodes"] == case["world"]
        if case["nodes"] > 1:
            assert run["nnodes"] == str(case["nodes"]) and run["node_rank"] == case["rank"]
        else:
            assert run["standalone"]
        shard = config["parallelism.data_parallel_shard_degree"]
        assert got["dp_replicate"] == config["parallelism.data_parallel_replicate_degree"]
        assert got["dp_shard"] == (shard if shard != -1 else got["dp_shard"])
        assert got["cp"] == config["parallelism.context_parallel_degree"]
        assert got["tp"] == got["pp"] == 1 and got["accumulation"] == 1
        assert got["local_batch"] == config["training.local_batch_size"]
        assert got["global_batch"] == config["training.global_batch_size"] == \
            plans[name].global_batch.value
        assert got["img_size"] == config["dataloader.img_size"]
        assert got["t5_len"] == config["tokenizer.max_t5_encoding_len"] == 512
        assert got["ac"] == {"full": "FullAC.Config", "selective": "SelectiveAC.Config",
                             "none": None}[config["activation_checkpoint"]]
        assert got["compile"] == config["compile.enable"]
        assert got["param_dtype"] == config["training.mixed_precision_param"]
        assert got["reduce_dtype"] == "float32" and got["dtype"] == config["training.dtype"]
        assert got["cpu_offload"] == config["training.enable_cpu_offload"]
        assert got["checkpoint"] is True and got["interval"] == config["checkpoint.interval"]
        assert got["folder"] == f"flux1-dev-ngpus{case['world']}-v1"
        assert got["workers"] == config["dataloader.num_workers"]
        assert got["prefetch"] == (config["dataloader.prefetch_factor"] if got["workers"] else None)
        assert got["dataset"] == "cc12m-wds" and got["dataset_path"] == "pixparse/cc12m-wds"
        assert got["autoencoder"] == "assets/hf/FLUX.1-dev/ae.safetensors"
    assert results["local_batch_pin:0"]["local_batch"] == 4
    assert results["no_ac_cp2_1024:0"]["ac"] is None and results["no_ac_cp2_1024:0"]["cp"] == 2
    assert results["no_ac_cp2_1024:0"]["seq_len"] == 4096 + 512
    assert results["selective_bf16:0"]["dtype"] == "bfloat16"
    assert results["4xL40S:0"]["cpu_offload"] is True


def _world(gpus: str) -> int:
    parts = gpus.split("x")
    return int(parts[0]) * int(parts[1]) if len(parts) == 3 else int(parts[0])
