"""The distinct situations a framework's rules can meet: GPU x model x query,
grouped by what the rules actually see.

A GPU or model matters to a set of formulas only through the values of their
fact-only parts (`gpu.fa3`, `model.family == "wan"`, `query.num_gpus > 1`).
Every catalog GPU, model and a few query shapes are combined, each combination
is summarised by the values of those parts, and one combination per distinct
summary is kept: usually a few dozen instead of thousands.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from kbsolve import roles
from kbsolve.catalog.schema import query_facts
from kbsolve.diagnostics import KbError
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.facts import collect_facts
from kbsolve.program.program import reads


@dataclass
class Situation:
    gpus: list[str]
    models: list[str]
    query: dict[str, Any]
    facts: dict[str, Any]
    networks: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        gpus = self.gpus[0] + (f" (+{len(self.gpus) - 1} alike)" if len(self.gpus) > 1 else "")
        models = self.models[0] + (f" (+{len(self.models) - 1} alike)"
                                   if len(self.models) > 1 else "")
        nodes, per = self.query.get("nodes", 1), self.query.get("gpus_per_node", 1)
        return f"{nodes}x{per}x{gpus} with {models}"


class _Reader:
    """Which facts and fact-only parts a set of formulas reads (lets followed)."""

    def __init__(self, kb: KnowledgeBase):
        self.kb = kb
        self.facts: set[str] = set()
        self.parts: dict[int, ir.Node] = {}

    def depends_on_options(self, node: ir.Node) -> bool:
        """Whether `node` reads an option or a memory sum, directly or through lets."""
        found = reads(self.kb, node)
        return bool(found.options or found.sums)

    def read(self, node: ir.Node, seen: set[str] | None = None) -> None:
        seen = set() if seen is None else seen
        if not self.depends_on_options(node):
            if not isinstance(node, ir.Const):
                self.parts[id(node)] = node
            self.facts |= reads(self.kb, node).facts
            return
        if isinstance(node, ir.LetRef) and node.let not in seen:
            seen.add(node.let)
            self.read(self.kb.lets[node.let].expr, seen)
        elif isinstance(node, ir.MemorySum):
            for term in self.kb.memory.values():
                if term.framework == node.framework and term.level == node.level:
                    self.read(term.expr, seen)
        elif isinstance(node, ir.Op):
            for arg in node.args:
                self.read(arg, seen)


@dataclass
class Space:
    """The fact-only parts of a framework's formulas, and the distinct value
    vectors they take across catalog GPUs, models and query shapes."""

    reader: "_Reader"
    parts: list[ir.Node]
    rows: list[tuple]  # one value vector per distinct situation
    places: list[Situation]
    incomplete: int = 0  # situations left out because a part reads a missing fact


def space(kb: KnowledgeBase, framework: str, nodes: list[ir.Node]) -> Space:
    reader = _Reader(kb)
    for node in nodes:
        reader.read(node)
    catalog = kb.catalog
    kinds = kb.frameworks[framework].models
    gpus = _grouped({**catalog.gpus, **_generic(kb)}, _fields(reader.facts, "gpu"))
    models = _grouped({k: m for k, m in catalog.models.items() if not kinds or m.kind in kinds},
                      _fields(reader.facts, "model"))
    network_fields = _fields(reader.facts, "network")
    networks = _grouped(catalog.networks, network_fields) if network_fields else [(None, [])]
    queries = _queries(kb, _fields(reader.facts, "query"))
    parts = list(reader.parts.values())
    found: dict[tuple, Situation] = {}
    incomplete = 0
    for (gpu, gnames), (model, mnames), (net, nnames), query in itertools.product(
            gpus, models, networks, queries):
        facts = collect_facts(kb, gpu, model, query_facts(query, kb.vocabulary), net)
        signature = tuple(_value(kb, framework, facts, part) for part in parts)
        if _MISSING in signature:
            incomplete += 1
            continue
        known = found.get(signature)
        if known is None:
            found[signature] = Situation(list(gnames), list(mnames), query, facts, list(nnames))
        else:
            for mine, theirs in ((known.gpus, gnames), (known.models, mnames),
                                 (known.networks, nnames)):
                mine.extend(n for n in theirs if n not in mine)
    return Space(reader, parts, list(found), list(found.values()), incomplete)


def _fields(facts: set[str], group: str) -> list[str]:
    return sorted(f.split(".", 1)[1] for f in facts if f.startswith(group + "."))


GENERIC_GIB = 24  # the memory of the card the generic GPU stands for here


def _generic(kb: KnowledgeBase) -> dict[str, Any]:
    """A card given by its memory (--gpus 1x24GiB): the catalog's generic GPU, whose
    unstated features (bf16_known) the rules and warnings also read."""
    generic = getattr(kb.catalog, "generic_gpu", None)
    if generic is None:
        return {}
    name = f"{GENERIC_GIB}GiB"
    return {name: generic.entry({"name": name, "memory_gib": GENERIC_GIB,
                                 "source": "kb check --deep: a card given by its memory"},
                                kb.vocabulary)}


def _grouped(table: dict, fields: list[str]) -> list[tuple[Any, list[str]]]:
    groups: dict[tuple, tuple[Any, list[str]]] = {}
    for name, entry in sorted(table.items()):
        key = tuple(repr(getattr(entry, f, None)) for f in fields)
        groups.setdefault(key, (entry, []))[1].append(entry.name)
    return list(groups.values())


def _queries(kb: KnowledgeBase, fields: list[str]) -> list[dict[str, Any]]:
    shapes = roles.probes(kb)  # numeric query field -> values worth trying (kb/core/roles.kb)
    axes = {f: shapes[f] for f in fields if shapes.get(f)}
    vocabulary = kb.vocabulary
    for name in fields:  # a query field with a value set (a pack's): each of its values
        spec = vocabulary.field("query", name) if vocabulary is not None else None
        if spec is not None and spec.kind in ("enum", "bool") and name not in axes:
            axes[name] = spec.values if spec.kind == "enum" else (False, True)
    if "num_gpus" in fields:
        axes.setdefault("nodes", shapes["nodes"])  # num_gpus follows nodes x gpus_per_node
        axes.setdefault("gpus_per_node", shapes["gpus_per_node"])
    out = []
    for combo in itertools.product(*axes.values()):
        query = dict(zip(axes, combo))
        query["num_gpus"] = query.get("nodes", 1) * query.get("gpus_per_node", 1)
        out.append(query)
    return out


def _value(kb: KnowledgeBase, framework: str, facts: dict, node: ir.Node):
    try:
        return Evaluator(kb, framework, facts).run(node, {})
    except (KbError, KeyError, ZeroDivisionError, TypeError):
        return _MISSING


_MISSING = "<missing>"
