"""Launching an emitted plan: run.sh on several nodes, the accelerate files and
requirements.txt.

The 2-node run.sh of each launch path (LlamaFactory through torchrun,
LlamaFactory's FSDP through accelerate, Flow-Factory's ff-train, a plain
torchrun script) is executed with bash for NODE_RANK 0 and 1, from another
folder, with stub launchers first on PATH that record their argv, folder and
environment. The test reads each record the way the real launcher does
(LlamaFactory's launcher.py 60-68, ff-train's cli.py 133-196, accelerate's and
torchrun's flags) and checks that the nodes agree on the world size and the
master and differ in their rank. A slow test loads the emitted accelerate files
and the accelerate command lines with accelerate's own loader and validation,
in a side virtual environment."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from kbsolve import api
from kbsolve.diagnostics import KbError
from kbsolve.dsl.kb import OutputFile
from kbsolve.plan.emit import fill_launch
from plans import shipped_kb, solved

BASH = "/bin/bash"
SYSTEM_PATH = "/usr/bin:/bin"  # dirname and env for run.sh; the launchers are stubs
MASTER = "10.1.2.3"
STUBS = ("llamafactory-cli", "accelerate", "ff-train", "torchrun")
ENV_SEEN = ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE",
            "FORCE_TORCHRUN", "NUM_MACHINES", "MACHINE_RANK", "GPUS_PER_NODE")

# name -> (query, world size); pinned so that the solver's choice cannot drift
CASES = {
    "llamafactory_torchrun": ({"gpus": "2x8xH100", "model": "qwen3-8b", "top": 0,
                               "set": ["deepspeed=z3", "enable_liger_kernel=false"]}, 16),
    "llamafactory_fsdp": ({"gpus": "2x8xH100", "model": "qwen3-8b", "top": 0,
                           "set": ["fsdp=fsdp2", "enable_liger_kernel=true"]}, 16),
    "flowfactory": ({"gpus": "2x8xA100", "model": "wan14b", "top": 0}, 16),
    "pytorch": ({"gpus": "2x8xH100", "model": "qwen3-8b", "framework": "pytorch", "top": 0,
                 "set": ["method=lora", "sharding=fsdp", "tp=1", "pp=1", "ep=1", "sp=false",
                         "lora_rank=16", "lora_targets=all", "precision=bf16-true",
                         "optimizer=adamw", "micro_batch=1", "grad_accum=8", "loss=ce",
                         "gradient_checkpointing=full", "optimizer_in_backward=false",
                         "compile=false", "attention=flash", "packing=true"]}, 16),
}
SINGLE_GPU = {"gpus": "1xA100", "model": "flux-dev", "top": 0}

pytestmark = pytest.mark.skipif(not Path(BASH).is_file(), reason=f"needs {BASH}")


def _emit(query: dict, folder: Path) -> Path:
    plan = solved(query)
    assert plan.status in ("optimal", "feasible"), plan.status
    api.emit(plan, str(folder), shipped_kb())
    return folder


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    """Stub launchers that write their name, folder, argv and environment to $STUB_LOG."""
    folder = tmp_path_factory.mktemp("stubs")
    env_lines = "\n".join(f'[ -n "${{{v}+x}}" ] && printf \'env=%s\\n\' "{v}=${v}"'
                          for v in ENV_SEEN)
    for name in STUBS:
        stub = folder / name
        stub.write_text(f"#!{BASH}\n{{\nprintf 'prog=%s\\n' \"${{0##*/}}\"\n"
                        f"printf 'cwd=%s\\n' \"$PWD\"\nfor a in \"$@\"; do printf 'arg=%s\\n' "
                        f"\"$a\"; done\n{env_lines}\n}} > \"$STUB_LOG\"\nexit 0\n", encoding="utf-8")
        stub.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> dict[str, Path]:
    return {name: _emit(query, tmp_path_factory.mktemp(name))
            for name, (query, _) in CASES.items()}


def _run(script: Path, stubs: Path, cwd: Path, env: dict[str, str], direct: bool = False):
    """Run the script (through bash, or as ./script through its shebang); the record
    of the launcher it started, or None, and the completed process."""
    log = cwd / "stub.log"
    log.unlink(missing_ok=True)
    full = {"PATH": f"{stubs}:{SYSTEM_PATH}", "HOME": str(cwd), "STUB_LOG": str(log), **env}
    argv = [str(script)] if direct else [BASH, os.path.relpath(script, cwd)]
    done = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=60)
    if not log.exists():
        return None, done
    record = {"args": [], "env": {}}
    for line in log.read_text(encoding="utf-8").splitlines():
        kind, _, value = line.partition("=")
        if kind == "arg":
            record["args"].append(value)
        elif kind == "env":
            key, _, val = value.partition("=")
            record["env"][key] = val
        else:
            record[kind] = value
    return record, done


def _flags(args: list[str]) -> dict[str, str]:
    return {a[2:]: b for a, b in zip(args, args[1:]) if a.startswith("--")}


def _view(record: dict, defaults: bool = True) -> dict:
    """What the launcher makes of its argv and environment: nodes, this node's rank,
    processes per node, the world size and the master, as the real one reads them.
    With the script's defaults, the accelerate file agrees with the flags."""
    prog, args, env = record["prog"], record["args"], record["env"]
    cwd = Path(record["cwd"])
    if prog == "llamafactory-cli":
        # launcher.py 60-68: torchrun when FORCE_TORCHRUN is set; these defaults otherwise
        assert args == ["train", "train.yaml"] and env.get("FORCE_TORCHRUN") == "1"
        config = yaml.safe_load((cwd / args[1]).read_text())
        nodes, rank = int(env.get("NNODES", "1")), int(env.get("NODE_RANK", "0"))
        per_node = int(env.get("NPROC_PER_NODE", "-1"))  # default: the visible devices
        master = env.get("MASTER_ADDR", "127.0.0.1")
        port = env.get("MASTER_PORT", "a free port of its own")
        if "deepspeed" in config:
            assert (cwd / config["deepspeed"]).is_file()
        return {"nodes": nodes, "rank": rank, "per_node": per_node, "world": nodes * per_node,
                "master": f"{master}:{port}"}
    if prog == "accelerate":
        assert args[0] == "launch" and args[-3:] == ["-m", "llamafactory.launcher", "train.yaml"]
        flags = _flags(args)
        file = yaml.safe_load((cwd / flags["config_file"]).read_text())
        if defaults:
            assert file["num_machines"] == int(flags["num_machines"])
            assert file["num_processes"] == int(flags["num_processes"])
        return _accelerate_view(flags)
    if prog == "ff-train":
        assert args[0] == "train.yaml"
        return _accelerate_view(_ff_train(args, env, yaml.safe_load((cwd / args[0]).read_text()),
                                          cwd))
    if prog == "torchrun":
        flags = _flags(args)
        assert args[-3:-1] == ["train.py", "--config"] and (cwd / args[-1]).is_file()
        nodes, per_node = int(flags["nnodes"]), int(flags["nproc_per_node"])
        return {"nodes": nodes, "rank": int(flags["node_rank"]), "per_node": per_node,
                "world": nodes * per_node,
                "master": f"{flags['master_addr']}:{flags['master_port']}"}
    raise AssertionError(f"unexpected launcher {prog}")


