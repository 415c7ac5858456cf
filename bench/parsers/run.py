"""Run the frameworks' own parsers (in the side venvs of venvs.py) over corpus configs.

    python -m bench.parsers.run [--write] [set ...]

prints each labelled config's verdict; --write stores it in the set's labels.yaml
(`parser:` of each config). A framework whose venv is missing is skipped."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench.audit_real.labels import CORPUS, load, set_dirs
from bench.parsers import venvs

HERE = Path(__file__).resolve().parent
LF_PARSER = {"lf_train": "train", "lf_predict": "train", "lf_infer": "infer", "lf_export": "infer",
             "lf_eval": "eval", "lf_v1": "v1", "lf_cli": "train"}
LF_ENTRIES = ("llamafactory-cli", "src/train.py", "src/train_bash.py")


def command_line(script: str) -> list[str] | None:
    """The arguments after LlamaFactory's entry point in a launch script (continued
    lines joined, comments dropped); None when no line launches it."""
    lines, current = [], ""
    for raw in script.splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        lines.append(current + line)
        current = ""
    for line in lines + [current]:
        try:
            words = shlex.split(line)
        except ValueError:  # an unclosed quote elsewhere on the line: plain words
            words = line.split()
        for i, word in enumerate(words):
            if word.endswith(LF_ENTRIES):
                rest = words[i + 1:]
                if word.endswith("llamafactory-cli") and rest[:1] == ["train"]:
                    rest = rest[1:]
                return [w for w in rest if w not in ("|", "&")]
    return None


def cases_of(folder: Path, labels: dict, files: Path | None = None) -> dict[str, list[dict]]:
    """venv name -> parser cases of one set; `files`: a (fixed) copy of files/."""
    root = files or folder / "files"
    cwd = str(root / labels.get("launch_dir", "."))
    out: dict[str, list[dict]] = {}
    for config in labels.get("configs") or []:
        path = str(root / config["file"])
        if config["kind"] == "lf_cli":
            argv = command_line((root / config["file"]).read_text(encoding="utf-8"))
            if argv is not None:
                out.setdefault("llamafactory", []).append(
                    {"file": config["file"], "path": path, "cwd": cwd, "kind": "train", "argv": argv})
        elif config["kind"] in LF_PARSER:
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
    return {file: v for (_, file), v in verdicts_many([(folder, labels, files)]).items()}


def verdicts_many(sets: list[tuple[Path, dict, Path | None]]) -> dict[tuple[str, str], dict]:
    """(set, file) -> verdict over many sets: one parser process per framework."""
    by_venv: dict[str, list[dict]] = {}
    for folder, labels, files in sets:
        for name, cases in cases_of(folder, labels, files).items():
            by_venv.setdefault(name, []).extend({**case, "set": folder.name} for case in cases)
    out = {}
    for name, cases in by_venv.items():
        if venvs.ready(name):
            for case, verdict in zip(cases, run(name, cases)):
                out[(case["set"], case["file"])] = verdict
    return out


def main(argv: list[str]) -> int:
    write = "--write" in argv
    chosen = [a for a in argv if not a.startswith("--")]
    folders = [f for f in set_dirs(CORPUS) if not chosen or f.name in chosen]
    loaded = {folder: load(folder)[1] for folder in folders}
    every = verdicts_many([(folder, labels, None) for folder, labels in loaded.items()])
    for folder, labels in loaded.items():
        found = {file: v for (name, file), v in every.items() if name == folder.name}
        for config in labels.get("configs") or []:
            verdict = found.get(config["file"])
            if verdict is None:
                continue
            stored = {"verdict": verdict["verdict"], "by": verdict["parser"]}
            for key in ("message", "environment"):
                if verdict.get(key):
                    stored[key] = verdict[key]
            print(f"{folder.name}/{config['file']}: {stored['verdict']} "
                  f"{stored.get('message', '')} {stored.get('environment', '')}", flush=True)
            config["parser"] = stored
        if write and found:
            (folder / "labels.yaml").write_text(
                yaml.safe_dump(labels, sort_keys=False, allow_unicode=True, width=100),
                encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
