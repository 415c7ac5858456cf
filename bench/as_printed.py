"""Plans that run as printed (issue 24), over a 200-query grid (LlamaFactory,
Flow-Factory, torchtitan, diffusers and plain PyTorch; one and two nodes, pins,
--allow, --network): each plan's files are emitted, read back as the frameworks
read them, and compared with the plan.

A plan is a defect when
- a setting it prints is not what its files say: every option the plan shows
  is read back from the YAML, JSON, run.sh parameters, environment or flags it
  is emitted to (through its value map; an omitted value must be absent);
- a file names a file that was not written (train.yaml's ds_config.json, an
  accelerate file);
- the launch starts another number of processes than the plan's GPUs
  (run.sh's NPROC_PER_NODE and NNODES, torchrun's and accelerate's counts, the
  accelerate file's num_processes);
- requirements.txt misses a package the config needs (the table below: what
  each framework imports for a setting), or names one without a version or a
  pinned source;
- it prints a setting the framework overrides (Unsloth with checkpointing off
  or with Liger).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml
from packaging.requirements import Requirement

LF_MODELS = ["qwen3-0.6b", "qwen3-8b", "llama3-8b", "qwen2.5-7b", "gemma2-9b", "qwen3-32b",
             "llama3-70b", "mixtral-8x7b", "qwen3-30b-a3b", "mistral-7b-v0.3"]
LF_GPUS = ["1x4090", "2x4090", "1xA100", "1xH100", "4xL40S", "8xA100", "8xH100"]
LF_PINS = [  # (GPUs, model, pins, allow)
    ("1xA100", "qwen3-8b", ["use_unsloth=true"], []),
    ("1x4090", "qwen3-8b", ["use_unsloth=true", "quantization_bit=4"], []),
    ("1xH100", "llama3-8b", ["use_unsloth=true", "enable_liger_kernel=true"], []),
    ("1x4090", "qwen3-8b", ["quantization_bit=4"], []),
    ("1x4090", "llama3-8b", ["quantization_bit=4", "quantization_method=hqq"], []),
    ("1xA100", "qwen3-8b", ["optim=adamw_8bit"], []),
    ("1xA100", "qwen3-8b", ["finetuning_type=full", "use_galore=true", "optim=adamw_torch"], []),
    ("1xA100", "qwen3-8b", ["finetuning_type=full", "use_badam=true"], []),
    ("1xA100", "qwen3-8b", ["finetuning_type=full", "use_apollo=true", "optim=adamw_torch"],
     []),
    ("8xA100", "qwen3-8b", ["finetuning_type=full", "use_adam_mini=true"], []),
    ("8xH100", "qwen3-8b", ["fp8=true"], []),
    ("8xH100", "llama3-8b", ["fp8=true", "fp8_backend=te"], []),
    ("8xA100", "qwen3-8b", ["deepspeed=z2"], []),
    ("8xA100", "qwen3-8b", ["deepspeed=z3"], []),
    ("8xA100", "llama3-70b", ["finetuning_type=full", "deepspeed=z3_offload"], []),
    ("8xH100", "qwen3-8b", ["deepspeed=z2_autotp"], []),
    ("8xH200", "mixtral-8x7b", ["deepspeed=z2_autotp"], []),
    ("8xA100", "qwen3-8b", ["fsdp=fsdp1"], []),
    ("8xH100", "qwen3-32b", ["fsdp=fsdp2"], []),
    ("2x4090", "qwen2.5-72b", ["quantization_bit=4", "fsdp=fsdp1_offload"], []),
    ("1xH100", "qwen3-8b", [], ["fa3"]),
    ("8xH100", "llama3-70b", ["finetuning_type=full"], ["fa3"]),
    ("1xA100", "qwen3-8b", [], ["packing"]),
    ("1xA100", "qwen3-8b", ["neat_packing=true"], []),
    ("1xA100", "qwen3-8b", ["use_dora=true"], []),
    ("1x4090", "llama3-70b", [], ["numerics"]),
    ("8xH100", "llama3-70b", ["finetuning_type=full"], []),
    ("4xL40S", "qwen3-8b", ["deepspeed=z2", "enable_liger_kernel=true"], []),
    ("1xA100", "qwen3-8b", ["use_unsloth_gc=true"], []),
    ("1xA100", "gemma2-9b", ["flash_attn=fa2"], []),
    ("8xA100", "qwen3-8b", ["deepspeed=z0"], []),
    ("1xA100", "qwen3-8b", ["finetuning_type=full", "optim=adafactor"], []),
    ("1xA100", "llama3-8b", ["use_rslora=true"], []),
    ("8xA100", "qwen3-32b", ["deepspeed=z3", "enable_liger_kernel=true"], []),
    ("1xA100", "qwen3-8b", ["finetuning_type=freeze"], []),
    ("1xA100", "qwen3-8b", ["finetuning_type=full", "pure_bf16=true"], []),
]
LF_TWO_NODES = [("2x8xH100", m, n) for m in ("llama3-8b", "llama3-70b", "qwen3-32b")
                for n in ("ib-400", "ib-8x400", "roce-200")]
DIFFUSION = [("wan14b", "grpo"), ("flux1-dev", "grpo"), ("sd3.5-medium", "nft"),
             ("qwen-image", "grpo"), ("flux1-dev", "dpo"), ("sd3.5-medium", "awm")]
DIFFUSION_GPUS = ["1xA100", "1xH100", "8xA100", "8xH100"]
TORCHTITAN = ["1xH100", "8xA100", "8xH100", "2x8xH100", "4x8xA100"]
DIFFUSERS = [("flux1-dev", "1x4090"), ("flux1-dev", "1xA100"), ("flux1-dev", "2xA100"),
             ("sd3.5-medium", "1x4090"), ("sd3.5-medium", "1xA100"), ("flux1-dev", "8xH100")]
PYTORCH_MODELS = ["qwen3-8b", "llama3-8b", "qwen3-0.6b", "qwen2.5-7b", "llama3-70b"]
PYTORCH_GPUS = ["1x4090", "1xA100", "4xH100", "8xH100", "2x8xH100"]


def grid() -> list[dict]:
    queries = [{"gpus": g, "model": m} for m in LF_MODELS for g in LF_GPUS]
    queries += [{"gpus": g, "model": m, "task": "dpo"} for m in LF_MODELS[:5]
                for g in ("1xA100", "8xA100", "8xH100")]
    queries += [{"gpus": g, "model": m, "task": "pt"} for m in ("qwen3-0.6b", "llama3-8b")
                for g in ("1xA100", "8xH100")]
    queries += [{"gpus": g, "model": m, "set": s, "allow": a} for g, m, s, a in LF_PINS]
    queries += [{"gpus": g, "model": m, "network": n} for g, m, n in LF_TWO_NODES]
    queries += [{"gpus": g, "model": m, "task": t} for m, t in DIFFUSION for g in DIFFUSION_GPUS]
    queries += [{"gpus": "2x8xA100", "model": m, "task": t, "network": "ib-400"}
                for m, t in DIFFUSION[:3]]
    queries += [{"gpus": g, "model": "flux1-dev", "framework": "torchtitan"} for g in TORCHTITAN]
    queries += [{"gpus": "2x8xH100", "model": "flux1-dev", "framework": "torchtitan",
                 "network": "ib-8x400"}]
    queries += [{"gpus": g, "model": m, "framework": "diffusers"} for m, g in DIFFUSERS]
    queries += [{"gpus": g, "model": m, "framework": "pytorch"} for m in PYTORCH_MODELS
                for g in PYTORCH_GPUS]
    queries += [{"gpus": "2x8xH100", "model": m, "framework": "pytorch", "network": "ib-400",
                 "set": ["method=full"]} for m in ("llama3-8b", "qwen3-8b")]
    return queries


# ---- what a config needs installed: what each framework imports for a setting ----

def _needs_llamafactory(c: dict) -> set[str]:
    """LlamaFactory's parser.py 252-306 (check_version of each flag's package),
    quantization.py, transformers' attention and optimizers, fp8_utils.py."""
    needs = {"llamafactory"}
    needs |= {"flash-attn"} if c.get("flash_attn") == "fa2" else set()
    needs |= {"flash-attn-3"} if c.get("flash_attn") == "fa3" else set()
    for key, package in (("enable_liger_kernel", "liger-kernel"), ("use_unsloth", "unsloth"),
                         ("use_galore", "galore-torch"), ("use_apollo", "apollo-torch"),
                         ("use_badam", "badam"), ("use_adam_mini", "adam-mini")):
        if c.get(key):
            needs.add(package)
    if c.get("deepspeed") not in (None, "none"):
        needs.add("deepspeed")
    if (c.get("quantization_bit") or 0) > 0:
        needs.add({"bnb": "bitsandbytes", "hqq": "hqq", "eetq": "eetq"}
                  .get(c.get("quantization_method", "bnb"), "bitsandbytes"))
    if "8bit" in str(c.get("optim", "")):
        needs.add("bitsandbytes")
    if c.get("fp8"):
        needs.add("transformer-engine" if c.get("fp8_backend") == "te" else "torchao")
    return needs


