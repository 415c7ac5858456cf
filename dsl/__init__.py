"""The rule language front end: text, then AST, then a checked KnowledgeBase.

The language knows nothing of the catalogs, nor of any layer above: the KB with
its catalogs is `kbsolve.catalog.load_kb`."""

from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.dsl.load import kb_roots


def __getattr__(name: str):
    if name == "parse_module":  # lazy: importing lark costs time a cache hit can skip
        from kbsolve.dsl.parse import parse_module
        return parse_module
    raise AttributeError(name)


__all__ = ["KnowledgeBase", "kb_roots", "parse_module"]
