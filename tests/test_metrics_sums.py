"""measure()'s sums and products of Fractions normalised once (program/metrics
total, product) are the Fractions Python's step-by-step + and * give."""

from __future__ import annotations

import random
from fractions import Fraction


from kbsolve import api
from kbsolve.program import metrics
from kbsolve.program.program import memory_levels
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search


def _fractions(rng: random.Random, count: int) -> list[Fraction]:
    return [Fraction(rng.randint(-10**12, 10**12), rng.choice([1, 1, 2, 7, 10**9, 3**20]))
            for _ in range(count)]


def test_total_and_product_are_the_step_by_step_results():
    rng = random.Random(25)
    for count in [0, 1, 2, 5, 17, 40]:
        for _ in range(50):
            values = _fractions(rng, count)
            assert metrics.total(values) == sum(values, Fraction(0))
            first = _fractions(rng, 1)[0]
            step = first
            for value in values:
                step *= value
            found = metrics.product(first, values)
            assert found == step and type(found) is Fraction
            assert (found.numerator, found.denominator) == (step.numerator, step.denominator)


def test_measured_levels_and_step_time_as_summed_term_by_term():
    """On the plan and every single-option change of it: each memory level is its
    terms (and the levels inside it) added one by one, and the step time is the
    time terms' sum times each factor in turn; each preference tier its scores added
    one by one, the tiers in the same order."""
    kb = api.load_kb()
    problem = resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem
    found = Search(problem).run()
    plan = {**problem.fixed, **found.chosen}
    order = memory_levels(kb)
    assignments = [plan] + [{**plan, key: value} for key, values in problem.choices.items()
                            for value in values if value != plan[key]]
    for assignment in assignments:
        measured = metrics.measure(problem, assignment)
        levels = {level: Fraction(0) for level in order}
        for term in problem.memory_inner_first:
            if term.location != "host":
                levels[term.level] += measured.memory[f"{term.framework}.{term.name}"]
        for inner, outer in zip(order, order[1:]):
            levels[outer] += levels[inner]
        assert measured.levels == levels
        step = sum(measured.times.values(), Fraction(0))
        for factor in measured.factors.values():
            step *= factor
        assert measured.step_time == step
        run = problem.evaluator.remembering(assignment)
        prefs: dict = {}
        for pref in problem.program.preferences:
            value = run(pref.expr)
            score = (pref.weight if value else 0) if isinstance(value, bool) else \
                pref.weight * Fraction(value)
            prefs[pref.tier] = prefs.get(pref.tier, Fraction(0)) + score
        assert measured.preferences == prefs
        assert list(measured.preferences) == list(prefs)
    assert len(assignments) > 20