def _needs_flowfactory(c: dict) -> set[str]:
    """Flow-Factory's extras and diffusers' attention backends."""
    needs = {"flow-factory"}
    backend = str(c.get("model.attn_backend", "default"))
    if backend in ("flash", "flash_varlen"):
        needs.add("flash-attn")
    elif backend in ("_flash_3", "_flash_varlen_3"):
        needs.add("flash-attn-3")
    elif backend.endswith("_hub"):
        needs.add("kernels")
    elif backend in ("sage", "xformers"):
        needs.add({"sage": "sageattention", "xformers": "xformers"}[backend])
    return needs


NEEDS = {"llamafactory": _needs_llamafactory, "flow-factory": _needs_flowfactory}
_NAMES = {"flash_attn_3": "flash-attn-3", "transformer_engine": "transformer-engine"}


# ---- reading the files back -------------------------------------------------------

def _read(folder: Path) -> dict:
    """Each written file as its framework reads it: YAML and JSON as trees, run.sh as
    parameters (their defaults), environment, flag arrays and the launch line."""
    files: dict = {}
    for path in sorted(folder.iterdir()):
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            files[path.name] = yaml.safe_load(text) or {}
        elif path.suffix == ".json":
            files[path.name] = json.loads(text)
        elif path.suffix == ".sh":
            files[path.name] = _script(text)
        elif path.name.endswith(".txt"):
            files[path.name] = [Requirement(line) for line in text.splitlines()
                                if line.strip() and not line.startswith("#")]
    return files


