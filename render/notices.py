"""One-line notices on stderr: the files `--emit` and `audit --fix` wrote."""

from __future__ import annotations


def emitted(result) -> str:
    """--emit: the files written (a list, or an emit's result with the earlier emit's
    files the plan no longer has)."""
    removed = getattr(result, "removed", [])
    text = "\nWrote: " + ", ".join(getattr(result, "written", result))
    return text + ("\nRemoved (an earlier --emit's, not in this plan): " +
                   ", ".join(removed) if removed else "")


def written(written: dict[str, list[str]]) -> str:
    return "\n".join(f"wrote {config} ({', '.join(keys)}); the original is {config}.bak"
                     for config, keys in written.items())
