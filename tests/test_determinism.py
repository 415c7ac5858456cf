"""The plan JSON is byte-identical across 20 fresh processes, each with its own
PYTHONHASHSEED (slow: 20 full solves; CI runs the three-seed test in
tests/test_cli_solve.py, and `python -m bench` runs as many of the 20 as fit)."""

from __future__ import annotations

import os

import pytest

from cli_helpers import run_kbsolve

QUERY = ["--gpus", "8xA100", "--model", "qwen3-8b", "--top", "1", "--format", "json"]


@pytest.mark.slow
def test_json_is_identical_over_20_processes_and_hash_seeds(tmp_path):
    outputs = set()
    for seed in range(20):
        done = run_kbsolve(QUERY, timeout=600, env={**os.environ, "PYTHONHASHSEED": str(seed),
                                                    "KBSOLVE_CACHE_DIR": str(tmp_path)})
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
