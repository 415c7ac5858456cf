"""Auditing a generated 1,000-file project: every file read, the skipped folders
skipped (its speed, at most 1 s on a quiet machine, is measured in bench/)."""

from __future__ import annotations

from pathlib import Path

from kbsolve import api
from audit_helpers import PROJECTS

CONFIG = (PROJECTS / "lf_project" / "configs" / "qwen_lora.yaml").read_text()


def make_project(root: Path, files: int = 1000) -> Path:
    """Code, docs, data and 20 training configs in nested folders; a .git and a
    venv that the audit must skip."""
    for i in range(files):
        folder = root / f"pkg{i % 10}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        kind = i % 50
        if kind == 0:
            (folder / f"train_{i}.yaml").write_text(CONFIG)
        elif kind < 10:
            (folder / f"data_{i}.yaml").write_text(f"name: set{i}\nrows: {i}\nsplit: train\n")
        elif kind < 15:
            (folder / f"meta_{i}.json").write_text(f'{{"id": {i}, "tags": ["a", "b"]}}')
        elif kind < 18:
            (folder / f"run_{i}.sh").write_text(f"python -m pkg{i % 10}.main --seed {i}\n")
        elif kind < 22:
            (folder / f"NOTES_{i}.md").write_text(f"# Note {i}\n\nSome text.\n" * 5)
        else:
            (folder / f"mod_{i}.py").write_text(
                f"import os\nimport json\n\n\ndef f{i}(x):\n    return x * {i}\n" * 4)
    for skipped in (".git/objects", ".venv/lib"):
        (root / skipped).mkdir(parents=True)
        (root / skipped / "x.yaml").write_text(CONFIG)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    return root


def test_a_thousand_files_audit_quickly(tmp_path):
    project = make_project(tmp_path / "big")
    kb = api.load_kb()  # from this test's cache (conftest): the timing starts after it
    report, _ = api.audit(str(project), kb=kb)  # its speed is a bench figure (bench/audit_project.py)
    assert report.files == 1000 and len(report.units) == 20
