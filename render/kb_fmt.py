"""`kbsolve kb fmt [--check]`: the files that were (or would be) laid out anew."""

from __future__ import annotations


def changed(paths: list[str], check_only: bool = False) -> str:
    verb = "would reformat" if check_only else "reformatted"
    lines = [f"{verb} {path}" for path in paths]
    lines.append(f"kb fmt: {len(paths)} file(s) {verb}" if paths else
                 "kb fmt: every file is canonical")
    return "\n".join(lines)