def _ff_train(args: list[str], env: dict, config: dict, cwd: Path) -> dict[str, str]:
    """The accelerate flags ff-train builds: CLI, then env (only with a master address
    and more than one machine), then the YAML (cli.py 52-90, 133-196)."""
    cli = _flags(args[1:])
    master_env = env.get("MASTER_IP") or env.get("MASTER_ADDR")
    machines_env = env.get("NUM_MACHINES") or env.get("NUM_NODES")
    from_env = {}
    if master_env and machines_env and int(machines_env) > 1:
        from_env = {"main_process_ip": master_env, "num_machines": machines_env}
        rank = env.get("MACHINE_RANK") or env.get("NODE_RANK")
        if rank is not None:
            from_env["machine_rank"] = rank
    defaults = {"num_machines": 1, "machine_rank": 0, "main_process_port": 29500}
    flags = {}
    for key in ("num_processes", "num_machines", "machine_rank", "main_process_ip",
                "main_process_port"):
        value = cli.get(key, from_env.get(key, config.get(key, defaults.get(key))))
        if value is not None:
            flags[key] = str(value)
    if config.get("config_file"):
        file = yaml.safe_load((cwd / config["config_file"]).read_text())  # it exists
        assert file["num_machines"] == int(flags["num_machines"])
        flags["config_file"] = config["config_file"]
    return flags


