"""The link step (program/program.py): each framework's Program against a direct
computation over the shipped KB, and the one let walker against a small KB written
by hand (nested lets, a memory sum, a let shared by two formulas)."""

from __future__ import annotations

import pickle

import pytest

from kbsolve import api
from kbsolve.diagnostics import Span
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase, Let, Meta, MemoryTerm, Option, OptIn, Rule
from kbsolve.dsl.types import BOOL, INT
from kbsolve.program.program import TABLES, link, reads, summed_terms


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _direct(kb, node, sums: bool) -> tuple[set, set]:
    """(options, facts) a node reads, by a naive recursion over lets (and sums)."""
    options, facts = set(), set()

    def visit(n):
        if isinstance(n, ir.OptionRef):
            options.add(n.option)
        elif isinstance(n, ir.FactRef):
            facts.add(n.path)
        elif isinstance(n, ir.LetRef):
            visit(kb.lets[n.let].expr)
        elif isinstance(n, ir.MemorySum) and sums:
            for t in kb.memory.values():
                if (t.framework, t.level, t.location) == (n.framework, n.level, "gpu"):
                    inner = _direct(kb, t.expr, True)
                    options.update(inner[0])
        elif isinstance(n, ir.Op):
            for a in n.args:
                visit(a)
    visit(node)
    return options, facts


def test_each_frameworks_program_is_the_kb_filtered_and_walked(kb):
    for framework in sorted(kb.frameworks):
        program = link(kb, framework)
        assert link(kb, framework) is program  # built once per KB
        for name in TABLES:
            expected = [v for k, v in sorted(getattr(kb, name).items())
                        if v.framework == framework]
            assert list(program.table(name)) == expected, (framework, name)
            for i, (key, entry) in enumerate(sorted(
                    (k, v) for k, v in getattr(kb, name).items() if v.framework == framework)):
                assert program.index[name][key] == i and program.entry(name, key) is entry
                assert f"{framework}.{program.name(key)}" == key
        assert program.options and program.rules, framework
        assert program.consent == tuple(o.rule for o in program.optins)
        for rule in program.consent:
            key = f"{rule.framework}.{rule.id}"
            assert program.rule(key) is rule and program.optin_of(key).rule is rule
        assert program.emits == tuple(e for e in kb.emits if e.framework == framework)
        levels = {t.level for t in kb.memory.values()}
        for level in levels:  # a memory sum's terms: GPU terms of the level, key order
            expected = [v for k, v in sorted(kb.memory.items()) if v.framework == framework
                        and v.level == level and v.location == "gpu"]
            assert list(summed_terms(kb, framework, level)) == expected, (framework, level)
            assert list(program.sums.get(level, ())) == expected, (framework, level)
        assert summed_terms(kb, framework, "no-such-level") == ()
        readers: dict[str, set] = {}
        facts, lets = set(), set()
        for name in TABLES:
            for entry in program.table(name):
                own = entry.id if name in ("rules", "warnings", "preferences") else entry.name
                key = f"{framework}.{own}"
                assert program.name(key) == own
                nodes = [n for n in (entry.when, entry.source_expr) if n is not None] \
                    if name == "options" else [entry.expr]
                options = set().union(*[_direct(kb, n, True)[0] for n in nodes])
                read = program.reads[(name, key)]
                assert read.options == options, (framework, name, key)
                assert read.facts == set().union(*[_direct(kb, n, False)[1] for n in nodes])
                facts |= read.facts
                lets |= {n.let for node in nodes for n in ir.walk(node)
                         if isinstance(n, ir.LetRef)}
                if name != "options":
                    for option in options:
                        readers.setdefault(option, set()).add((name, key))
        assert {k: set(v) for k, v in program.readers.items()} == readers
        assert set(program.facts) == facts and list(program.facts) == sorted(facts)
        assert lets <= set(program.index["lets"])  # those read directly, and theirs
        assert all(program.lets[program.index["lets"][let.key]] is let for let in program.lets)
        relevant = set().union(*[set(program.reads[(n, k)].options)
                                 for n in ("rules", "memory", "speed", "work", "preferences")
                                 for k in program.index[n]])
        grown = True
        while grown:
            more = set().union(*[_direct(kb, kb.options[k].when, True)[0] for k in relevant
                                 if kb.options[k].when is not None])
            grown = not more <= relevant
            relevant |= more
        assert program.relevant == relevant, framework


