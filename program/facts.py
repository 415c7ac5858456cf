"""Facts for one query: catalog entries and workload, in the KB's base units."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl.kb import KnowledgeBase

_GPUS = re.compile(r"^(?:(\d+)x)?(?:(\d+)x)?([\w][\w.\-]*)$")


def parse_gpus(text: str) -> tuple[int, int, str]:
    """`COUNTxNAME` -> (1, COUNT, NAME); `NODESxCOUNTxNAME` -> (NODES, COUNT, NAME); a bare NAME is one GPU."""
    match = _GPUS.match(text.strip())
    if not match:
        raise KbError(Diagnostic(f"--gpus '{text}' is not COUNTxGPU or NODESxCOUNTxGPU "
                                 f"(for example 8xA100 or 2x8xH100)"))
    first, second, name = match.groups()
    if first is None and re.match(r"^\d+x?$", name):
        raise KbError(Diagnostic(f"--gpus '{text}' names no GPU type (for example 8xA100)"))
    nodes, per_node = (int(first), int(second)) if second else (1, int(first or 1))
    if nodes < 1 or per_node < 1:
        raise KbError(Diagnostic(f"--gpus '{text}': the GPU count must be at least 1"))
    if nodes * per_node > 65536:
        raise KbError(Diagnostic(f"--gpus '{text}': more GPUs than kbsolve plans for"))
    return nodes, per_node, name


def collect_facts(kb: KnowledgeBase, gpu, model, query: dict[str, Any],
                  network=None) -> dict[str, Any]:
    sources = {"gpu": gpu, "model": model, "network": network}
    facts: dict[str, Any] = {}
    for path, fact in kb.facts.items():
        prefix, field = path.split(".", 1)
        if prefix == "query":
            raw = query.get(field)
        else:
            entry = sources.get(prefix)
            raw = getattr(entry, field, None) if entry is not None else None
        if raw is None:
            continue
        if fact.type.kind == "num":
            raw = Fraction(raw) * fact.scale if not isinstance(raw, bool) else raw
        facts[path] = raw
    return facts
