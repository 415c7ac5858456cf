"""Build (once) the side virtual environments that hold each framework's own parser.

torch comes from the local CPU wheel (pip's configured find-links) first, so that a
framework's requirements never pull a CUDA build. Nothing here is a runtime
dependency of kbsolve: only `python -m bench.parsers` and the slow test use them.

    python -m bench.parsers.venvs [name ...]   # build; prints seconds per venv
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

# name -> the pip requirements of the parser (pinned); Flow-Factory is not on PyPI
PARSERS = {
    # deepspeed: TrainingArguments loads the `deepspeed` file (a path that must exist)
    "llamafactory": ["llamafactory==0.9.5", "deepspeed"],
    "torchtitan": ["torchtitan==0.3.0", "triton", "transformers>=4.51.1", "sentencepiece"],
}
NOT_INSTALLABLE = {
    "flowfactory": "Flow-Factory publishes no package on PyPI (no 'flow-factory' or "
                   "'flow_factory' in the index); its parser would need the repository's "
                   "source, which this bench does not vendor",
}


def root() -> Path:
    return Path(os.environ.get("KBSOLVE_TEST_VENVS") or os.environ.get("TMPDIR", "/tmp"))


def python_of(name: str) -> Path:
    return root() / f"kbsolve-parser-venv-{name}" / "bin" / "python"


def ready(name: str) -> bool:
    marker = python_of(name).parent.parent / "ready"
    return marker.exists() and marker.read_text(encoding="utf-8") == json.dumps(PARSERS[name])


def build(name: str) -> tuple[bool, str]:
    """(built, message): reuses a venv built with the same requirements."""
    if name in NOT_INSTALLABLE:
        return False, NOT_INSTALLABLE[name]
    if ready(name):
        return True, "already built"
    folder = python_of(name).parent.parent
    venv.create(folder, with_pip=True, clear=True)
    python = str(python_of(name))

    def pip(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([python, "-m", "pip", "install", "-q", *args],
                              capture_output=True, text=True, timeout=3600)

    if pip("torch", "--no-index", "--no-deps").returncode == 0:
        done = pip("torch")
    else:
        done = pip("torch", "--index-url", "https://download.pytorch.org/whl/cpu")
    if done.returncode == 0:
        done = pip(*PARSERS[name])
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()
        return False, lines[-1] if lines else f"pip exited {done.returncode}"
    (folder / "ready").write_text(json.dumps(PARSERS[name]), encoding="utf-8")
    return True, "built"


def main(names: list[str]) -> int:
    status = 0
    for name in names or [*PARSERS, *NOT_INSTALLABLE]:
        start = time.perf_counter()
        built, message = build(name)
        print(f"{name}: {'ok' if built else 'not installed'} in "
              f"{time.perf_counter() - start:.0f} s: {message}", flush=True)
        status |= 0 if built or name in NOT_INSTALLABLE else 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
