"""The grammar text, read from the installed package (no lark import here)."""

import functools
from pathlib import Path


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    # beside the package's modules (importlib.resources is not imported for it: see
    # dsl/load.py shipped_root)
    return (Path(__file__).parent.parent / "grammar.lark").read_text(encoding="utf-8")
