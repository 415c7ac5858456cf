"""The plan command without click: its body (click's command in cli/main.py calls it too),
and the parameters of a plain argv (`kbsolve --gpus 8xA100 --model wan14b`, most plans), read
as click reads them. Such a command never imports click (~11 ms of a cold plan's CPU, issue
25); any other argv is click's (cli/__init__.py run)."""

from __future__ import annotations

from kbsolve import api
from kbsolve.api import EXIT_INFEASIBLE, EXIT_OK, EXIT_UNKNOWN, Diagnostic, KbError
from kbsolve.render import render

FORMATS = ("table", "json", "yaml", "markdown")
OBJECTIVES = ("speed", "memory")

# The command's parameters as click gives them when no flag is given (cli/main.py cli;
# tests/test_cli_plain.py compares them and every plain argv's with click's parse)
DEFAULTS = dict(gpus=None, model=None, framework=None, task=None, network=None, seq_len=None,
                resolution=None, frames=None, global_batch=None, pins=(), headroom=None,
                host_ram=None, fmt="table", packs=(), objective="speed", top=2, timeout=None,
                solver="z3", allow=(), explain_option=None, emit_dir=None, force=False,
                gpu_spec=None)
# the flags a plain argv holds (text values click passes as typed), by spelling
PLAIN_FLAGS = {"--gpus": "gpus", "-g": "gpus", "--model": "model", "-m": "model",
               "--framework": "framework", "-f": "framework", "--task": "task", "-t": "task",
               "--network": "network", "--resolution": "resolution", "--set": "pins",
               "--kb": "packs", "--format": "fmt", "--objective": "objective",
               "--explain": "explain_option"}
REPEATABLE = ("pins", "packs")
CHOICES = {"fmt": FORMATS, "objective": OBJECTIVES}


def plain_params(argv: list[str]) -> dict | None:
    """The command's parameters for an argv of PLAIN_FLAGS only, each `--flag value` with a
    value that does not start with '-', none but REPEATABLE given twice, a choice among its
    CHOICES, --gpus and --model both given; None for any other argv (click's to read)."""
    if len(argv) % 2:
        return None
    params = dict(DEFAULTS)
    given = set()
    for flag, value in zip(argv[::2], argv[1::2]):
        name = PLAIN_FLAGS.get(flag)
        if name is None or not value or value.startswith("-") \
                or value not in CHOICES.get(name, (value,)):
            return None
        if name in REPEATABLE:
            params[name] += (value,)
        elif name in given:
            return None
        else:
            params[name] = value
            given.add(name)
    return params if params["gpus"] and params["model"] else None


def plan_command(gpus, model, framework, task, network, seq_len, resolution, frames,
                 global_batch, pins, headroom, host_ram, fmt, packs, objective, top, timeout,
                 solver, allow, explain_option, emit_dir, force, gpu_spec=None) -> int:
    """`kbsolve --gpus ... --model ...`: the plan, printed; the exit code of its status."""
    from kbsolve.cli.run import echo
    if emit_dir:
        api.check_emit_folder(emit_dir, force)  # before any work
    fields = query_fields(gpus, model, framework, task, network, seq_len, resolution, frames,
                          pins, headroom, host_ram, global_batch, gpu_spec)
    fields.update(objective=objective, top=top, timeout=timeout, allow=list(allow))
    plan = api.solve(fields, packs=list(packs), solver=solver)
    if explain_option:
        echo(render(plan, "explain", option=explain_option))
    else:
        echo(render(plan, fmt))
    if emit_dir and plan.status in api.EMITTABLE and plan.config:
        emitted = api.emit_files(plan, emit_dir, packs=list(packs), force=force)
        echo(render(emitted, "text", kind="emitted"), err=True)
    return {"optimal": EXIT_OK, "feasible": EXIT_UNKNOWN, "unknown": EXIT_UNKNOWN,
            "timed_out": EXIT_UNKNOWN, "infeasible": EXIT_INFEASIBLE}[plan.status]


def query_fields(gpus, model, framework, task, network, seq_len, resolution, frames, pins,
                 headroom, host_ram=None, global_batch=None, gpu_spec=None) -> dict:
    if not gpus and gpu_spec:
        gpus = "1"
    if not gpus:
        raise KbError(Diagnostic("missing --gpus (for example --gpus 8xA100, or 2x16GB for a "
                                 "card the catalog lacks)"))
    if not model:
        raise KbError(Diagnostic("missing --model (for example --model qwen3-8b)"))
    if headroom is not None and not 0 <= headroom < 1:
        raise KbError(Diagnostic(f"--headroom {headroom}: give a fraction from 0 to below 1"))
    return dict(gpus=gpus, model=model, framework=framework, task=task, network=network,
                seq_len=seq_len, resolution=resolution, frames=frames, set=list(pins),
                headroom=headroom, host_ram=host_ram, global_batch=global_batch,
                gpu_spec=gpu_spec)
