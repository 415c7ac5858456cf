"""The catalog layer: hardware and model facts from YAML, validated by pydantic
against the vocabulary the rules declare; `load_kb` gives the checked KB (the
rules with their catalogs) every layer above reads.

The pydantic models are built from the KB's vocabulary when first needed, so
the model names below are looked up lazily.
"""

from kbsolve.catalog.hf import HfTable, hf_param_count, model_from_hf_config, shipped_table
from kbsolve.catalog.knowledge import check_paths, load_kb
from kbsolve.catalog.load import KINDS, Catalog, Override, load_catalog
from kbsolve.catalog.schema import (fact_field_type, fact_fields, model_class, query_facts)
from kbsolve.catalog.yamlpos import MAX_BYTES, MAX_NODES, load_yaml, read_text

_LAZY = ("FACT_SCHEMAS", "CatalogEntry", "GpuSpec", "ModelSpec", "NetworkSpec", "QueryFacts")


def __getattr__(name: str):
    if name in _LAZY:
        from kbsolve.catalog import schema
        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "KINDS", "Catalog", "Override", "HfTable", "check_paths", "hf_param_count", "load_catalog",
    "load_kb",
    "model_from_hf_config", "shipped_table",
    "FACT_SCHEMAS", "CatalogEntry", "GpuSpec", "ModelSpec", "NetworkSpec", "QueryFacts",
    "fact_field_type", "fact_fields", "model_class", "query_facts", "MAX_BYTES", "MAX_NODES",
    "load_yaml", "read_text",
]
