"""Fixes for refused queries (solver/fixes.py): the checks that settle the consent
MaxSAT without asking it give its answers, equal optima come in name order, and
the memory sums every back end compiles are one definition (program.summed_terms)."""

from __future__ import annotations

import json

import pytest
import z3

from kbsolve.program.program import link, summed_terms
from kbsolve.program.query import Query, resolve
from kbsolve.solver import fixes
from kbsolve.solver.optimize import solve
from kbsolve.solver.prove import Model
import refusals
from plans import shipped_kb


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def refused(kb):
    """refused(**fields): the query's refusal, solved once per module (several tests
    take the same refusal apart; none changes its outcome, and the answers they check
    do not depend on the checks run before on its model)."""
    outcomes = {}

    def refusal(**fields):
        key = json.dumps(fields, sort_keys=True)
        if key not in outcomes:
            outcome = solve(resolve(kb, Query(**fields)).problem)
            assert outcome.status == "infeasible" and outcome.model is not None
            outcomes[key] = outcome
        return outcomes[key]
    return refusal


@pytest.fixture(scope="module")
def refused_70b():
    """The problem of the refusal that several tests take apart (1x4090 llama3-70b);
    each test builds its own Model (and core finder) on it."""
    return refusals.problem(gpus="1x4090", model="llama3-70b")


def consent_of(model):
    optin_of = model.p.program.optin_of
    return {name: part for name, part in model.parts.items()
            if name.startswith("rule:") and optin_of(name[5:]) is not None}


def pins_of(model):
    return {name: part for name, part in model.parts.items() if name.startswith("pin:")}


