"""One-line notices on stderr: the files `--emit` and `audit --fix` wrote."""

from __future__ import annotations


def emitted(paths: list[str]) -> str:
    return "\nWrote: " + ", ".join(paths)


def written(written: dict) -> str:
    """{config: Written}: the keys written and the backup that holds the original."""
    return "\n".join(f"wrote {config} ({', '.join(done.keys)}); the original is "
                     f"{_beside(config, done.backup)}"
                     + "".join(f"; new file {_beside(config, name)}" for name in done.created)
                     for config, done in written.items())


def _beside(config: str, backup: str) -> str:
    folder = config.rsplit("/", 1)[0] + "/" if "/" in config else ""
    return folder + backup
