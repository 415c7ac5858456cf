"""Pydantic models for catalog entries and query facts.

Catalog entries reject unknown keys and wrong types (strict mode: no "80"
for 80); every entry names its `source`. `fact_field_type` tells the rule
checker which `gpu.*`, `model.*`, `network.*` and `query.*` facts exist.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo,
                      field_validator, model_validator)

from kbsolve.diagnostics import Span


class CatalogEntry(BaseModel):
    """Common base: name, aliases, source, and where the entry was defined."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1)
    aliases: list[Annotated[str, Field(min_length=1)]] = []
    source: str = Field(min_length=1)
    notes: str = ""

    _span: Optional[Span] = PrivateAttr(default=None)
    _field_spans: dict = PrivateAttr(default_factory=dict)
    _override: str = PrivateAttr(default="")

    @property
    def span(self) -> Span | None:
        """Where the entry starts in its YAML file (None if built in code)."""
        return self._span

    @property
    def override_reason(self) -> str:
        """The `override:` reason when this entry replaced an earlier one."""
        return self._override

    def field_span(self, field: str) -> Span | None:
        """Where `field` was written, else the entry's span."""
        return self._field_spans.get(field, self._span)

    @field_validator("source")
    @classmethod
    def _source_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("source must not be blank")
        return v


class GpuSpec(CatalogEntry):
    alias_note: str = ""
    vendor: Literal["nvidia", "amd", "huawei"]
    arch: Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "davinci"]
    compute_capability: Optional[float] = Field(default=None, gt=0)
    memory_gib: float = Field(gt=0)
    bf16_tflops: float = Field(ge=0)  # dense, no sparsity
    fp16_tflops: float = Field(ge=0)
    fp32_tflops: float = Field(ge=0)
    fp8_tflops: float = Field(default=0, ge=0)
    hbm_gbps: float = Field(gt=0)  # memory bandwidth, GB/s
    link: Literal["nvlink", "pcie", "hccs", "xgmi"]
    link_gbps: float = Field(gt=0)  # per GPU, intra-node, one direction, GB/s
    nvlink_gen: Optional[int] = Field(default=None, ge=1)
    pcie_gen: int = Field(ge=1)
    bf16: bool
    fp8: bool
    fa2: bool
    fa3: bool

    @field_validator("bf16", "fp8")
    @classmethod
    def _flag_matches_tflops(cls, v: bool, info: ValidationInfo) -> bool:
        tflops = info.data.get(f"{info.field_name}_tflops")
        if tflops is None:
            return v
        if v and tflops == 0:
            raise ValueError(f"{info.field_name} is true but {info.field_name}_tflops is 0")
        if not v and tflops > 0:
            raise ValueError(f"{info.field_name} is false but {info.field_name}_tflops is {tflops:g}")
        return v


LLM_FIELDS = ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "head_dim",
              "tied_embeddings", "experts", "experts_active", "moe_intermediate",
              "shared_experts", "max_positions")
LLM_REQUIRED = ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "max_positions")
DIFFUSION_FIELDS = ("denoiser_params_b", "denoiser_blocks", "denoiser_experts", "denoiser_hidden",
                    "denoiser_heads", "text_encoder_params_b", "text_encoders", "vae_params_b",
                    "latent_channels", "vae_spatial", "vae_temporal", "patch_size", "patch_t",
                    "cfg_doubles")
DIFFUSION_REQUIRED = ("denoiser_params_b", "denoiser_blocks", "denoiser_hidden", "denoiser_heads",
                      "text_encoder_params_b", "text_encoders", "vae_params_b", "latent_channels",
                      "vae_spatial", "patch_size", "cfg_doubles")

_Pos = Field(default=None, gt=0)


