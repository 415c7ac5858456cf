"""The link step: one Program per framework, the checked KB's names resolved once.

`link(kb, framework)` gathers the framework's options, rules, warnings,
preferences, memory, speed and work terms and optins (each table in key order,
the order every back end has always read them in), its static emits (KB order),
the facts and lets its formulas read, a name -> index map per table, what each
formula reads (options and facts, through lets and memory sums, transitively),
the readers of each option and the terms of each memory sum (`sums`, key order:
`summed_terms`). It is built once per (KB, framework) and kept on the KB (never
pickled, never copied into a framework's view: dsl/kb.py). The entries of every
framework are sorted out of the KB in one pass per KB (`_entries`), the one filter
by framework that the link step, the evaluator, the tables and the Z3 compiler read.

`reads(kb, node)` is the one walker of let closures: every "which options or
facts does this formula read" question (the evaluator's memo keys, the problem's
relevant options, the audit's undecided facts, the Program's maps) is answered
by it. It walks a node once and each let once (kept per KB, by identity, so a
let shared by many formulas is walked once for all of them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase, Let, Option, OptIn, Rule

# the KB tables whose entries belong to one framework, read in key order
TABLES = ("options", "rules", "warnings", "preferences", "memory", "speed", "work", "optins")
# the tables whose formulas a search reads (rules, then the terms it sums and sorts by)
FORMULAS = ("rules", "memory", "speed", "work", "preferences")


@dataclass(frozen=True)
class Reads:
    """What a formula reads: options and facts, through the lets it reads (transitively);
    `sums` the memory sums ((framework, level)) it reads, directly or through lets."""

    options: frozenset
    facts: frozenset
    lets: frozenset
    sums: frozenset = frozenset()

    def __or__(self, other: "Reads") -> "Reads":
        return Reads(self.options | other.options, self.facts | other.facts,
                     self.lets | other.lets, self.sums | other.sums)


NOTHING = Reads(frozenset(), frozenset(), frozenset())


def _memo(kb: KnowledgeBase) -> dict:
    """The KB's own memo of linked data (freed with it, never pickled: dsl/kb.py)."""
    found = kb.__dict__.get("_linked")
    if found is None:
        found = {"nodes": {}, "lets": {}, "summed": {}, "programs": {}, "entries": None}
        object.__setattr__(kb, "_linked", found)
    return found


def kept(kb: KnowledgeBase, name: str) -> dict:
    """A dict kept in the KB's memo of linked data under `name`, for what is computed
    once per KB and read by every query (the tables' constants: program/tables.py)."""
    return _memo(kb).setdefault(name, {})


def reads(kb: KnowledgeBase, node: ir.Node, sums: bool = False) -> Reads:
    """The options, facts and lets `node` reads, through lets, transitively. With
    `sums` the GPU memory terms a memory sum adds up count as read too (what the
    evaluator and the search compute for it); without, a sum is only listed in
    `sums` (facts are read without them: a sum's facts are its terms')."""
    memo = _memo(kb)
    if sums:
        found = memo["summed"].get(id(node))
        if found is None or found[0] is not node:
            found = (node, _with_sums(kb, reads(kb, node)))
            memo["summed"][id(node)] = found
        return found[1]
    found = memo["nodes"].get(id(node))
    if found is None or found[0] is not node:
        found = (node, _walk(kb, node, memo["lets"], set()))
        memo["nodes"][id(node)] = found
    return found[1]


def _walk(kb: KnowledgeBase, node: ir.Node, lets: dict, active: set) -> Reads:
    options, facts, used, summed = set(), set(), set(), set()
    stack = [node]  # every node below (ir.walk's, in any order: sets), by exact type
    while stack:
        n = stack.pop()
        kind = type(n)
        if kind is ir.Op:
            stack += n.args
        elif kind is ir.OptionRef:
            options.add(n.option)
        elif kind is ir.FactRef:
            facts.add(n.path)
        elif kind is ir.LetRef:
            used.add(n.let)
        elif kind is ir.MemorySum:
            summed.add((n.framework, n.level))
    further = [_let(kb, key, lets, active) for key in sorted(used)]
    for read in further:  # one Reads at the end, not one per let
        options |= read.options
        facts |= read.facts
        used |= read.lets
        summed |= read.sums
    return Reads(frozenset(options), frozenset(facts), frozenset(used), frozenset(summed))


