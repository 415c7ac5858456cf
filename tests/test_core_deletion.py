"""The refusal's minimal core (solver/prove.minimal_core) against plain deletion: the
same checks up to Z3's first core on a fresh solver, then one Z3 check per part in name
order. Every shortcut (witnesses, known clashes, the guesses, runs of consent rules)
must give that core; and no check of the plain deletion runs out of its rlimit."""

from __future__ import annotations

import pytest
import z3

from kbsolve.program.query import Query, resolve
from kbsolve.solver import prove
from kbsolve.solver.optimize import solve
from plans import shipped_kb


def _marked(finder: prove.CoreFinder, names) -> list:
    return [finder.marks[n] for n in names]


def _plain_core(problem) -> list[str]:
    """minimal_core's two passes with one Z3 check per deletion (the reference); the
    names of a core read as the markers print."""
    finder = prove.CoreFinder(prove.Model(problem))
    optin_of = problem.program.optin_of
    consent = {n for n in finder.marks if n.startswith("rule:") and optin_of(n[5:]) is not None}
    passes = [[n for n in finder.marks if n not in consent]] if consent else []
    for names in passes + [list(finder.marks)]:
        first = finder.solver.check(_marked(finder, names))
        assert first != z3.unknown
        if first == z3.sat:
            continue
        core = sorted(str(m) for m in finder.solver.unsat_core() if str(m) in finder.marks)
        for name in list(core):
            answer = finder.solver.check(_marked(finder, [n for n in core if n != name]))
            assert answer != z3.unknown, name  # the rlimit suffices: nothing kept by it
            if answer == z3.unsat:
                core.remove(name)
        return core
    return []


@pytest.mark.ci  # ~17 s of CPU; tests/test_fixes.py and test_value_bounds.py check 70b by default
@pytest.mark.parametrize("fields", [
    {"gpus": "1x4090", "model": "llama3-70b"},  # the plan grid's refusal
    {"gpus": "2x4090", "model": "mixtral-8x7b", "task": "dpo"},  # two consent rules
    {"gpus": "1x4090", "model": "qwen3-32b", "task": "rm"},
    {"gpus": "1x4090", "model": "llama3.1-405b", "task": "sft"},  # memory alone
], ids=lambda f: "-".join(f.values()))
def test_the_refusal_s_core_is_plain_deletion_s_from_z3_s_first_core(fields):
    problem = resolve(shipped_kb(), Query(**fields)).problem
    outcome = solve(problem)
    assert outcome.status == "infeasible" and outcome.core
    assert prove.minimal_core(prove.Model(problem)) == outcome.core
    assert _plain_core(problem) == outcome.core


def test_the_core_finder_asserts_what_z3py_s_add_asserts():
    """The C-API assertions (CoreFinder._assert, _implies) are z3py's: the same terms in
    the same order, on the refused 1x4090 llama3-70b."""
    problem = resolve(shipped_kb(), Query(gpus="1x4090", model="llama3-70b")).problem
    finder = prove.CoreFinder(prove.Model(problem))
    model = finder.model
    plain = z3.Solver(ctx=model.c.ctx)
    for constraint in model.c.domain_constraints():
        plain.add(constraint)
    for name, part in model.parts.items():
        plain.add(z3.Implies(z3.Bool(name, model.c.ctx), part))
    ours, theirs = finder.solver.assertions(), plain.assertions()
    assert len(ours) == len(theirs) > len(model.parts)
    assert [a.get_id() for a in ours] == [a.get_id() for a in theirs]
