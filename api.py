"""The Python API, and the only door the CLI uses.

    load_kb(paths=None) -> KnowledgeBase
    listing(kb, what, framework=None) -> list[dict]
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import KnowledgeBase
from kbsolve.dsl import load_kb as _load_kb


def load_kb(paths: list[str] | None = None, *, use_cache: bool = True) -> KnowledgeBase:
    """The shipped KB plus rule packs, checked; raises KbError with every problem."""
    return _load_kb(paths, use_cache=use_cache)


def kb_summary(kb: KnowledgeBase) -> dict[str, int]:
    catalog = kb.catalog
    return {
        "frameworks": len(kb.frameworks), "options": len(kb.options), "rules": len(kb.rules),
        "warnings": len(kb.warnings), "checks": len(kb.checks), "tests": len(kb.tests),
        "GPUs": len(catalog.gpus) if catalog else 0,
        "models": len(catalog.models) if catalog else 0,
    }


def listing(kb: KnowledgeBase, what: str, framework: str | None = None) -> list[dict]:
    if framework is not None and framework not in kb.frameworks:
        from kbsolve.diagnostics import did_you_mean
        raise KbError(Diagnostic(f"unknown framework '{framework}' (--framework)"
                                 f"{did_you_mean(framework, kb.frameworks)}"))
    if what in ("gpus", "models"):
        table = kb.catalog.gpus if what == "gpus" else kb.catalog.models
        return [_jsonable(entry.model_dump(exclude_none=True)) for entry in table.values()]
    builders = {"options": (kb.options, _option_row), "rules": (kb.rules, _rule_row),
                "checks": (kb.checks, _check_row)}
    table, build = builders[what]
    return [build(item) for item in table.values()
            if framework is None or item.framework == framework]


def _option_row(o) -> dict:
    return {"framework": o.framework, "name": o.name, "type": str(o.type),
            "domain": _jsonable(list(o.domain)) if o.domain is not None else None,
            "default": _jsonable(o.default),
            "emit": [f"{e.target}:{e.key}" for e in o.emits], "origin": o.origin,
            "aliases": [a.old for a in o.aliases], "doc": o.meta.doc,
            "source": o.meta.source, "location": str(o.meta.span)}


def _rule_row(r) -> dict:
    return {"framework": r.framework, "id": r.id, "kind": r.kind, "because": r.meta.because,
            "source": r.meta.source, "versions": r.meta.versions,
            "location": str(r.meta.span)}


def _check_row(c) -> dict:
    return {"framework": c.framework, "id": c.id, "category": c.category,
            "title_en": c.title_en, "title_zh": c.title_zh, "points": c.points,
            "priority": c.priority, "group": c.group, "judges": list(c.judges),
            "source": c.meta.source, "location": str(c.meta.span)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