def _let(kb: KnowledgeBase, key: str, lets: dict, active: set) -> Reads:
    """What a let's body reads (the let itself not included), once per KB."""
    found = lets.get(key)
    if found is None:
        if key in active:  # a cycle: the checker refuses one; read it once
            return NOTHING
        active.add(key)
        found = lets[key] = _walk(kb, kb.lets[key].expr, lets, active)
        active.discard(key)
    return found


def summed_terms(kb: KnowledgeBase, framework: str, level: str) -> tuple:
    """The GPU memory terms a memory sum of `framework` at `level` adds, in key order:
    the one definition of a sum's terms and of their order (Program.sums; the float
    sums of the tables and the Z3 compiler's Sum add them in this order)."""
    return _entries(kb).get(framework, _NONE)["sums"].get(level, ())


_NONE = {"sums": {}}


def _entries(kb: KnowledgeBase) -> dict:
    """The link step's one filter by framework, for every framework at once (kept on
    the KB): framework -> each table's entries in key order, its static emits in the
    KB's order, and "sums": level -> the GPU memory terms a memory sum at that level
    adds (key order). Programs and memory sums read it; nothing filters the KB again."""
    memo = _memo(kb)
    found = memo["entries"]
    if found is None:
        found = {}

        def of(framework: str) -> dict:
            entry = found.get(framework)
            if entry is None:
                entry = found[framework] = {name: [] for name in (*TABLES, "emits")}
            return entry

        for name in TABLES:
            for _, v in sorted(getattr(kb, name).items()):
                of(v.framework)[name].append(v)
        for e in kb.emits:
            of(e.framework)["emits"].append(e)
        for entry in found.values():
            sums: dict[str, list] = {}
            for term in entry["memory"]:
                if term.location == "gpu":
                    sums.setdefault(term.level, []).append(term)
            for name in (*TABLES, "emits"):
                entry[name] = tuple(entry[name])
            entry["sums"] = {level: tuple(terms) for level, terms in sums.items()}
        memo["entries"] = found
    return found


def _with_sums(kb: KnowledgeBase, found: Reads) -> Reads:
    """`found` with the reads of the terms of every memory sum it reads, transitively."""
    done: set = set()
    pending = list(found.sums)
    while pending:
        summed = pending.pop()
        if summed in done:
            continue
        done.add(summed)
        for term in summed_terms(kb, *summed):
            more = reads(kb, term.expr)
            found = found | Reads(more.options, frozenset(), more.lets, more.sums)
            pending += more.sums - done
    return found


def options_read(kb: KnowledgeBase, node: ir.Node) -> frozenset:
    """The options a node reads, through lets and memory sums."""
    return reads(kb, node, sums=True).options


def facts_read(kb: KnowledgeBase, node: ir.Node) -> frozenset:
    """The facts a node reads, through lets (memory sums excluded)."""
    return reads(kb, node).facts


@dataclass(frozen=True, eq=False)
class Program:
    """One framework of a checked KB, linked: each table's entries in key order with a
    key -> index map; the facts and lets its formulas read; each formula's reads and each
    option's readers. The KB's keys ("framework.name") stay available throughout."""

    framework: str
    options: tuple[Option, ...]
    rules: tuple[Rule, ...]
    warnings: tuple
    preferences: tuple
    memory: tuple
    speed: tuple
    work: tuple
    optins: tuple[OptIn, ...]
    consent: tuple[Rule, ...]  # one forbid per optin (OptIn.rule), in the optins' order
    emits: tuple  # the framework's static emits, in the KB's order
    facts: tuple[str, ...]  # the facts its formulas read (paths), sorted
    lets: tuple[Let, ...]  # the lets its formulas read, transitively, by key
    index: Mapping[str, Mapping[str, int]]  # table ("facts", "lets" too) -> key -> index
    names: Mapping[str, str]  # every entry's key -> its own name (option, rule id, term)
    reads: Mapping[tuple, Reads]  # (table, key) -> what its formula reads (sums included)
    readers: Mapping[str, tuple]  # option key -> (table, key) of the formulas reading it
    relevant: frozenset  # options a rule, term or preference reads, and their `when`s
    sums: Mapping[str, tuple]  # level -> the GPU memory terms its memory sum adds (summed_terms)

    def __repr__(self) -> str:
        return f"Program({self.framework!r}: " + ", ".join(
            f"{len(getattr(self, name))} {name}" for name in TABLES) + ")"

    def table(self, name: str) -> tuple:
        return getattr(self, name)

    @functools.cached_property
    def defaults(self) -> Mapping[str, Any]:
        """Each option's default, by key (found once per Program; read-only)."""
        return MappingProxyType({o.key: o.default for o in self.options})

    def entry(self, table: str, key: str):
        """The entry of `table` with this key (KeyError when the framework lacks it)."""
        return getattr(self, table)[self.index[table][key]]

    def get(self, table: str, key: str, default=None):
        at = self.index[table].get(key)
        return default if at is None else getattr(self, table)[at]

    def rule(self, key: str) -> Rule:
        """A rule by key, consent rules ('framework.ALLOW_name') included."""
        at = self.index["rules"].get(key)
        if at is not None:
            return self.rules[at]
        return self.consent[self.index["consent"][key]]

    def optin_of(self, rule_key: str) -> OptIn | None:
        """The optin a consent rule's key stands for."""
        at = self.index["consent"].get(rule_key)
        return None if at is None else self.optins[at]

    def name(self, key: str) -> str:
        """An entry's own name from its key (an option's name, a rule's id, a term's)."""
        return self.names[key]


