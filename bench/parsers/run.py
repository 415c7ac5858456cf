"""Run the frameworks' own parsers (in the side venvs of venvs.py) over corpus configs.

    python -m bench.parsers.run [--write] [set ...]

prints each labelled config's verdict; --write stores it in the set's labels.yaml
(`parser:` of each config). A framework whose venv is missing is skipped."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench.audit_real.labels import CORPUS, load, set_dirs
from bench.parsers import venvs

HERE = Path(__file__).resolve().parent
LF_PARSER = {"lf_train": "train", "lf_predict": "train", "lf_infer": "infer", "lf_export": "infer",
             "lf_eval": "eval", "lf_v1": "v1"}


def cases_of(folder: Path, labels: dict, files: Path | None = None) -> dict[str, list[dict]]:
    """venv name -> parser cases of one set; `files`: a (fixed) copy of files/."""
    root = files or folder / "files"
    cwd = str(root / labels.get("launch_dir", "."))
    out: dict[str, list[dict]] = {}
    for config in labels.get("configs") or []:
        path = str(root / config["file"])
        if config["kind"] in LF_PARSER:
            out.setdefault("llamafactory", []).append(
                {"file": config["file"], "path": path, "cwd": cwd, "kind": LF_PARSER[config["kind"]],
                 "overrides": config.get("overrides") or {}})
        elif config["kind"] == "torchtitan":
            out.setdefault("torchtitan", []).append(
                {"file": config["file"], "path": path, "cwd": cwd,
                 "args": ["--job.config_file", path, *config.get("arguments", [])]})
    return out


def run(name: str, cases: list[dict]) -> list[dict]:
    script = HERE / ("check_llamafactory.py" if name == "llamafactory" else "check_torchtitan.py")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(cases, handle)
    done = subprocess.run([str(venvs.python_of(name)), str(script), handle.name],
                          capture_output=True, text=True, timeout=1800,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                               "TRANSFORMERS_OFFLINE": "1", "DISABLE_VERSION_CHECK": "1"})
    Path(handle.name).unlink()
    if done.returncode != 0:
        raise RuntimeError(f"{name} parser run failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdicts(folder: Path, labels: dict, files: Path | None = None) -> dict[str, dict]:
    """file -> verdict, for the frameworks whose venv is built."""
    out = {}
    for name, cases in cases_of(folder, labels, files).items():
        if venvs.ready(name):
            out.update({v["file"]: v for v in run(name, cases)})
    return out


def main(argv: list[str]) -> int:
    write = "--write" in argv
    chosen = [a for a in argv if not a.startswith("--")]
    for folder in set_dirs(CORPUS):
        if chosen and folder.name not in chosen:
            continue
        _, labels = load(folder)
        found = verdicts(folder, labels)
        for config in labels.get("configs") or []:
            verdict = found.get(config["file"])
            if verdict is None:
                continue
            stored = {"verdict": verdict["verdict"], "by": verdict["parser"]}
            for key in ("message", "environment"):
                if verdict.get(key):
                    stored[key] = verdict[key]
            print(f"{folder.name}/{config['file']}: {stored['verdict']} "
                  f"{stored.get('message', '')}", flush=True)
            config["parser"] = stored
        if write and found:
            (folder / "labels.yaml").write_text(
                yaml.safe_dump(labels, sort_keys=False, allow_unicode=True, width=100),
                encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
