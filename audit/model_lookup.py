"""The model a config trains: --model, else a local folder the config names that
holds a Hugging Face config.json, else the first string value that names a
catalog model (a Hugging Face id, its last part, or that part without trailing
tags). Unknown: None, said once in the report, and nothing judged on a guess."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbsolve.diagnostics import KbError

MAX_VALUE_CHARS = 400  # longer strings are no path or model name


def model_for(kb, values: dict[str, Any], folders: list[Path],
              forced=None) -> tuple[Any, str]:
    """(model entry or None, where it came from: '--model', 'PATH/config.json',
    'catalog', or why it is unknown)."""
    if forced is not None:
        return forced, "--model"
    problems: list[str] = []
    for value in values.values():
        found = _local(kb, value, folders, problems)
        if found is not None:
            return found
    model = find_model(kb, values)
    if model is not None:
        return model, "catalog"
    return None, "; ".join(problems) or "no value of the config names a catalog model or a " \
                                        "folder with a config.json"


def _local(kb, value, folders: list[Path], problems: list[str]) -> tuple[Any, str] | None:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_VALUE_CHARS or "\n" in value:
        return None
    from kbsolve.catalog import model_from_hf_config
    try:
        given = Path(value).expanduser()
    except (RuntimeError, KeyError):  # '~user' of no such user: not a local folder
        return None
    for folder in ([Path()] if given.is_absolute() else folders):
        config = folder / given / "config.json"
        try:
            if not config.is_file():
                continue
        except OSError:
            continue
        try:
            return model_from_hf_config(config, vocabulary=kb.vocabulary,
                                        table=kb.catalog.hf), str(config)
        except KbError as error:
            problems.append(f"{config}: {error.diagnostics[0].message}")
            return None
    return None


def find_model(kb, values: dict[str, Any]):
    for value in values.values():
        if not isinstance(value, str) or not 3 <= len(value) <= 200:
            continue
        for name in _names(value):
            found = kb.catalog.find("model", name)  # no suggestions: this is a search
            if found is not None:
                return found
    return None


def _names(value: str) -> list[str]:
    base = value.rstrip("/").rsplit("/", 1)[-1]
    names = [value, base]
    parts = base.split("-")
    names += ["-".join(parts[:i]) for i in range(len(parts) - 1, 1, -1)]
    return [n for n in names if len(n) >= 3]


def model_folders(unit, root) -> list[Path]:
    """Where a relative model path is looked up: the launch's directory (when
    known), the project root, the config's folder."""
    folders = [Path(d) for d in getattr(unit.launch, "directories", ())]
    if root is not None:
        folders += [Path(root), Path(root) / Path(unit.rel).parent]
    return list(dict.fromkeys(folders))
