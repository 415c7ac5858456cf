"""A plain plan's argv runs without click (cli/plain.py): its parameters are the ones click
parses from it, any other argv is left to click, and the command prints and exits as
click's would."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from kbsolve.cli.main import cli
from kbsolve.cli.plain import DEFAULTS, plain_params

PLAIN = [
    ["--gpus", "8xA100", "--model", "wan14b"],
    ["-g", "1x4090", "-m", "llama3-70b"],
    ["--model", "qwen3-8b", "--gpus", "8xA100", "--format", "json"],
    ["--gpus", "8xA100", "--model", "qwen3-8b", "--format", "markdown", "--explain",
     "micro_batch_size"],
    ["--gpus", "8xH100", "--model", "qwen2.5-7b", "-f", "pytorch", "--objective", "memory"],
    ["--gpus", "2x4090", "--model", "llama3-8b", "--set", "lora_rank=16", "--set",
     "zero_stage=2", "--kb", "a", "--kb", "b", "-t", "dpo", "--network", "ib-400",
     "--resolution", "480x832", "--format", "yaml"],
]
CLICKS = [
    [], ["--gpus", "8xA100"], ["--model", "wan14b"], ["--help"], ["list", "gpus"],
    ["--gpus", "8xA100", "--model"], ["--gpus=8xA100", "--model", "wan14b"],
    ["--gpus", "8xA100", "--model", "wan14b", "--gpus", "1xA100"],
    ["--gpus", "8xA100", "--model", "wan14b", "--format", "JSON"],
    ["--gpus", "8xA100", "--model", "wan14b", "--objective", "fast"],
    ["--gpus", "8xA100", "--model", "wan14b", "--top", "0"],
    ["--gpus", "8xA100", "--model", "wan14b", "--emit", "out"],
    ["--gpus", "8xA100", "--model", "wan14b", "--force", "--set"],
    ["--gpus", "-1", "--model", "wan14b"], ["--gpus", "", "--model", "wan14b"],
    ["--gpus", "8xA100", "--model", "wan14b", "--version", "x"],
    ["-g8xA100", "-m", "wan14b"], ["--gpus", "8xA100", "--model", "wan14b", "estimate", "x"],
]


def _clicks(argv: list[str]) -> dict:
    with cli.make_context("kbsolve", list(argv)) as ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # protected_args, click 9
        assert not ctx.protected_args and not ctx.args  # nothing left for a subcommand
        return ctx.params


def test_the_defaults_are_clicks():
    assert _clicks([]) == DEFAULTS


@pytest.mark.parametrize("argv", PLAIN)
def test_a_plain_argv_gives_clicks_parameters(argv):
    assert plain_params(argv) == _clicks(argv)


@pytest.mark.parametrize("argv", CLICKS)
def test_any_other_argv_is_clicks(argv):
    assert plain_params(argv) is None


RUN = """
import os, runpy, sys
os._exit = sys.exit  # the command ends the process itself: not here
try:
    runpy.run_module("kbsolve", run_name="__main__", alter_sys=True)
except SystemExit as done:
    print("exit", done.code, "click" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--gpus", "8xA100", "--model", "no-such-model-xyz"],
                                  ["--gpus", "1xA100", "--model", "qwen3-0.6b", "--format",
                                   "json"]])
def test_the_plain_command_prints_and_exits_as_clicks(argv, tmp_path, seed_kb_cache, capsys):
    from kbsolve.cli.main import main
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(seed_kb_cache(tmp_path / "cache"))}
    done = subprocess.run([sys.executable, "-c", RUN, *argv], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    code = main(argv)
    clicks = capsys.readouterr()
    assert done.stdout == clicks.out
    *printed, last = done.stderr.splitlines(keepends=True)
    assert "".join(printed) == clicks.err
    assert last.split() == ["exit", str(code), "False"]  # no click loaded


@pytest.mark.parametrize("error", [KeyboardInterrupt(), EOFError(), RuntimeError("boom"),
                                   OSError(13, "Permission denied", "x.yaml"),
                                   RecursionError()])
def test_an_error_in_a_plain_plan_ends_it_as_in_clicks(error, monkeypatch, capsys):
    """What click's main and the guard make of an error in the plan (an interrupt: a blank
    line, then 'aborted'), the plain path makes of it too."""
    from kbsolve import api
    from kbsolve.cli.main import main
    from kbsolve.cli.plain import plan_command
    from kbsolve.cli.run import guarded_plain

    def raising(*args, **kwargs):
        raise error
    monkeypatch.setattr(api, "solve", raising)
    argv = ["--gpus", "8xA100", "--model", "wan14b"]
    code = main(argv)
    clicks = capsys.readouterr()
    assert guarded_plain(lambda: plan_command(**plain_params(argv))) == code
    assert capsys.readouterr() == clicks
    assert code in (2, 70)