def test_a_pickled_kb_carries_no_program_and_a_view_builds_its_own(kb):
    program = link(kb, "llamafactory")
    again = pickle.loads(pickle.dumps(kb))
    assert "_linked" not in again.__dict__
    view = again.scoped("llamafactory")
    linked = link(view, "llamafactory")
    assert linked is not program
    assert [o.key for o in linked.options] == [o.key for o in program.options]
    assert linked.readers == program.readers and linked.relevant == program.relevant


# ---- the walker on a KB written by hand ----------------------------------------------

META = Meta(Span("hand.kb"), "hand")


def _opt(name):
    return ir.OptionRef(f"fw.{name}", INT)


def _fact(path):
    return ir.FactRef(path, INT)


def _let(name):
    return ir.LetRef(f"core.{name}", INT)


def _add(*args):
    return ir.Op("+", tuple(args), INT)


def _hand_kb() -> KnowledgeBase:
    """inner = x + gpu.a; middle = inner * y + model.b; outer = middle + inner + sum;
    the memory sum adds `weights` (reads z through `scaled`)."""
    lets = {
        "core.inner": _add(_opt("x"), _fact("gpu.a")),
        "core.middle": _add(ir.Op("*", (_let("inner"), _opt("y")), INT), _fact("model.b")),
        "core.outer": _add(_let("middle"), _let("inner"),
                           ir.MemorySum("fw", "allocated", INT)),
        "core.scaled": ir.Op("*", (_opt("z"), _fact("query.c")), INT),
    }
    memory = {
        "fw.weights": MemoryTerm("fw", "weights", _let("scaled"), "allocated", "gpu", META),
        "fw.host": MemoryTerm("fw", "host", _opt("w"), "allocated", "host", META),
    }
    options = {f"fw.{n}": Option("fw", n, INT, (1, 2), None, None, 1, META,
                                 when=ir.OptionRef("fw.x", INT) if n == "v" else None)
               for n in "vwxyz"}
    gate = ir.Op("==", (_opt("v"), ir.Const(1, INT)), BOOL)
    rules = {"fw.fits": Rule("fw", "fits", "require",
                             ir.Op("<=", (_let("outer"), ir.Const(10, INT)), BOOL), META)}
    return KnowledgeBase(
        frameworks={}, options=options, nokeys={}, facts={},
        lets={k: Let("core", k[5:], e, INT, META) for k, e in lets.items()},
        rules=rules, warnings={}, preferences={}, memory=memory, speed={}, work={},
        emits=(), categories={}, checks={}, detectors={}, tests={},
        optins={"fw.big": OptIn("fw", "big", "numerics", gate, META)})


def test_the_walker_reads_through_nested_lets_and_sums():
    kb = _hand_kb()
    outer = _let("outer")
    found = reads(kb, outer)
    assert found.options == {"fw.x", "fw.y"}  # through middle and inner; the sum not followed
    assert found.facts == {"gpu.a", "model.b"}
    assert found.lets == {"core.outer", "core.middle", "core.inner"}
    assert found.sums == {("fw", "allocated")}
    summed = reads(kb, outer, sums=True)  # the GPU terms of the sum: weights, through scaled
    assert summed.options == {"fw.x", "fw.y", "fw.z"}  # not `host`'s w (a host term)
    assert summed.facts == {"gpu.a", "model.b"}  # a sum's facts are its terms' own
    assert reads(kb, outer) is found and reads(kb, outer, sums=True) is summed  # kept
    middle = reads(kb, _let("middle"))
    assert (middle.options, middle.lets) == ({"fw.x", "fw.y"}, {"core.middle", "core.inner"})


def test_the_hand_kbs_program():
    kb = _hand_kb()
    program = link(kb, "fw")
    assert [o.name for o in program.options] == list("vwxyz")
    assert program.reads[("rules", "fw.fits")].options == {"fw.x", "fw.y", "fw.z"}
    assert program.readers["fw.z"] == (("rules", "fw.fits"), ("memory", "fw.weights"))
    assert program.readers["fw.w"] == (("memory", "fw.host"),)
    assert program.readers["fw.v"] == (("optins", "fw.big"),)  # consent reads it
    assert program.relevant == {"fw.w", "fw.x", "fw.y", "fw.z"}  # v: only an optin reads it
    assert [let.name for let in program.lets] == ["inner", "middle", "outer", "scaled"]
    assert program.facts == ("gpu.a", "model.b", "query.c")
    assert program.rule("fw.ALLOW_big") is kb.optins["fw.big"].rule