def _script(text: str) -> dict:
    from kbsolve.audit.launch import read_launch
    info = read_launch({"run.sh": text})
    flags: dict[str, str | bool] = {}
    for array in re.findall(r"(?ms)^\w+=\(\n(.*?)^\)", text):
        for line in array.splitlines():
            key, _, value = line.strip().removeprefix("--").partition(" ")
            flags[key] = _unquote(value) if value else True
    launch = [line for line in text.splitlines() if line and not line.startswith(
        ("#", "set ", "cd ", "usage=", "fail()", "[ ", "case ", "export ")) and "=" not in
        line.split(" ", 1)[0] and not line.startswith(("  ", ")"))]
    return {"env": info.env, "flags": flags, "launch": launch[-1] if launch else ""}


def _unquote(value: str) -> str:
    return value[1:-1].replace("'\\''", "'") if value[:1] == value[-1:] == "'" else value


def _lookup(tree, dotted: str, flat: bool):
    if flat:
        return (True, tree[dotted]) if dotted in tree else (False, None)
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False, None
        tree = tree[part]
    return True, tree


def _same(written, expected) -> bool:
    if isinstance(expected, bool) or isinstance(written, bool):
        return str(written).lower() == str(expected).lower()
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            return abs(float(written) - float(expected)) <= 1e-9 * max(1, abs(float(expected)))
        except (TypeError, ValueError):
            return False
    if isinstance(expected, (list, tuple)):
        items = written if isinstance(written, list) else str(written).split()
        return len(items) == len(expected) and all(
            _same(w, _plain(e)) for w, e in zip(items, expected))
    return str(written) == str(expected)