@pytest.mark.parametrize("fields", [
    {"gpus": "1x4090", "model": "llama3-70b"},  # one rule alone: quantization
    {"gpus": "1x4090", "model": "qwen3-30b-a3b"},  # two rules alone, equal optima
], ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_consent_fixes_are_the_maxsats(refused, fields):
    outcome = refused(**fields)
    checked = fixes._drops(outcome.model, consent_of(outcome.model), outcome.core)
    asked, _ = refusals.consent_drops(fields, outcome.core)  # on a context of its own
    assert checked and sorted(checked) == sorted(asked)


def test_equal_consent_fixes_come_in_name_order(refused):
    outcome = refused(gpus="1x4090", model="qwen3-30b-a3b")
    found = fixes.allow_optins(outcome.model, outcome.core)
    assert [f.allow for f in found] == [["ktransformers"], ["quantization"]]


def test_pin_fixes_are_the_maxsats_in_name_order(refused):
    outcome = refused(gpus="8xA100", model="qwen3-8b",
                      set=["use_unsloth=true", "deepspeed=z3"])
    found = fixes.drop_pins(outcome.model)
    fresh = Model(outcome.model.p)
    asked = [[fixes._pin_text(fresh.p, n) for n in d]
             for d in fixes._smallest_drops(fresh, pins_of(fresh))]
    assert [f.drop for f in found] == [["deepspeed=z3"], ["use_unsloth=true"]]
    assert sorted(asked) == [f.drop for f in found]


def test_no_pin_fix_when_the_rest_clashes_without_pins(refused):
    outcome = refused(gpus="1x4090", model="llama3-70b", set=["finetuning_type=full"])
    assert fixes.drop_pins(outcome.model) == []
    fresh = Model(outcome.model.p)
    assert pins_of(fresh) and fixes._smallest_drops(fresh, pins_of(fresh)) == []


def test_a_memory_sum_adds_the_programs_terms_in_key_order(kb):
    for framework in kb.frameworks:
        memory = link(kb, framework).memory
        for level in {t.level for t in memory}:
            terms = summed_terms(kb, framework, level)
            assert terms == tuple(t for t in memory
                                  if t.level == level and t.location == "gpu")
            keys = [f"{t.framework}.{t.name}" for t in terms]
            assert keys == sorted(keys)


def test_the_cores_guess_saves_checks_and_never_changes_the_core():
    fields = {"gpus": "1x4090", "model": "llama3-70b"}
    (core, checks), (guessed, fewer) = (refusals.counted_clash(fields, likely=likely)
                                        for likely in (False, True))
    assert core == guessed == ["memory:fit", "memory:host_fit",
                               "rule:llamafactory.ALLOW_quantization"]
    assert fewer < checks


@pytest.mark.parametrize("fields", [
    {"gpus": "1x4090", "model": "llama3-70b"},  # one consent rule in the core
    {"gpus": "1x4090", "model": "qwen3-30b-a3b"},  # two
], ids=lambda f: f"{f['gpus']}-{f['model']}")
def test_a_run_of_consent_rules_deleted_at_once_gives_the_plain_deletions_core(fields):
    """Deleting a run of consent rules as a whole (halves where a part is needed) gives
    the core that one deletion check per part gives from the same first core."""
    (ungrouped, singly), (core, grouped_checks) = (
        refusals.counted_clash(fields, likely=True, grouped=grouped) for grouped in (False, True))
    _, plain = refusals.plain_deletion(**fields)
    assert core == ungrouped == plain and set(core) & set(refusals.consent(**fields))
    if fields["model"] == "llama3-70b":  # one needed rule in a run of ten: halves pay
        assert grouped_checks < singly


def test_a_sat_checks_model_answers_later_checks_it_satisfies_as_z3_would(refused_70b):
    """The refusal's core and consent fixes with witnesses (the models of earlier sat
    checks) equal those without, with fewer Z3 checks; each answer a witness gave is
    the one a fresh solver gives."""
    from kbsolve.solver import prove
    problem = refused_70b
    runs = []
    for use_witnesses in (False, True):
        model = Model(problem)
        finder = prove.core_finder(model)
        checks, check, witnessed = [0], finder.solver.check, finder._witnessed
        given: list = []

        def counted(*args, check=check, checks=checks):
            checks[0] += 1
            return check(*args)

        def recorded(names, witnessed=witnessed, given=given, use=use_witnesses):
            found = use and witnessed(names)
            if found:
                given.append(list(names))
            return found
        finder.solver.check, finder._witnessed = counted, recorded
        core = prove.minimal_core(model)
        runs.append((core, fixes.allow_optins(model, core), checks[0], given))
    (core, fixed, plain, _), (core_w, fixed_w, fewer, given) = runs
    assert core == core_w and fixed == fixed_w and fixed
    assert given and fewer == plain - len(given)
    fresh = prove.CoreFinder(Model(problem))
    for names in given:
        assert fresh.solver.check([fresh.marks[n] for n in names]) == z3.sat


def test_a_witness_answers_no_check_with_an_extra_assumption(refused):
    """A kept model answers only for the parts: with an extra assumption (an
    explanation's or the KB check's question), which it need not meet, Z3 is asked."""
    from kbsolve.solver import prove
    model = refused(gpus="1x4090", model="llama3-70b").model
    finder = prove.CoreFinder(model)
    consent = tuple(consent_of(model))
    names = [n for n in finder.marks if n not in consent]
    assert finder.check(without=consent) == z3.sat and finder._witnessed(names)
    chosen = model.c.decode(finder.witnesses[0][0])
    key = next(k for k, v in model.p.choices.items() if len(v) > 1)
    checks, check = [0], finder.solver.check

    def counted(*args):
        checks[0] += 1
        return check(*args)
    finder.solver.check = counted
    assert finder.check(without=consent) == z3.sat and checks[0] == 0
    finder._holds(names, [z3.Not(model.c.equals(key, chosen[key]))])
    assert checks[0] == 1


def test_a_check_holding_a_known_clash_is_unsat_as_z3_says(refused_70b):
    """After the refusal's minimal core, a pin fix's check keeps every part of the core
    (the core holds no pin): unsat without asking Z3, and a fresh solver agrees."""
    from kbsolve.solver import prove
    problem = refused_70b
    model = Model(problem)
    finder = prove.core_finder(model)
    core = prove.minimal_core(model)
    pins = sorted(pins_of(model))
    assert pins and not set(pins) & set(core)
    checks, check = [0], finder.solver.check

    def counted(*args):
        checks[0] += 1
        return check(*args)
    finder.solver.check = counted
    assert fixes.drop_pins(model) == [] and checks[0] == 0
    fresh = prove.CoreFinder(Model(problem))
    for pin in pins:
        assert fresh.check(without=(pin,)) == z3.unsat
    assert fresh.check(without=tuple(pins)) == z3.unsat
