"""Load and validate the corpus: each set's source.yaml and labels.yaml (the schema is
documented in bench/data/real_projects/README.md)."""

from __future__ import annotations

from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real_projects"
SOURCE_KINDS = ("official", "third_party", "issue", "lookalike")
FRAMEWORKS = ("llamafactory", "flowfactory", "torchtitan", "diffusers", "other")
# lf_cli: a launch script whose command line is the LlamaFactory config (--key value)
JUDGED = ("lf_train", "lf_predict", "lf_infer", "lf_export", "lf_eval", "lf_v1", "lf_cli",
          "ff_train", "torchtitan", "diffusers_launch", "lookalike")
FILE_KINDS = JUDGED + ("launch", "accelerate", "deepspeed", "dataset_info", "requirements")
# label kind -> the finding kinds that find it (see score.py)
PROBLEM_KINDS = ("error", "silent", "launch", "path", "oom", "fits", "recipe", "tip", "change",
                 "unsupported_kind")
FALSE_KINDS = PROBLEM_KINDS + ("any", "unknown_key", "audited")
VERDICTS = ("accepted", "refused", "not_run")


def set_dirs(root: Path = CORPUS) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "files").is_dir())


def load(folder: Path) -> tuple[dict, dict]:
    source = yaml.safe_load((folder / "source.yaml").read_text(encoding="utf-8"))
    labels = yaml.safe_load((folder / "labels.yaml").read_text(encoding="utf-8"))
    return source, labels


def validate(folder: Path) -> list[str]:
    """Every problem with one set, as 'set: what' lines (empty: valid)."""
    name = folder.name
    try:
        source, labels = load(folder)
    except (OSError, yaml.YAMLError) as error:
        return [f"{name}: {error}"]
    out = []
    for key in ("repo", "paths", "license", "url", "kind"):
        if not source.get(key):
            out.append(f"{name}: source.yaml has no {key}")
    if source.get("kind") not in SOURCE_KINDS:
        out.append(f"{name}: source kind {source.get('kind')!r} not in {SOURCE_KINDS}")
    if source.get("kind") == "issue" and not (source.get("thread") and source.get("hardware")):
        out.append(f"{name}: an issue set names its thread and the hardware it states")
    if source.get("kind") != "issue" and not source.get("commit"):
        out.append(f"{name}: source.yaml has no commit")
    files = folder / "files"
    for path in source.get("paths") or []:
        if not (files / path).is_file():
            out.append(f"{name}: source path {path} is not in files/")
    if not isinstance(labels, dict):
        return out + [f"{name}: labels.yaml is not a mapping"]
    if labels.get("framework") not in FRAMEWORKS:
        out.append(f"{name}: framework {labels.get('framework')!r} not in {FRAMEWORKS}")
    if not isinstance(labels.get("holdout", False), bool):
        out.append(f"{name}: holdout is true or false")
    if not isinstance(labels.get("hardware"), str):
        out.append(f"{name}: hardware is a --gpus spec or 'unknown'")
    configs = labels.get("configs") or []
    if not configs:
        out.append(f"{name}: no configs labelled")
    for config in configs:
        if not (files / str(config.get("file"))).is_file():
            out.append(f"{name}: labelled file {config.get('file')} does not exist")
        if config.get("kind") not in FILE_KINDS:
            out.append(f"{name}: {config.get('file')}: file kind {config.get('kind')!r}")
        parser = config.get("parser") or {"verdict": "not_run"}
        if parser.get("verdict") not in VERDICTS:
            out.append(f"{name}: {config.get('file')}: parser verdict {parser.get('verdict')!r}")
        if parser.get("verdict") == "refused" and not parser.get("message"):
            out.append(f"{name}: {config.get('file')}: a refusal keeps the parser's message")
    for group, kinds in (("problems", PROBLEM_KINDS), ("false", FALSE_KINDS)):
        for label in labels.get(group) or []:
            where = f"{name}: {group} {label.get('file')} {label.get('kind')}"
            if label.get("kind") not in kinds:
                out.append(f"{where}: kind not in {kinds}")
            # "*": every file of the set (score.matches reads it so)
            if label.get("file") != "*" and not (files / str(label.get("file"))).is_file():
                out.append(f"{where}: file does not exist")
            if not label.get("why") or not label.get("evidence"):
                out.append(f"{where}: needs why and evidence")
            if not isinstance(label.get("keys", []), list):
                out.append(f"{where}: keys is a list")
    return out