# ---- one plan ---------------------------------------------------------------------

def check(kb, fields: dict, plan, folder: Path, emit: bool = True) -> list[str]:
    """What in one plan's files (emitted into `folder`, unless `emit` is false: read as
    they are) is not the plan; an empty list: nothing."""
    from kbsolve import api
    from kbsolve.program.query import Query, resolve
    from kbsolve.plan.report import option_key
    if emit:
        api.emit(plan, str(folder), kb)
    files = _read(folder)
    framework = kb.frameworks[plan.framework]
    problem = resolve(kb, Query(**{**fields, "top": 0})).problem
    by_name = {f.name: f for f in framework.files}
    wrong: list[str] = []
    assignment = {o.key: plan.config.get(option_key(kb, o)) for o in problem.options}
    assignment.update(problem.fixed)
    for option in problem.options:
        shown = plan.config.get(option_key(kb, option))
        if shown is None or not option.emits:
            continue
        if option.when is not None and not problem.evaluator.run(option.when, assignment):
            continue
        for emit in option.emits:
            spec = by_name.get(emit.target)
            written = files.get(Path(spec.path).name) if spec else None
            if written is None:
                continue  # a file the plan does not write (its `if` does not hold)
            expected = shown
            if emit.value_map is not None:
                mapped = {_plain(k): v for k, v in emit.value_map}
                expected = mapped.get(_plain(shown), shown)
            tree, flat = _tree_of(spec, written)
            found, value = _lookup(tree, emit.key, flat)
            if expected is None:
                if found:
                    wrong.append(f"{option.name}={shown} is omitted by its map but "
                                 f"{spec.path} writes {emit.key}: {value}")
            elif spec.kind == "args" and expected is False:
                if found:
                    wrong.append(f"{option.name}=false but {spec.path} passes --{emit.key}")
            elif not found or not _same(value, _plain(expected)):
                wrong.append(f"{option.name}={shown} but {spec.path} has {emit.key}: "
                             f"{value if found else '(absent)'}")
    wrong += _references(files, folder)
    wrong += _processes(plan, files)
    wrong += _requirements(plan, files)
    wrong += _overridden(fields, plan)
    return wrong


def _plain(value):
    from kbsolve.plan.report import plain
    return plain(value)


def _tree_of(spec, written):
    if spec.kind == "params" or spec.kind == "env":
        return written["env"], True
    if spec.kind == "args":
        return written["flags"], True
    return written, spec.kind in ("requirements",)


def _references(files: dict, folder: Path) -> list[str]:
    """A config value that names a file of the folder must name one that was written."""
    wrong = []
    for name, tree in files.items():
        if not isinstance(tree, dict) or name == "run.sh":
            continue
        for value in _leaves(tree):
            if isinstance(value, str) and re.fullmatch(r"[\w.-]+\.(json|yaml)", value) and \
                    not (folder / value).is_file():
                wrong.append(f"{name} names {value}, which was not written")
    return wrong


def _leaves(tree):
    for value in tree.values():
        if isinstance(value, dict):
            yield from _leaves(value)
        else:
            yield value


