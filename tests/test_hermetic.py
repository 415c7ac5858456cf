"""The tests test this checkout: `kbsolve` is imported from it (the editable
install), and the child processes of tests/cli_helpers.py run the same package
with this interpreter whatever PATH holds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kbsolve
from cli_helpers import PYTHON, run_kbsolve

REPO = Path(__file__).resolve().parents[1]


def test_kbsolve_is_imported_from_this_checkout():
    where = Path(kbsolve.__file__).resolve().parent
    assert where == REPO, (f"the tests import kbsolve from {where}, not from the checkout "
                           f"{REPO}; install it editable: pip install -e '.[test]'")


def test_a_child_runs_this_checkout_without_path(tmp_path):
    env = {**os.environ, "PATH": ""}
    child = subprocess.run([*PYTHON, "-c", "import kbsolve; print(kbsolve.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert Path(child.stdout.strip()).resolve().parent == REPO
    done = run_kbsolve(["--help"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: kbsolve ")
