"""Pydantic models for catalog entries and query facts, built from the vocabulary.

The fields, their types, units, bounds and defaults, and the value sets of
`vendor`, `arch`, `link`, `kind`, ... are declared in the KB
(kb/core/vocabulary.kb, extended by rule packs); dsl/vocab.py holds them,
and this module turns them into pydantic models, lazily: importing it builds
nothing and imports no pydantic. Catalog entries reject unknown keys and wrong
types (strict mode: no "80" for 80); every entry names its `source`.

    model_class("gpu", kb.vocabulary)   the class that validates a GPU entry
    query_facts({...}, vocabulary)      the query facts with the KB's defaults
    fact_field_type("gpu", "arch")      what the rule checker may read

`GpuSpec`, `ModelSpec`, `NetworkSpec`, `QueryFacts`, `CatalogEntry` and
`FACT_SCHEMAS` are the models of the shipped vocabulary, built on first use.
"""

from __future__ import annotations

import typing
from typing import Any

from kbsolve.dsl.vocab import BOOKKEEPING, SOURCES, Vocabulary, shipped

_NOT_FACTS = frozenset(BOOKKEEPING)  # bookkeeping fields are never facts

FactType = typing.Union[str, tuple]


def model_class(group: str, vocabulary: Vocabulary | None = None) -> type:
    """The pydantic class of one group's entries (`gpu`, `model`, `network`, `query`)."""
    from kbsolve.catalog._models import class_for
    vocab = vocabulary if vocabulary is not None else shipped()
    return class_for((group, vocab.signature(group)))


def catalog_models(vocabulary: Vocabulary | None = None) -> dict[str, type]:
    """The classes of the catalog groups (all but the query)."""
    return {group: model_class(group, vocabulary) for group in SOURCES if group != "query"}


def query_facts(values: dict[str, Any], vocabulary: Vocabulary | None = None) -> dict[str, Any]:
    """The query facts: `values` validated, every other query field at its default."""
    return model_class("query", vocabulary)(**values).model_dump()


def fact_field_type(prefix: str, field: str,
                    vocabulary: Vocabulary | None = None) -> FactType | None:
    """'bool' | 'int' | 'num' | 'str' | ('enum', values), or None if no such fact."""
    vocab = vocabulary if vocabulary is not None else shipped()
    found = vocab.field(prefix, field)
    if found is None or field in _NOT_FACTS:
        return None
    return found.fact_type


def fact_fields(prefix: str, vocabulary: Vocabulary | None = None) -> list[str]:
    """The usable fact fields of `prefix`, in declaration order."""
    return (vocabulary if vocabulary is not None else shipped()).fact_fields(prefix)


def missing_list(fields: list[str]) -> str:
    """"field 'a'" or "fields: 'a', 'b'", for missing-field messages."""
    if len(fields) == 1:
        return f"field '{fields[0]}'"
    return "fields: " + ", ".join(f"'{f}'" for f in fields)


_SHIPPED = {"GpuSpec": "gpu", "ModelSpec": "model", "NetworkSpec": "network",
            "QueryFacts": "query"}


def __getattr__(name: str):
    """The shipped vocabulary's models, built when first asked for."""
    if name in _SHIPPED:
        return model_class(_SHIPPED[name])
    if name == "CatalogEntry":
        from kbsolve.catalog._models import CatalogEntry
        return CatalogEntry
    if name == "FACT_SCHEMAS":
        return {group: model_class(group) for group in SOURCES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
