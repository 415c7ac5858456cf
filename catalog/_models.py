"""The pydantic classes behind catalog/schema.py. Imported only when a model is
first needed (catalog/schema.py imports nothing of this at its own import).

A class is built per group from the vocabulary's signature of that group and
cached, so equal vocabularies share classes (entries compare equal) and a
pickled entry finds its class again: it pickles as (signature, state).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, create_model,
                      field_validator, model_validator)

from kbsolve.catalog.schema import missing_list
from kbsolve.diagnostics import Span

CLASS_NAMES = {"gpu": "GpuSpec", "model": "ModelSpec", "network": "NetworkSpec",
               "query": "QueryFacts"}
LABELS = {"gpu": "GPU", "model": "model", "network": "network"}

_CLASSES: dict[tuple, type] = {}
_KEYS: dict[type, tuple] = {}


class CatalogEntry(BaseModel):
    """Common base: name, aliases, source, and where the entry was defined."""

    # defer_build: a class's validator and serializer are built when first used, not when
    # the class is: unpickling the cached KB rebuilds the classes of its entries and sets
    # their state without validating (about 15 ms of a cold plan)
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

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

    def __reduce__(self):
        return _rebuild, (_KEYS[type(self)], self.__getstate__())


class _QueryBase(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    def __reduce__(self):
        return _rebuild, (_KEYS[type(self)], self.__getstate__())


def parts(entry) -> tuple[tuple, dict] | None:
    """(class key, state) of an entry of a built class, as its pickle holds them; None for
    any other object."""
    key = _KEYS.get(type(entry))
    return None if key is None else (key, entry.__getstate__())


def rebuilt(key: tuple, state: dict):
    """The entry parts() took apart."""
    return _rebuild(key, state)


def _rebuild(key: tuple, state: dict):
    cls = class_for(key)
    obj = cls.__new__(cls)
    obj.__setstate__(state)
    return obj


def class_for(key: tuple) -> type:
    """key: (group, the vocabulary's signature of the group)."""
    cls = _CLASSES.get(key)
    if cls is None:
        cls = _build(*key)
        _CLASSES[key] = cls
        _KEYS[cls] = key
    return cls


def built() -> int:
    """How many classes exist (for the test that importing builds none)."""
    return len(_CLASSES)


# ---- building a class ----------------------------------------------------------

_PY = {"bool": bool, "int": int, "num": float, "str": str}


def _number(kind: str, text: str):
    value = Fraction(text)
    return int(value) if kind == "int" and value.denominator == 1 else float(value)


def _build(group: str, signature: tuple) -> type:
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    when_fields = []  # (name, when) of fields that apply to some entries only
    required_when = []  # of those, the ones an entry they apply to must give
    for name, kind, values, _unit, has_default, default, optional, bounds, when in signature:
        if kind == "enum":
            annotation: Any = Literal[values]  # type: ignore[valid-type]
        elif kind == "list":
            annotation = list[str]
        else:
            annotation = _PY[kind]
        constraints = {op: _number(kind, text) for op, text in bounds}
        absent_ok = optional or (when is not None and not has_default)
        if kind == "str" and not (has_default or absent_ok):
            constraints["min_length"] = 1
        # a bare default where no constraint applies: pydantic copies a FieldInfo given
        # as the default (~20 us a field, 94 fields in a plan's three classes: issue 25)
        if has_default:
            fields[name] = (annotation, Field(default=default, **constraints)
                            if constraints else default)
        elif absent_ok:
            fields[name] = (Optional[annotation], Field(default=None, **constraints)
                            if constraints else None)
        else:
            fields[name] = (annotation, Field(**constraints) if constraints else ...)
        if when is not None:
            when_fields.append((name, when))
            if not (has_default or optional):
                required_when.append((name, when))
    if group == "gpu":
        fields = {"alias_note": (str, ""), **fields}
    if when_fields:  # one validator for them all: pydantic inspects each validator's
        # signature as a class is built, ~0.1 ms apiece, and the cached KB's model class has
        # ~60 such fields (issue 25); it runs per field, as one per field did
        validators["_applies"] = field_validator(*(n for n, _ in when_fields))(
            _applies(dict(when_fields)))
    names = {entry[0] for entry in signature}
    for check, needs in _CONSISTENCY.get(group, ()):
        if needs <= names:
            validators[check.__name__] = check
    validators["_complete"] = model_validator(mode="after")(
        _complete(LABELS.get(group, group), tuple(required_when), names))
    if group == "query":
        return create_model(CLASS_NAMES[group], __base__=_QueryBase, __module__=__name__,
                            __validators__=validators, **fields)
    return create_model(CLASS_NAMES.get(group, group.title() + "Spec"), __base__=CatalogEntry,
                        __module__=__name__, __validators__=validators, **fields)


def _holds(when: tuple, value) -> bool:
    _field, values, negated = when
    return (value in values) != negated


def _applies(whens: dict[str, tuple]):
    def check(cls, v, info: ValidationInfo):
        when = whens[info.field_name]
        value = info.data.get(when[0])
        if value is not None and not _holds(when, value):
            raise ValueError(f"field '{info.field_name}' does not apply to {when[0]} '{value}'")
        return v
    return check


def _complete(label: str, required_when: tuple, names: set[str]):
    def complete(self):
        missing = [name for name, when in required_when
                   if _holds(when, getattr(self, when[0])) and getattr(self, name) is None]
        if missing:
            when = dict(required_when)[missing[0]][0]
            raise ValueError(f"{label} '{self.name}' ({when} '{getattr(self, when)}') is missing "
                             f"required {missing_list(missing)}")
        # a derived default: the attention head size (HF's head_dim = hidden // heads)
        if {"head_dim", "hidden", "heads"} <= names and self.head_dim is None \
                and self.hidden is not None and self.heads:
            self.head_dim = self.hidden // self.heads
        return self
    return complete


# ---- consistency between fields (attached when the vocabulary has the fields) ----


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


_CONSISTENCY: dict[str, tuple] = {
    "gpu": ((_flag_matches_tflops, {"bf16", "bf16_tflops", "fp8", "fp8_tflops"}),),
    "model": ((_kv_heads, {"kv_heads", "heads"}), (_experts_active, {"experts_active", "experts"})),
}