def link(kb: KnowledgeBase, framework: str) -> Program:
    """The framework's Program, built once per KB (kept on it)."""
    programs = _memo(kb)["programs"]
    found = programs.get(framework)
    if found is None:
        found = programs[framework] = _link(kb, framework)
    return found


def _link(kb: KnowledgeBase, framework: str) -> Program:
    entries = _entries(kb).get(framework, _NONE)
    tables = {name: entries.get(name, ()) for name in TABLES}
    keys = {name: tuple(_key(name, v) for v in entries) for name, entries in tables.items()}
    consent = tuple(o.rule for o in tables["optins"])
    found: dict[tuple, Reads] = {}
    for name in TABLES:
        for key, entry in zip(keys[name], tables[name]):
            if name == "options":
                parts = [reads(kb, n, sums=True) for n in (entry.when, entry.source_expr)
                         if n is not None]
                found[(name, key)] = _union(parts)
            else:
                found[(name, key)] = reads(kb, entry.expr, sums=True)
    readers: dict[str, list] = {}
    for (name, key), read in found.items():
        if name == "options":
            continue
        for option in sorted(read.options):
            readers.setdefault(option, []).append((name, key))
    everything = _union(list(found.values()))
    lets = tuple(kb.lets[k] for k in sorted(everything.lets))
    facts = tuple(sorted(everything.facts))
    index = {name: {k: i for i, k in enumerate(keys[name])} for name in TABLES}
    index["consent"] = {f"{r.framework}.{r.id}": i for i, r in enumerate(consent)}
    index["facts"] = {p: i for i, p in enumerate(facts)}
    index["lets"] = {let.key: i for i, let in enumerate(lets)}
    names = {k: _own_name(name, e) for name in TABLES for k, e in zip(keys[name], tables[name])}
    names.update({k: r.id for k, r in zip(index["consent"], consent)})
    return Program(
        framework=framework, **tables, consent=consent,
        emits=entries.get("emits", ()), sums=entries["sums"],
        facts=facts, lets=lets, index=index, names=names, reads=found,
        readers={k: tuple(v) for k, v in sorted(readers.items())},
        relevant=_relevant(kb, tables, found))


def memory_levels(kb: KnowledgeBase) -> tuple[str, ...]:
    """The memory levels, innermost first (kb/core/vocabulary.kb: memory_level)."""
    return kb.vocabulary.enums["memory_level"].values


def _key(table: str, entry) -> str:
    return f"{entry.framework}.{_own_name(table, entry)}"


def _own_name(table: str, entry) -> str:
    return entry.id if table in ("rules", "warnings", "preferences") else entry.name


def _union(parts: list) -> Reads:
    found = NOTHING
    for part in parts:
        found = found | part
    return found


def _relevant(kb: KnowledgeBase, tables: dict, found: dict) -> frozenset:
    """Options that some rule, term or preference reads, through lets and the `when`
    of options so read. The others cannot change the objective, except the count of
    defaults kept, which their default already maximises."""
    used: set[str] = set()
    for name in FORMULAS:
        for entry in tables[name]:
            used |= found[(name, _key(name, entry))].options
    pending = list(used)
    while pending:  # the `when` of an option that matters matters too
        option = kb.options.get(pending.pop())
        if option is not None and option.when is not None:
            new = options_read(kb, option.when) - used
            used |= new
            pending += new
    return frozenset(used)
