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
