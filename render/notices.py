"""One-line notices on stderr: the files `--emit` and `audit --fix` wrote."""

from __future__ import annotations


def emitted(paths: list[str]) -> str:
    return "\nWrote: " + ", ".join(paths)


def written(written: dict[str, list[str]]) -> str:
    return "\n".join(f"wrote {config} ({', '.join(keys)}); the original is {config}.bak"
                     for config, keys in written.items())
