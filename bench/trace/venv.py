"""The pinned side virtual environment the tracing scripts run in."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = Path(__file__).with_name("requirements.txt")


def folder() -> Path:
    return Path(os.environ.get("KBSOLVE_TRACE_VENV") or ROOT / ".venv-trace")


def python() -> Path:
    """The side venv's interpreter, built (or completed) on first use."""
    where = folder()
    exe = where / "bin" / "python"
    stamp = where / "requirements.txt"
    wanted = REQUIREMENTS.read_text(encoding="utf-8")
    if exe.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return exe
    if not exe.exists():
        venv.create(where, with_pip=True)
    print(f"bench.trace: installing {REQUIREMENTS.name} into {where}", file=sys.stderr)
    subprocess.run([str(exe), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(wanted, encoding="utf-8")
    return exe


def versions(exe: Path) -> dict[str, str]:
    code = ("import json, platform, torch, transformers, peft, accelerate, diffusers;"
            "print(json.dumps({'python': platform.python_version(), 'torch': torch.__version__,"
            "'transformers': transformers.__version__, 'peft': peft.__version__,"
            "'accelerate': accelerate.__version__, 'diffusers': diffusers.__version__}))")
    import json
    return json.loads(subprocess.run([str(exe), "-c", code], check=True, capture_output=True,
                                     text=True).stdout)
