"""The grammar text, read from the installed package (no lark import here)."""

import functools


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    from kbsolve.dsl.load import package_root
    return (package_root() / "grammar.lark").read_text(encoding="utf-8")
