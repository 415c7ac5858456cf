"""The catalog layer: hardware and model facts from YAML, validated by pydantic."""

from kbsolve.catalog.load import (KINDS, Catalog, Override, hf_param_count, load_catalog,
                                  model_from_hf_config)
from kbsolve.catalog.schema import (FACT_SCHEMAS, CatalogEntry, GpuSpec, ModelSpec, NetworkSpec,
                                    QueryFacts, fact_field_type, fact_fields)
from kbsolve.catalog.yamlpos import MAX_BYTES, MAX_NODES, load_yaml, read_text

__all__ = [
    "KINDS", "Catalog", "Override", "hf_param_count", "load_catalog", "model_from_hf_config",
    "FACT_SCHEMAS", "CatalogEntry", "GpuSpec", "ModelSpec", "NetworkSpec", "QueryFacts",
    "fact_field_type", "fact_fields", "MAX_BYTES", "MAX_NODES", "load_yaml", "read_text",
]
