"""Why a proposed or written change hurts: it changes the recipe, writes a path that
does not exist where the run starts, raises the memory of a config that OOMs, or
makes the framework's own parser refuse a config it accepted."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.audit_real.labels import CORPUS


def recipe_keys() -> dict[str, list[str]]:
    """framework -> the keys that make the recipe (scoring.yaml, with sources)."""
    data = yaml.safe_load((CORPUS / "scoring.yaml").read_text(encoding="utf-8"))
    return {fw: entry["keys"] for fw, entry in data["recipe_keys"].items()}


def looks_like_path(value) -> bool:
    return isinstance(value, str) and ("/" in value or value.endswith((".json", ".yaml", ".yml")))


def change_harm(change: dict, framework: str, root: Path, launch_dir: str,
                recipe: dict[str, list[str]]) -> str:
    """A path the fix writes as a new file beside the config (`new_file`) exists then."""
    key, new = change["key"], change.get("new")
    if key in recipe.get(framework, []):
        return f"changes the recipe: {key} {change.get('old')!r} -> {new!r}"
    if not change.get("removed") and looks_like_path(new) and not change.get("new_file") and \
            not (root / launch_dir / str(new)).exists() and not Path(str(new)).is_absolute():
        return f"writes {key}: {new}, a path that does not exist from {launch_dir or '.'}"
    return ""
