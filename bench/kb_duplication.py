"""The language's size and the KB's duplication (issue 25, item 7: the second edition).

    python -m bench.kb_duplication [KB_DIR [GRAMMAR]]   # default: the shipped KB, grammar.lark

Prints the declaration kinds, clauses and keywords of the grammar, and the pairs of
lint/duplicates.py: declarations of two frameworks identical up to the framework's
name, and `fact` declarations beside a field of the same name. Run it on an older
checkout's kb/ and grammar.lark for the figures before a change.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path


def language(grammar: str) -> dict[str, int]:
    from lark import Lark
    parser = Lark(grammar, parser="lalr", lexer="basic")
    words = {t.pattern.value for t in parser.terminals
             if t.pattern.type == "str" and t.pattern.value.isidentifier()}
    return {"declaration kinds": len(re.findall(r"^(\w+)_decl:", grammar, re.M)),
            "clauses": len(set(re.findall(r"-> (c_\w+)", grammar))),
            "keywords": len(words)}


def measure(kb_dir: Path, grammar: str) -> dict:
    from kbsolve.dsl.parse import parse_module
    from kbsolve.lint.duplicates import fact_field_pairs, identical_pairs
    modules = [parse_module(p.read_text(encoding="utf-8"), str(p))
               for p in sorted(kb_dir.rglob("*.kb"))]
    identical, facts = identical_pairs(modules), fact_field_pairs(modules)
    return {**language(grammar), "identical pairs": len(identical),
            "identical pairs by kind": dict(sorted(Counter(p.kind for p in identical).items())),
            "fact/field pairs": len(facts), "pairs": len(identical) + len(facts)}


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    kb_dir = Path(argv[0]) if argv else root / "kb"
    grammar = Path(argv[1] if len(argv) > 1 else root / "grammar.lark").read_text("utf-8")
    for key, value in measure(kb_dir, grammar).items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