def _accelerate_view(flags: dict[str, str]) -> dict:
    nodes, world = int(flags["num_machines"]), int(flags["num_processes"])
    return {"nodes": nodes, "rank": int(flags["machine_rank"]), "per_node": world // nodes,
            "world": world, "master": f"{flags.get('main_process_ip')}:"
                                      f"{flags['main_process_port']}"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_nodes_agree(name, emitted, stubs, tmp_path):
    folder, world = emitted[name], CASES[name][1]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    views = []
    for rank in (0, 1):
        record, done = _run(folder / "run.sh", stubs, elsewhere,
                            {"NODE_RANK": str(rank), "MASTER_ADDR": MASTER})
        assert done.returncode == 0 and record, done.stderr
        assert Path(record["cwd"]) == folder  # it runs in its own folder, from any folder
        views.append(_view(record))
    first, second = views
    assert (first["rank"], second["rank"]) == (0, 1)
    for view in views:
        assert view["nodes"] == 2 and view["world"] == world == view["nodes"] * view["per_node"]
        assert view["master"] == first["master"]
        assert view["master"].startswith(MASTER + ":")


def test_one_node_pins_the_process_count(stubs, tmp_path):
    """LlamaFactory's launcher starts as many ranks as it sees devices unless
    NPROC_PER_NODE says otherwise (launcher.py 60-66): a 4-GPU plan on an 8-GPU box
    must still launch 4 processes."""
    folder = _emit({"gpus": "4xL40S", "model": "qwen3-8b", "top": 0,
                    "set": ["deepspeed=z2"]}, tmp_path / "out")
    record, done = _run(folder / "run.sh", stubs, tmp_path, {})
    assert done.returncode == 0 and record, done.stderr
    assert _view(record)["per_node"] == 4 and _view(record)["world"] == 4


@pytest.mark.parametrize("name", sorted(CASES))
def test_several_nodes_need_master_addr(name, emitted, stubs, tmp_path):
    record, done = _run(emitted[name] / "run.sh", stubs, tmp_path, {"NODE_RANK": "1"})
    assert record is None and done.returncode == 2
    assert "MASTER_ADDR" in done.stderr and "usage:" in done.stderr
    assert done.stderr.count("\n") == 2  # one message, one usage line
    head = (emitted[name] / "run.sh").read_text().splitlines()[:4]
    assert any("MASTER_ADDR=..." in line and line.startswith("#") for line in head)


def test_parameters_come_from_the_environment(emitted, stubs, tmp_path):
    folder = emitted["llamafactory_fsdp"]
    record, done = _run(folder / "run.sh", stubs, tmp_path, direct=True, env={
        "NNODES": "4", "NODE_RANK": "3", "MASTER_ADDR": "node0", "MASTER_PORT": "4242"})
    assert done.returncode == 0, done.stderr
    assert _view(record, defaults=False) == {"nodes": 4, "rank": 3, "per_node": 8,
                                             "world": 32, "master": "node0:4242"}
    record, done = _run(folder / "run.sh", stubs, tmp_path,
                        {"NODE_RANK": "one", "MASTER_ADDR": MASTER})
    assert record is None and done.returncode == 2 and "NODE_RANK must be a whole number" in \
        done.stderr


def test_one_gpu_writes_no_accelerate_file(stubs, tmp_path):
    """On one GPU ff-train runs flow_factory.train itself and reads no accelerate file
    (cli.py 165-167): none is written, and the YAML names none."""
    folder = _emit(SINGLE_GPU, tmp_path / "out")
    assert not (folder / "accelerate_config.yaml").exists()
    assert "config_file" not in yaml.safe_load((folder / "train.yaml").read_text())
    script = (folder / "run.sh").read_text()
    assert "NNODES" not in script and "MASTER_ADDR" not in script
    (tmp_path / "elsewhere").mkdir()
    record, done = _run(folder / "run.sh", stubs, tmp_path / "elsewhere", {})
    assert done.returncode == 0 and record["args"] == ["train.yaml"], done.stderr
    assert Path(record["cwd"]) == folder


def test_one_gpu_accelerate_file_is_valid(tmp_path):
    """LlamaFactory's FSDP on one GPU keeps its accelerate file, a complete one."""
    folder = _emit({"gpus": "1xH100", "model": "qwen3-0.6b", "top": 0,
                    "set": ["fsdp=fsdp2"]}, tmp_path / "out")
    accelerate = yaml.safe_load((folder / "accelerate_config.yaml").read_text())
    assert accelerate["distributed_type"] == "FSDP"
    assert accelerate["num_processes"] == accelerate["num_machines"] == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_accelerate_files_name_their_distributed_type(name, emitted):
    path = emitted[name] / "accelerate_config.yaml"
    if path.exists():
        accelerate = yaml.safe_load(path.read_text())
        assert accelerate["distributed_type"] in ("MULTI_GPU", "FSDP", "DEEPSPEED")
        assert accelerate["num_machines"] == 2 and accelerate["num_processes"] == 16


@pytest.mark.parametrize("name", ["llamafactory_torchrun", "llamafactory_fsdp"])
def test_requirements_list_liger_exactly_when_enabled(name, emitted):
    folder = emitted[name]
    train = yaml.safe_load((folder / "train.yaml").read_text())
    lines = [line for line in (folder / "requirements.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    packages = {Requirement(line).name: Requirement(line) for line in lines}
    assert lines[0].startswith("llamafactory @ git+")
    assert ("liger-kernel" in packages) == bool(train.get("enable_liger_kernel"))
    if "liger-kernel" in packages:
        assert packages["liger-kernel"].specifier.contains("0.6.3")  # requirements/liger-kernel.txt
        assert not packages["liger-kernel"].specifier.contains("0.6.2")
    assert ("deepspeed" in packages) == ("deepspeed" in train)


def _requirements(folder: Path) -> dict[str, Requirement]:
    lines = [line for line in (folder / "requirements.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    return {Requirement(line).name: Requirement(line) for line in lines}


def test_fa3_only_with_consent_and_a_source_build(tmp_path):
    """There is no FlashAttention-3 package on PyPI: without --allow fa3 an H100 plan
    takes fa2 and lists flash-attn; with it, requirements.txt builds flash_attn_3
    from a pinned commit and says so."""
    query = {"gpus": "1xH100", "model": "qwen3-8b", "top": 0}
    plain = _emit(query, tmp_path / "plain")
    assert yaml.safe_load((plain / "train.yaml").read_text())["flash_attn"] == "fa2"
    assert _requirements(plain)["flash-attn"].specifier.contains("2.5.6")
    allowed = _emit({**query, "allow": ["fa3"]}, tmp_path / "fa3")
    assert yaml.safe_load((allowed / "train.yaml").read_text())["flash_attn"] == "fa3"
    fa3 = _requirements(allowed)["flash_attn_3"]
    assert fa3.url.startswith("git+https://github.com/Dao-AILab/flash-attention.git@")
    assert fa3.url.endswith("#subdirectory=hopper") and "flash-attn" not in _requirements(allowed)
    assert "# flash_attn_3: FlashAttention-3 has no package on PyPI" in \
        (allowed / "requirements.txt").read_text()


def test_flowfactory_requirements_follow_the_plan(emitted):
    lines = (emitted["flowfactory"] / "requirements.txt").read_text().splitlines()
    accelerate = yaml.safe_load((emitted["flowfactory"] / "accelerate_config.yaml").read_text())
    assert lines[1].startswith("flow-factory @ git+")
    assert any(line.startswith("deepspeed>=") for line in lines) == \
        (accelerate["distributed_type"] == "DEEPSPEED")


def test_placeholders_fill_files_and_parameters_only():
    kb = shipped_kb()
    framework = kb.frameworks["llamafactory"]
    filled = fill_launch(kb, framework, "x {main} {NNODES} ${NNODES} {nothing} $((NNODES * 2))")
    assert filled == 'x train.yaml "$NNODES" ${NNODES} {nothing} $((NNODES * 2))'
    assert isinstance(framework.files[0], OutputFile)
    assert {f.kind for f in framework.files} >= {"params", "env", "script", "requirements"}


PACK = """module demo.framework for demo

framework demo {
  models "llm"
  unknown_keys "ignore"
  file main yaml "demo.yaml"
  file params params "run.sh"
  file run script "run.sh"
  file extra yaml "extra.yaml" if query.nodes > "two"
  launch "torchrun --nnodes {NNODE} train.py {main} {mian} ${HOME} $((NNODES * 2))"
  source "docs:https://example.org/demo"
}

emit params "NNODES" = query.nodes {
  doc "nodes in the job"
}
"""


def test_launch_placeholders_and_file_conditions_are_checked(tmp_path):
    (tmp_path / "pack" / "demo").mkdir(parents=True)
    (tmp_path / "pack" / "demo" / "demo.kb").write_text(PACK, encoding="utf-8")
    with pytest.raises(KbError) as caught:
        api.load_kb([str(tmp_path / "pack")], use_cache=False)
    found = sorted((d.span.line, d.code, d.message) for d in caught.value.diagnostics)
    assert found == [
        (9, "type", "'>' needs numbers, but this is str"),
        (10, "unknown-output", "unknown placeholder '{NNODE}' in a launch command; "
                               "did you mean 'NNODES'?"),
        (10, "unknown-output", "unknown placeholder '{mian}' in a launch command; "
                               "did you mean 'main'?")], found


# ---- accelerate's own loader and validation (slow: a side venv with accelerate) ------

def _side_venv(name: str, packages: list[str]) -> Path:
    """A virtual environment with `packages`, built once in the temp folder (or
    $KBSOLVE_TEST_VENVS) and reused; skips when the package index is out of reach."""
    root = Path(os.environ.get("KBSOLVE_TEST_VENVS") or Path(os.environ.get("TMPDIR", "/tmp")))
    folder = root / f"kbsolve-test-venv-{name}"
    python = folder / "bin" / "python"
    ready = folder / "ready"
    if ready.exists() and python.exists():
        return python
    venv.create(folder, with_pip=True, clear=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *packages],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        text = done.stdout + done.stderr
        if any(s in text for s in ("No matching distribution", "Could not fetch",
                                   "NewConnectionError", "Temporary failure in name")):
            pytest.skip(f"cannot install {packages}: {text.strip().splitlines()[-1]}")
        raise AssertionError(f"pip install {packages} failed:\n{text[-3000:]}")
    ready.write_text(" ".join(packages), encoding="utf-8")
    return python


_ACCELERATE_CHECK = r"""
import json, sys
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env
out = []
for case in json.load(open(sys.argv[1])):
    config = load_config_from_file(case["config_file"]) if case["config_file"] else None
    args = launch_command_parser().parse_args(case["argv"])
    args, defaults, _ = _validate_launch_command(args)
    seen = {"name": case["name"], "file": config.to_dict() if config else None,
            "num_processes": args.num_processes, "num_machines": args.num_machines,
            "machine_rank": args.machine_rank, "main_process_ip": args.main_process_ip,
            "main_process_port": args.main_process_port, "use_fsdp": args.use_fsdp,
            "use_deepspeed": args.use_deepspeed, "multi_gpu": args.multi_gpu}
    # what accelerate hands to torchrun (deepspeed's "standard" multi-node launcher too),
    # prepared as launch_command does before it calls the launcher
    cmd = None
    if args.use_deepspeed:
        args.deepspeed_fields_from_accelerate_config = ",".join(
            list(defaults.deepspeed_config) if defaults else [])
        cmd = prepare_deepspeed_cmd_env(args)[0]
    else:
        prepare_multi_gpu_env(args)
    seen["torchrun"] = {k: str(getattr(args, k)) for k in
                        ("nnodes", "node_rank", "nproc_per_node") + (
                            ("master_addr", "master_port") if hasattr(args, "master_addr")
                            else ("rdzv_endpoint",))}
    seen["cmd"] = cmd
    out.append(seen)
print(json.dumps(out))
"""


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_accelerate_accepts_emitted_files(emitted, stubs, tmp_path):
    python = _side_venv("accelerate", ["accelerate"])
    port = str(_free_port())  # rank 0's launcher checks that its port is free
    cases = []
    for name in ("llamafactory_fsdp", "flowfactory"):
        folder = emitted[name]
        for rank in (0, 1):
            record, done = _run(folder / "run.sh", stubs, tmp_path, {
                "NODE_RANK": str(rank), "MASTER_ADDR": MASTER, "MASTER_PORT": port})
            assert done.returncode == 0, done.stderr
            if record["prog"] == "accelerate":
                argv = record["args"][1:]  # after `launch`
            else:  # what ff-train hands to accelerate launch (cli.py 171-196)
                flags = _ff_train(record["args"], record["env"],
                                  yaml.safe_load((folder / "train.yaml").read_text()), folder)
                argv = [x for k, v in flags.items() for x in (f"--{k}", v)] + \
                    ["-m", "flow_factory.train", "train.yaml"]
            config = _flags(argv).get("config_file")
            argv = [str(folder / a) if a == config else a for a in argv]
            cases.append({"name": f"{name}:{rank}", "argv": argv,
                          "config_file": str(folder / config) if config else None})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "check.py").write_text(_ACCELERATE_CHECK)
    done = subprocess.run([str(python), str(tmp_path / "check.py"), str(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {r["name"]: r for r in json.loads(done.stdout.splitlines()[-1])}
    for name in ("llamafactory_fsdp", "flowfactory"):
        for rank in (0, 1):
            got = results[f"{name}:{rank}"]
            assert got["num_machines"] == 2 and got["machine_rank"] == rank
            assert got["num_processes"] == 16 and got["main_process_ip"] == MASTER
            assert got["file"]["num_machines"] == 2 and got["cmd"] is None
            torchrun = got["torchrun"]
            master = torchrun.pop("rdzv_endpoint", None) or \
                f"{torchrun.pop('master_addr')}:{torchrun.pop('master_port')}"
            assert master == f"{MASTER}:{port}"
            assert torchrun == {"nnodes": "2", "node_rank": str(rank), "nproc_per_node": "8"}
    assert results["llamafactory_fsdp:0"]["use_fsdp"]
    assert results["flowfactory:0"]["use_deepspeed"] or results["flowfactory:0"]["use_fsdp"] \
        or results["flowfactory:0"]["multi_gpu"]


def test_the_audit_reads_a_parameter_default_as_its_value():
    from kbsolve.audit.launch import read_launch
    info = read_launch({"run.sh": 'export NNODES="${NNODES:-2}"\nexport NODE_RANK=${NODE_RANK-0}\n'
                                  "torchrun --nproc_per_node 8 train.py\n"})
    assert info.env["NNODES"] == "2" and info.env["NODE_RANK"] == "0" and info.processes == 8
