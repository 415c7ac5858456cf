"""torchtitan's FLUX trainer (issue 17): the emitted run.sh on two nodes, read
the way torchrun and torchtitan's ConfigManager read it, and the refusal of
models the trainer has no flavour for. The real ConfigManager parses the same
arguments in tests/test_torchtitan_parser.py (slow)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kbsolve import api
from kbsolve.diagnostics import KbError
from cli_helpers import run_in_process
from plans import shipped_kb, solved

BASH = "/bin/bash"
TWO_NODES = {"gpus": "2x8xH100", "model": "flux1-dev", "framework": "torchtitan", "top": 0}

pytestmark = pytest.mark.skipif(not Path(BASH).is_file(), reason=f"needs {BASH}")


def torchrun_argv(folder: Path, env: dict[str, str], tmp: Path) -> list[str]:
    """Run folder/run.sh from another folder with a stub torchrun first on PATH;
    the argv the stub received."""
    stubs = tmp / "stubs"
    stubs.mkdir(exist_ok=True)
    stub = stubs / "torchrun"
    stub.write_text(f'#!{BASH}\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$STUB_LOG"\n',
                    encoding="utf-8")
    stub.chmod(0o755)
    log = tmp / "argv.log"
    log.unlink(missing_ok=True)
    done = subprocess.run([BASH, str(folder / "run.sh")], cwd=tmp, capture_output=True, text=True,
                          timeout=60, env={"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp),
                                           "STUB_LOG": str(log), **env})
    assert done.returncode == 0, done.stderr
    return log.read_text(encoding="utf-8").splitlines()


def split_argv(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """torchrun's own flags, and what follows `-m torchtitan.train`."""
    at = argv.index("-m")
    assert argv[at + 1] == "torchtitan.train"
    own = dict(zip(argv[:at:2], argv[1:at:2]))
    return own, argv[at + 2:]


def flags_of(args: list[str]) -> dict[str, str | bool]:
    """--key value pairs and bare --flags, as tyro reads them; subcommands under '@'."""
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            out.setdefault("@", []).append(arg)  # type: ignore[union-attr]
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--") and ":" not in args[i + 1]:
            out[arg[2:]] = args[i + 1]
            i += 2
        else:
            out[arg[2:]] = True
            i += 1
    return out


def test_two_node_run_sh_starts_one_job_with_the_plans_flags(tmp_path):
    plan = solved(TWO_NODES)
    assert plan.status == "optimal"
    folder = tmp_path / "emit"
    api.emit(plan, str(folder), shipped_kb())
    seen = []
    for rank in (0, 1):
        own, args = split_argv(torchrun_argv(folder, {"NODE_RANK": str(rank),
                                                      "MASTER_ADDR": "10.1.2.3"}, tmp_path))
        assert own == {"--nnodes": "2", "--node_rank": str(rank), "--nproc_per_node": "8",
                       "--master_addr": "10.1.2.3", "--master_port": "29500"}
        seen.append(args)
    assert seen[0] == seen[1]  # every node runs the same training arguments
    flags = flags_of(seen[0])
    assert (flags["module"], flags["config"]) == ("flux", "flux_dev")
    config = plan.config
    replicate = int(flags.get("parallelism.data_parallel_replicate_degree", 1))
    shard = int(flags.get("parallelism.data_parallel_shard_degree", -1))
    cp = int(flags.get("parallelism.context_parallel_degree", 1))
    shard = 16 // (replicate * cp) if shard == -1 else shard
    assert replicate * shard * cp == 16  # ParallelDims: the degrees factor the world
    local, total = int(flags["training.local_batch_size"]), int(flags["training.global_batch_size"])
    assert local * replicate * shard == total == 64  # no accumulation: FLUX refuses it
    assert flags["dataloader.img_size"] == "512" and flags["tokenizer.max_t5_encoding_len"] == "512"
    assert flags["checkpoint.enable"] is True
    assert flags["checkpoint.folder"] == "flux1-dev-ngpus16-v1"
    assert flags["dataloader.dataset_path"] == "pixparse/cc12m-wds"
    assert "parallelism.pipeline_parallel_degree" not in flags  # 1: left at the default
    assert int(flags["training.local_batch_size"]) == config["training.local_batch_size"]
    assert replicate == config["parallelism.data_parallel_replicate_degree"]


def test_a_subcommand_comes_after_every_flag(tmp_path):
    plan = solved({**TWO_NODES, "gpus": "8xH100", "set": ["activation_checkpoint=none"],
                   "global_batch": 8})
    assert plan.status in ("optimal", "feasible"), plan.status
    api.emit(plan, str(tmp_path / "emit"), shipped_kb())
    _, args = split_argv(torchrun_argv(tmp_path / "emit", {}, tmp_path))
    assert args[-1] == "activation_checkpoint:none"  # tyro refuses parent flags after it
    assert all(not a.startswith("activation_checkpoint") for a in args[:-1])


@pytest.mark.parametrize("model, kind, able", [
    ("qwen3-8b", "llm", "llamafactory"),
    ("wan2.1-t2v-14b", "video", "flow-factory"),
])
def test_a_model_the_trainer_cannot_train_is_refused_with_those_that_can(model, kind, able):
    with pytest.raises(KbError) as error:
        api.solve({"gpus": "8xH100", "model": model, "framework": "torchtitan"}, shipped_kb())
    text = error.value.render()
    assert error.value.exit_code == 2
    assert f"is a {kind} model" in text and able in text and "torchtitan" in text


def test_cli_refuses_an_llm_with_exit_2(capsys):
    done = run_in_process(["--gpus", "8xH100", "--model", "qwen3-8b", "--framework",
                           "torchtitan"], capsys)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "llamafactory" in done.stderr and "pytorch" in done.stderr
