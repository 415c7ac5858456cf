"""The rule language front end: text, then AST, then a checked KnowledgeBase."""

from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.dsl.load import check_paths, kb_roots, load_kb


def __getattr__(name: str):
    if name == "parse_module":  # lazy: importing lark costs time a cache hit can skip
        from kbsolve.dsl.parse import parse_module
        return parse_module
    raise AttributeError(name)


__all__ = ["KnowledgeBase", "check_paths", "kb_roots", "load_kb", "parse_module"]
