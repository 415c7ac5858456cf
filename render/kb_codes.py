"""docs/dsl.md's table of diagnostic codes, from the registry (`kbsolve kb codes`)."""

from __future__ import annotations


def markdown(codes: list[dict]) -> str:
    """One row per code under its group's heading, in the registry's order."""
    out = ["| Code | Severity | Meaning | Example message |", "|---|---|---|---|"]
    group = None
    for code in codes:
        if code["group"] != group:
            group = code["group"]
            out.append(f"| **{group}** | | | |")
        out.append(f"| `{code['name']}` | {code['severity']} | {_cell(code['meaning'])} | "
                   f"{_cell(code['example'])} |")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("\\|", "|").replace("|", "\\|").replace("\n", " ")
