"""`kb graph`: the dependency neighbourhood of an option, rule or quantity.

The KB is a networkx graph: an edge A -> B says "A reads B" (a rule reads an
option, a memory term reads a let, a let reads a fact, an option's `when`
reads another option). A neighbourhood follows lets through, so that a rule
that reads `zero_stage` counts as reading `deepspeed`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import networkx as nx

from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase

# relation -> the label the text pane uses
SECTIONS = [("depends on", "depends on"), ("excluded by", "excluded by"),
            ("required by", "required by"), ("warned by", "warned by"),
            ("chosen when", "chosen when"), ("recommended by", "recommended by"),
            ("affects memory term", "affects memory term"),
            ("affects speed term", "affects speed term"),
            ("touches options", "touches options"), ("reads", "reads"),
            ("used by", "used by"), ("shares options with", "shares options with")]


def build(kb: KnowledgeBase) -> nx.DiGraph:
    graph = nx.DiGraph()
    for key, option in kb.options.items():
        graph.add_node(f"option:{key}", kind="option", span=str(option.meta.span))
        for node in (option.when, option.source_expr):
            if node is not None:
                _reads(graph, f"option:{key}", node)
    tables = [("rule", kb.rules, "expr"), ("warn", kb.warnings, "expr"),
              ("prefer", kb.preferences, "expr"), ("memory", kb.memory, "expr"),
              ("speed", kb.speed, "expr"), ("work", kb.work, "expr"), ("let", kb.lets, "expr")]
    for kind, table, attr in tables:
        for key, item in table.items():
            graph.add_node(f"{kind}:{key}", kind=kind, span=str(item.meta.span))
            _reads(graph, f"{kind}:{key}", getattr(item, attr))
    for key, check in kb.checks.items():
        graph.add_node(f"check:{key}", kind="check", span=str(check.meta.span))
        for name, _ in check.recommend:
            graph.add_edge(f"check:{key}", f"option:{check.framework}.{name}", how="recommends")
        for node in (check.applies, check.enabled):
            if node is not None:
                _reads(graph, f"check:{key}", node)
    return graph


def _reads(graph: nx.DiGraph, source: str, node: ir.Node) -> None:
    for n in ir.walk(node):
        if isinstance(n, ir.OptionRef):
            graph.add_edge(source, f"option:{n.option}", how="reads")
        elif isinstance(n, ir.LetRef):
            graph.add_edge(source, f"let:{n.let}", how="reads")
        elif isinstance(n, ir.FactRef):
            graph.add_edge(source, f"fact:{n.path}", how="reads")
        elif isinstance(n, ir.MemorySum):
            graph.add_edge(source, f"memory-sum:{n.framework}.{n.level}", how="reads")


@dataclass
class Neighbourhood:
    centre: str
    sections: dict[str, list[str]] = field(default_factory=dict)
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)


def find(kb: KnowledgeBase, graph: nx.DiGraph, what: str, name: str,
         framework: str | None) -> list[str]:
    kinds = {"option": ["option"], "rule": ["rule", "warn", "prefer", "check"],
             "quantity": ["let", "memory", "speed", "work"]}[what]
    found = [n for n in graph.nodes if n.split(":", 1)[0] in kinds
             and n.split(":", 1)[1].split(".", 1)[-1] == name
             and (framework is None or n.split(":", 1)[1].split(".", 1)[0] == framework)]
    if not found:
        names = {n.split(":", 1)[1].split(".", 1)[-1] for n in graph.nodes
                 if n.split(":", 1)[0] in kinds}
        raise KbError(Diagnostic(f"no {what} named '{name}'{did_you_mean(name, names)}"))
    return sorted(found)


def _through_lets(graph: nx.DiGraph, start: str, direction: str) -> set[str]:
    """Items reached from `start` (reads: successors; readers: predecessors),
    passing through lets and memory sums."""
    step = graph.successors if direction == "reads" else graph.predecessors
    seen, out, todo = {start}, set(), [start]
    while todo:
        for nxt in step(todo.pop()):
            if nxt in seen:
                continue
            seen.add(nxt)
            if nxt.startswith("let:") or nxt.startswith("memory-sum:"):
                todo.append(nxt)
            else:
                out.add(nxt)
    return out


def neighbourhood(kb: KnowledgeBase, graph: nx.DiGraph, centre: str) -> Neighbourhood:
    hood = Neighbourhood(centre)
    readers = _through_lets(graph, centre, "readers")
    reads = _through_lets(graph, centre, "reads")
    kind, key = centre.split(":", 1)
    add = hood.sections.setdefault
    if kind == "option":
        option = kb.options[key]
        if option.when is not None:
            add("depends on", []).extend(sorted(_options_in(graph, centre)))
        for item in sorted(readers):
            ikind, ikey = item.split(":", 1)
            if ikind == "rule":
                rule = kb.rules[ikey]
                label = "excluded by" if rule.kind == "forbid" else "required by"
                others = sorted(o for o in _options_in(graph, item) if o != centre)
                add(label, []).append(item + (f"  (with {', '.join(_short(o) for o in others)})"
                                              if others else ""))
            elif ikind == "warn":
                add("warned by", []).append(item)
            elif ikind == "prefer":
                add("chosen when", []).append(item)
            elif ikind == "check":
                add("recommended by", []).append(item)
            elif ikind == "memory":
                add("affects memory term", []).append(item)
            elif ikind in ("speed", "work"):
                add("affects speed term", []).append(item)
            elif ikind == "option":
                add("used by", []).append(item)
        touched = set()
        for item in readers:
            if item.startswith("rule:"):
                touched |= _options_in(graph, item)
        touched.discard(centre)
        if touched:
            add("touches options", []).extend(sorted(touched))
    else:
        add("reads", []).extend(sorted(reads))
        if readers:
            add("used by", []).extend(sorted(readers))
        related = set()
        for option in (r for r in reads if r.startswith("option:")):
            related |= {r for r in _through_lets(graph, option, "readers")
                        if r.startswith("rule:") and r != centre}
        if related:
            add("shares options with", []).extend(sorted(related))
    hood.graph.add_node(centre)
    for label, items in hood.sections.items():
        for item in items:
            target = item.split("  (", 1)[0]
            if label in ("depends on", "reads"):
                hood.graph.add_edge(centre, target, label=label)
            else:
                hood.graph.add_edge(target, centre, label=label)
    for n in hood.graph.nodes:
        hood.graph.nodes[n]["span"] = graph.nodes[n].get("span", "") if n in graph else ""
    return hood


def _options_in(graph: nx.DiGraph, item: str) -> set[str]:
    return {r for r in _through_lets(graph, item, "reads") if r.startswith("option:")}


def _short(node: str) -> str:
    return node.split(":", 1)[1].split(".", 1)[-1]


# ---- rendering -----------------------------------------------------------------

def render(kb: KnowledgeBase, hoods: list[Neighbourhood], fmt: str) -> str:
    if fmt == "text":
        return "\n\n".join(_text(kb, h) for h in hoods)
    merged = nx.compose_all([h.graph for h in hoods])
    if fmt == "json":
        return json.dumps({"centres": [h.centre for h in hoods],
                           "sections": {h.centre: h.sections for h in hoods},
                           "nodes": [{"id": n, "location": merged.nodes[n].get("span", "")}
                                     for n in sorted(merged.nodes)],
                           "edges": [{"from": a, "to": b, "label": d["label"]}
                                     for a, b, d in sorted(merged.edges(data=True))]},
                          indent=2, ensure_ascii=False)
    if fmt == "dot":
        lines = ["digraph kb {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
        for n in sorted(merged.nodes):
            shape = ', style=bold' if any(n == h.centre for h in hoods) else ""
            lines.append(f"  {_quote(n)} [label={_quote(n)}{shape}];")
        for a, b, d in sorted(merged.edges(data=True)):
            lines.append(f"  {_quote(a)} -> {_quote(b)} [label={_quote(d['label'])}];")
        return "\n".join(lines + ["}"])
    ids = {n: f"n{i}" for i, n in enumerate(sorted(merged.nodes))}
    lines = ["graph LR"]
    for n, ident in ids.items():
        lines.append(f'  {ident}["{n.replace(chr(34), "#quot;")}"]')
    for a, b, d in sorted(merged.edges(data=True)):
        lines.append(f"  {ids[a]} -->|{d['label']}| {ids[b]}")
    return "\n".join(lines)


def _literal(value) -> str:
    """A value as the rule language writes it."""
    from fractions import Fraction
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else str(float(value))
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _text(kb: KnowledgeBase, hood: Neighbourhood) -> str:
    kind, key = hood.centre.split(":", 1)
    lines = [f"{kind} {key}"]
    if kind == "option":
        option = kb.options[key]
        domain = "" if option.domain is None or option.type.kind in ("bool", "enum") else \
            " [" + ", ".join(_literal(v) for v in option.domain) + "]"
        lines[0] += f": {option.type}{domain}" + (f" = {_literal(option.default)}"
                                                   if option.default is not None else "")
        if option.meta.doc:
            lines.append(f"  {option.meta.doc}")
        for emit in option.emits:
            lines.append(f"  written as: {emit.target}:{emit.key}")
    table = {"rule": kb.rules, "warn": kb.warnings, "prefer": kb.preferences,
             "check": kb.checks, "let": kb.lets, "memory": kb.memory, "speed": kb.speed,
             "work": kb.work}.get(kind)
    if table is not None and table[key].meta.because:
        prefix = f"{table[key].kind}: " if kind == "rule" else ""
        lines.append(f"  {prefix}{table[key].meta.because}")
    span = hood.graph.nodes[hood.centre].get("span", "")
    lines.append(f"  defined at: {span}")
    for label, _ in SECTIONS:
        items = hood.sections.get(label)
        if items:
            lines.append(f"  {label}:")
            lines += [f"    {item}" for item in items]
    return "\n".join(lines)
