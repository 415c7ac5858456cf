"""The grammar text, read from the installed package (no lark import here)."""

import functools
from importlib import resources


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    return resources.files("kbsolve").joinpath("grammar.lark").read_text(encoding="utf-8")
