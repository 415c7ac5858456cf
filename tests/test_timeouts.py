"""`--timeout` is an optional outer guard, and no answer depends on a wall clock.

Without `--timeout` nothing reads the clock's verdict: the counted budgets (nodes,
Z3 rlimit) bound the work, so a query gives the same answer on any machine. The
guard itself is tested with a counting clock (solver/guard.py's `clock` replaced):
each reading advances it by one second, so the guard expires at the same point of
the work on every machine and under any load. An expired guard says "timed out"
in the table and `"status": "timed_out"` in the JSON, never "optimal", and exits 3.
"""

from __future__ import annotations

import json
import math

import pytest

from kbsolve import api
from kbsolve.cli.main import main
from kbsolve.diagnostics import EXIT_UNKNOWN
from kbsolve.solver import guard
from plans import shipped_kb

QUERY = {"gpus": "1x4090", "model": "qwen3-8b", "top": 0}


@pytest.fixture
def counting_clock(monkeypatch):
    """A clock that advances one second per reading; returns the readings made."""
    readings = []

    def clock() -> float:
        readings.append(None)
        return float(len(readings))
    monkeypatch.setattr(guard, "clock", clock)
    return readings


def test_without_a_timeout_the_guard_never_reads_the_clock(counting_clock):
    plan = api.solve(QUERY, shipped_kb())
    assert plan.status == "optimal" and not plan.timed_out
    assert counting_clock == [] and guard.deadline(None) == math.inf
    assert api.solve({**QUERY, "timeout": None}, shipped_kb()).config == plan.config


@pytest.mark.parametrize("seconds", [0.5, 40])
def test_an_expired_guard_says_timed_out_never_optimal(counting_clock, seconds):
    """0.5 s: expired at the search's first check; 40 s: somewhere later (the search
    or the explanations); either way the status is timed_out."""
    plan = api.solve({**QUERY, "timeout": seconds}, shipped_kb())
    assert plan.status == "timed_out" and plan.timed_out
    assert any("--timeout" in note for note in plan.notes)
    assert not plan.explanation and not plan.alternatives
    if plan.config:  # the best plan so far is a whole plan
        assert plan.memory and plan.speed


def test_time_out_is_exit_3_and_timed_out_in_table_and_json(counting_clock, capsys):
    argv = ["--gpus", QUERY["gpus"], "--model", QUERY["model"], "--top", "0",
            "--timeout", "0.5"]
    assert main(argv + ["--format", "json"]) == EXIT_UNKNOWN
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    data = json.loads(out)
    assert data["status"] == "timed_out" and data["timed_out"] is True
    assert main(argv) == EXIT_UNKNOWN
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("kbsolve: timed out") and "optimal" not in head