class ModelSpec(CatalogEntry):
    kind: Literal["llm", "diffusion", "video"]
    family: str = Field(min_length=1)
    model_type: str = Field(min_length=1)
    hf_id: Optional[str] = None  # Hugging Face repo id, written as the checkpoint to load
    mlp: Literal["swiglu", "gelu"] = "swiglu"  # gated (3 matrices) or plain (2 matrices) MLP
    params_b: float = Field(gt=0)  # total parameters, billions
    # LLM shape
    layers: Optional[int] = _Pos
    hidden: Optional[int] = _Pos
    heads: Optional[int] = _Pos
    kv_heads: Optional[int] = _Pos
    intermediate: Optional[int] = _Pos
    vocab: Optional[int] = _Pos
    head_dim: Optional[int] = _Pos
    tied_embeddings: bool = False
    experts: int = Field(default=1, ge=1)
    experts_active: int = Field(default=1, ge=1)
    moe_intermediate: Optional[int] = _Pos
    shared_experts: int = Field(default=0, ge=0)
    max_positions: Optional[int] = _Pos
    # diffusion / video shape
    denoiser_params_b: Optional[float] = _Pos
    denoiser_blocks: Optional[int] = _Pos
    denoiser_experts: int = Field(default=1, ge=1)
    denoiser_hidden: Optional[int] = _Pos
    denoiser_heads: Optional[int] = _Pos
    text_encoder_params_b: Optional[float] = Field(default=None, ge=0)
    text_encoders: Optional[list[str]] = None
    vae_params_b: Optional[float] = _Pos
    latent_channels: Optional[int] = _Pos
    vae_spatial: Optional[int] = _Pos
    vae_temporal: int = Field(default=1, ge=1)
    patch_size: Optional[int] = _Pos
    patch_t: int = Field(default=1, ge=1)
    cfg_doubles: Optional[bool] = None

    @field_validator(*LLM_FIELDS, *DIFFUSION_FIELDS)
    @classmethod
    def _fits_kind(cls, v, info: ValidationInfo):
        kind = info.data.get("kind")
        own = LLM_FIELDS if kind == "llm" else DIFFUSION_FIELDS
        if kind is not None and info.field_name not in own:
            raise ValueError(f"field '{info.field_name}' does not apply to kind '{kind}'")
        return v

    @field_validator("kv_heads")
    @classmethod
    def _kv_heads(cls, v, info: ValidationInfo):
        heads = info.data.get("heads")
        if v is not None and heads is not None:
            if v > heads:
                raise ValueError(f"kv_heads ({v}) must not exceed heads ({heads})")
            if heads % v:
                raise ValueError(f"heads ({heads}) must be divisible by kv_heads ({v})")
        return v

    @field_validator("experts_active")
    @classmethod
    def _experts_active(cls, v, info: ValidationInfo):
        experts = info.data.get("experts")
        if experts is not None and v > experts:
            raise ValueError(f"experts_active ({v}) must not exceed experts ({experts})")
        return v

    @model_validator(mode="after")
    def _complete(self) -> "ModelSpec":
        required = LLM_REQUIRED if self.kind == "llm" else DIFFUSION_REQUIRED
        missing = [f for f in required if getattr(self, f) is None]
        if missing:
            raise ValueError(f"model '{self.name}' (kind '{self.kind}') is missing required "
                             f"{missing_list(missing)}")
        if self.kind == "llm" and self.head_dim is None:
            self.head_dim = self.hidden // self.heads
        return self


def missing_list(fields: list[str]) -> str:
    """"field 'a'" or "fields: 'a', 'b'", for missing-field messages."""
    if len(fields) == 1:
        return f"field '{fields[0]}'"
    return "fields: " + ", ".join(f"'{f}'" for f in fields)


class NetworkSpec(CatalogEntry):
    kind: Literal["infiniband", "roce", "ethernet"]
    gbps: float = Field(gt=0)  # per node, Gbit/s


class QueryFacts(BaseModel):
    """Facts that come from the user's query rather than from YAML."""

    model_config = ConfigDict(extra="forbid")

    num_gpus: int = Field(default=1, ge=1)
    nodes: int = Field(default=1, ge=1)
    gpus_per_node: int = Field(default=1, ge=1)
    seq_len: int = Field(default=2048, ge=1)
    height: int = Field(default=512, ge=1)
    width: int = Field(default=512, ge=1)
    frames: int = Field(default=1, ge=1)
    headroom_pct: int = Field(default=10, ge=0, lt=100)


FACT_SCHEMAS: dict[str, type[BaseModel]] = {
    "gpu": GpuSpec, "model": ModelSpec, "network": NetworkSpec, "query": QueryFacts,
}

# Bookkeeping fields that are never facts.
_NOT_FACTS = frozenset({"name", "aliases", "alias_note", "source", "notes", "text_encoders"})

FactType = typing.Union[str, tuple]


def fact_field_type(prefix: str, field: str) -> FactType | None:
    """'bool' | 'int' | 'num' | 'str' | ('enum', values), or None if no such fact."""
    schema = FACT_SCHEMAS.get(prefix)
    if schema is None or field in _NOT_FACTS or field not in schema.model_fields:
        return None
    return _kind_of(schema.model_fields[field].annotation)


def fact_fields(prefix: str) -> list[str]:
    """The usable fact fields of `prefix`, in declaration order."""
    schema = FACT_SCHEMAS.get(prefix)
    if schema is None:
        return []
    return [f for f in schema.model_fields if fact_field_type(prefix, f) is not None]


def _kind_of(annotation) -> FactType | None:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # Optional[X] -> X
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _kind_of(args[0]) if len(args) == 1 else None
    if origin is Literal:
        return ("enum", tuple(typing.get_args(annotation)))
    return {bool: "bool", int: "int", float: "num", str: "str"}.get(annotation)
