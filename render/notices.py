"""One-line notices on stderr: the files `--emit` and `audit --fix` wrote."""

from __future__ import annotations


def emitted(result) -> str:
    """--emit: the files written (a list, or an emit's result with the earlier emit's
    files the plan no longer has)."""
    removed = getattr(result, "removed", [])
    text = "\nWrote: " + ", ".join(getattr(result, "written", result))
    return text + ("\nRemoved (an earlier --emit's, not in this plan): " +
                   ", ".join(removed) if removed else "")


def written(written: dict) -> str:
    """{config: Written}: the keys written and the backup that holds the original."""
    return "\n".join(f"wrote {config} ({', '.join(done.keys)}); the original is "
                     f"{_beside(config, done.backup)}"
                     + "".join(f"; new file {_beside(config, name)}" for name in done.created)
                     for config, done in written.items())


def _beside(config: str, backup: str) -> str:
    folder = config.rsplit("/", 1)[0] + "/" if "/" in config else ""
    return folder + backup
