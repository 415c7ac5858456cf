"""A memory sum adds its terms' values as the evaluator's store keeps them
(program/evaluate._kept): a term already computed at the assignment (measure reads
the inner levels first) is read, not computed again; at another assignment it is
computed. The sums of a real plan are unchanged."""

from __future__ import annotations

from fractions import Fraction

from kbsolve import api
from kbsolve.diagnostics import Span
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase, Meta, MemoryTerm, Option
from kbsolve.dsl.types import INT
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.program import summed_terms
from kbsolve.program.query import Query, resolve

META = Meta(Span("hand.kb"), "hand")
WEIGHTS = ir.Op("*", (ir.OptionRef("fw.z", INT), ir.FactRef("query.c", INT)), INT)
SUM = ir.MemorySum("fw", "allocated", INT)


def _hand_kb() -> KnowledgeBase:
    """One GPU term, weights = z * query.c, at the allocated level."""
    return KnowledgeBase(
        frameworks={}, nokeys={}, facts={}, lets={}, rules={}, warnings={},
        preferences={}, speed={}, work={}, emits=(), categories={}, checks={},
        detectors={}, tests={}, optins={},
        options={"fw.z": Option("fw", "z", INT, (1, 2), None, None, 1, META)},
        memory={"fw.weights": MemoryTerm("fw", "weights", WEIGHTS, "allocated", "gpu", META)})


def test_a_memory_sum_reads_the_term_the_store_keeps():
    """Facts never change; here they do after the term is kept, to see what the sum reads."""
    kb = _hand_kb()
    facts = {"query.c": Fraction(3)}
    ours = Evaluator(kb, "fw", facts)
    assert ours.remembered(WEIGHTS, {"fw.z": 2}) == 6
    facts["query.c"] = Fraction(5)
    assert ours.run(SUM, {"fw.z": 2}) == 6  # the kept term
    assert ours.run(SUM, {"fw.z": 1}) == 5  # another assignment: computed
    assert Evaluator(kb, "fw", facts).run(SUM, {"fw.z": 2}) == 10  # a fresh store


def test_a_real_plans_memory_sums_are_their_terms_added():
    problem = resolve(api.load_kb(), Query(gpus="8xA100", model="qwen3-8b")).problem
    assignment = {**{o.key: o.default for o in problem.options}, **problem.fixed}
    levels = [level for level in problem.kb.vocabulary.enums["memory_level"].values
              if summed_terms(problem.kb, problem.framework, level)]
    assert levels
    for level in levels:
        terms = summed_terms(problem.kb, problem.framework, level)
        plain = Evaluator(problem.kb, problem.framework, problem.facts)
        expected = sum((Fraction(plain.run(t.expr, assignment)) for t in terms), Fraction(0))
        node = ir.MemorySum(problem.framework, level, INT)
        assert problem.evaluator.run(node, assignment) == expected > 0


def _two_term_kb() -> KnowledgeBase:
    """weights = z * query.c (whole) and a third of z (not whole), both allocated, and
    a cache of 7 at the reserved level."""
    third = ir.Op("/", (ir.OptionRef("fw.z", INT), ir.Const(Fraction(3), INT)), INT)
    kb = _hand_kb()
    memory = {**kb.memory,
              "fw.third": MemoryTerm("fw", "third", third, "allocated", "gpu", META),
              "fw.cache": MemoryTerm("fw", "cache", ir.Const(Fraction(7), INT), "reserved",
                                     "gpu", META)}
    return KnowledgeBase(**{**{f: getattr(kb, f) for f in (
        "frameworks", "nokeys", "facts", "lets", "rules", "warnings", "preferences", "speed",
        "work", "emits", "categories", "checks", "detectors", "tests", "optins", "options")},
        "memory": memory})


def test_a_sum_of_whole_and_fractional_terms_is_exact_at_each_assignment():
    """One remembering run per assignment: the sum (read twice, by two sum nodes of the
    level) is that assignment's, whether its terms were run first or not."""
    kb = _two_term_kb()
    ours = Evaluator(kb, "fw", {"query.c": Fraction(3)})
    other = ir.MemorySum("fw", "allocated", INT)  # the same level, another node
    reserved = ir.MemorySum("fw", "reserved", INT)
    for z in (1, 2, 1):
        run = ours.remembering({"fw.z": z})
        expected = Fraction(3 * z) + Fraction(z, 3)
        assert run(SUM) == expected and run(other) == expected and run(reserved) == 7
        assert type(run(SUM)) is Fraction
        assert Evaluator(kb, "fw", {"query.c": Fraction(3)}).run(other, {"fw.z": z}) == expected
    run = ours.remembering({"fw.z": 2})
    assert run(WEIGHTS) == 6 and run(SUM) == Fraction(20, 3)  # a term run first, then summed


def test_measures_through_one_store_equal_fresh_evaluations():
    """measure() keys lets, terms and sums by the options they read (remembering's
    values, the memo of one assignment): over many assignments in turn, every figure
    equals a plain run of each formula by a fresh evaluator at that assignment."""
    from kbsolve.program.metrics import measure
    from plans import defaults
    kb = api.load_kb()
    for query in (Query(gpus="8xA100", model="qwen3-8b"), Query(gpus="4xL40S", model="flux1-dev")):
        problem = resolve(kb, query).problem
        base = defaults(problem)
        assignments = [base] + [{**base, key: value}
                                for key, values in list(problem.choices.items())[:8]
                                for value in values if value != base[key]]
        for assignment in assignments + assignments[::-1]:
            got = measure(problem, assignment)
            fresh = Evaluator(kb, problem.framework, problem.facts)
            for term in problem.program.memory:
                key = f"{term.framework}.{term.name}"
                assert (got.host if term.location == "host" else got.memory)[key] == \
                    fresh.run(term.expr, assignment)
            for term in problem.program.speed:
                key = f"{term.framework}.{term.name}"
                assert {**got.times, **got.factors}[key] == fresh.run(term.expr, assignment)
            assert got.broken == [f"{r.framework}.{r.id}" for r in problem.rules
                                  if not fresh.run(r.constraint, assignment)]