def _processes(plan, files: dict) -> list[str]:
    """The processes the launch starts, as its launcher counts them, against the plan."""
    nodes, per_node = _shape(plan.query["gpus"])
    script = files.get("run.sh", {"env": {}, "launch": ""})
    env, launch = script["env"], script["launch"]
    env_nodes, env_procs = int(env.get("NNODES", 1)), env.get("NPROC_PER_NODE")
    wrong = []
    if env_nodes != nodes:
        wrong.append(f"run.sh starts {env_nodes} node(s), the plan has {nodes}")
    for name in ("accelerate_config.yaml",):
        file = files.get(name)
        if file and file.get("num_processes") != nodes * per_node:
            wrong.append(f"{name} num_processes {file.get('num_processes')}, the plan has "
                         f"{nodes * per_node} GPUs")
    uses_visible = launch.startswith("llamafactory-cli") or \
        ("torchrun" in launch and "--nproc_per_node" in launch)
    if uses_visible and nodes * per_node > 1:
        # llamafactory's launcher and torchrun count the visible devices unless told
        counted = re.search(r"--nproc_per_node\s+(\S+)", launch)
        said = counted.group(1).strip('"') if counted else "$NPROC_PER_NODE"
        value = env_procs if said == "$NPROC_PER_NODE" else said
        if value is None or not str(value).isdigit() or int(value) != per_node:
            wrong.append(f"run.sh starts {value or 'one process per visible device'} per node, "
                         f"the plan has {per_node}")
    return wrong


def _shape(gpus: str) -> tuple[int, int]:
    from kbsolve.program.facts import parse_gpus
    nodes, per_node, _ = parse_gpus(gpus)
    return nodes, per_node


def _requirements(plan, files: dict) -> list[str]:
    listed = {_NAMES.get(r.name.replace("_", "-").split("[")[0], r.name.replace("_", "-")
                         .split("[")[0]): r for r in files.get("requirements.txt", [])}
    listed = {_NAMES.get(k, k): v for k, v in listed.items()}
    needed = NEEDS.get(plan.framework, lambda c: set())(plan.config)
    wrong = [f"requirements.txt misses {p}" for p in sorted(needed - set(listed))]
    for name, requirement in listed.items():
        if name in needed and not (requirement.url or requirement.specifier or name in
                                   ("unsloth", "galore-torch", "apollo-torch", "adam-mini",
                                    "hqq", "eetq", "kernels")):
            wrong.append(f"requirements.txt names {name} without a version")
    return wrong


def _overridden(fields: dict, plan) -> list[str]:
    """Settings the framework overrides: Unsloth keeps its checkpointing and replaces
    Liger's kernels (LlamaFactory's loader.py 142-149, unsloth.py 47 and 77). The
    plan may keep one only where the query pinned it, and then must warn."""
    if not plan.config.get("use_unsloth"):
        return []
    pinned = {text.split("=", 1)[0].strip() for text in fields.get("set", [])}
    warned = any("UNSLOTH" in w.id for w in plan.warnings)
    return [f"Unsloth with {key}=true, which LlamaFactory's Unsloth path overrides"
            + ("" if key not in pinned else " (pinned, and no warning says so)")
            for key in ("disable_gradient_checkpointing", "enable_liger_kernel")
            if plan.config.get(key) and (key not in pinned or not warned)]


def measure(queries: list[dict] | None = None) -> dict:
    from kbsolve import api
    kb = api.load_kb()
    statuses: dict[str, int] = defaultdict(int)
    by_framework: dict[str, int] = defaultdict(int)
    defects: list[str] = []
    chosen = grid() if queries is None else queries
    with tempfile.TemporaryDirectory() as tmp:
        for i, fields in enumerate(chosen):
            plan = api.solve({**fields, "top": 0}, kb)
            statuses[plan.status] += 1
            by_framework[plan.framework] += 1
            if plan.status not in ("optimal", "feasible"):
                continue
            defects += [f"{fields}: {w}" for w in check(kb, fields, plan, Path(tmp) / str(i))]
    return {"as_printed_queries": len(chosen), "as_printed_statuses": dict(statuses),
            "as_printed_frameworks": dict(by_framework), "as_printed_defects": defects}


if __name__ == "__main__":
    print(json.dumps(measure(), indent=1))
