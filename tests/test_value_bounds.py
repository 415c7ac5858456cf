"""The explanation's per-value answers read from the search's tables (solver/bounds.py)
and the Z3 core's deletion (solver/prove.CoreFinder): each shortcut must give the
answer the full question gives."""

from __future__ import annotations

from fractions import Fraction

import pytest
import z3

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.solver.bounds import ValueBounds
from kbsolve.solver.prove import Model
from kbsolve.solver.search import Search
import refusals


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


@pytest.fixture(scope="module")
def qwen(kb):
    search = Search(resolve(kb, Query(gpus="8xA100", model="qwen3-8b")).problem)
    assert search.prepare()
    return search


def _allowed_pairs(search):
    p = search.p
    for axis, key in enumerate(search.keys):
        if key in p.pinned:
            continue
        for index, value in enumerate(p.choices[key]):
            if search.allowed[axis][index]:
                yield key, value


def test_a_refuted_value_gets_the_answer_the_searches_give(qwen):
    """For every value the bound refutes, the searches (the first, and the narrowed one
    after it) find no plan either; where the budgets refute it, search.clash names the
    same parts with the bound as without; where a rule does, clash names that rule (one
    that reads the option), which the searches alone, finding no plan, cannot name (they
    fell back to memory). Some value is refuted by a rule the option's tables alone
    cannot show (arc consistency keeps it): per_device_train_batch_size=16 on 8 GPUs
    breaks GLOBAL_BATCH's 64 whatever the accumulation."""
    bounds = ValueBounds(qwen)
    start = qwen.run().chosen
    refuted = {(k, v): bounds.refuted(k, v) for k, v in _allowed_pairs(qwen)}
    refuted = {pair: why for pair, why in refuted.items() if why}
    assert refuted
    for (key, value), why in refuted.items():
        with_bound = qwen.clash(key, value, start, 20_000, bounds.refuted)
        searched = qwen.clash(key, value, start, 20_000, None)
        assert searched not in (None, "budget"), (key, value)
        if why is True:
            assert with_bound == searched, (key, value)
        else:
            assert with_bound == [why] and key in qwen.rule_options(why), (key, value, why)
    batch = ("llamafactory.per_device_train_batch_size", Fraction(16))
    assert refuted.get(batch) == "rule:llamafactory.GLOBAL_BATCH" and not bounds.overflows(*batch)


def test_a_value_some_plan_has_is_never_refuted(qwen):
    """Every value of the optimal plan, and of a plan found with each other value,
    stays open: the bound is sound."""
    bounds = ValueBounds(qwen)
    found = qwen.run()
    assert found.chosen
    assert not any(bounds.refuted(k, v) for k, v in found.chosen.items() if k in qwen.keys)
    for key, value in list(_allowed_pairs(qwen))[::3]:
        plan = qwen.run(fixed={key: value}, first=True, budget=2_000)
        if plan.chosen is not None:
            assert not bounds.refuted(key, value), (key, value)


def test_core_deletion_skips_only_checks_it_knows_the_answer_of():
    """The core with checks skipped where an earlier check's core decides equals plain
    deletion (one check per part) from the same first core, on a fresh solver
    (tests/refusals.py: a fresh finder's clash, and the reference from Z3's first core)."""
    fields = {"gpus": "1x4090", "model": "llama3-70b"}
    core, checks = refusals.counted_clash(fields)
    assert core and "memory:fit" in core
    first, plain = refusals.plain_deletion(**fields)
    assert plain == core
    assert checks < 1 + len(first)  # some deletion answered by an earlier check's core


def test_no_consent_fix_is_searched_for_where_the_core_holds_no_consent_rule(kb):
    """405B on a 4090 is refused for memory alone: the MaxSAT over consent rules keeps
    the core's parts and finds nothing, which the core says without asking it."""
    from kbsolve.solver.fixes import allow_optins, drop_pins
    from kbsolve.solver.prove import minimal_core
    problem = resolve(kb, Query(gpus="1x4090", model="llama3.1-405b")).problem
    model = Model(problem)
    core = minimal_core(model)
    assert core and not any(part.startswith(("rule:", "pin:")) for part in core)
    assert drop_pins(model) == []
    assert allow_optins(model, core) == allow_optins(model) == []


def test_no_second_consent_fix_is_searched_for_once_the_core_s_consent_rules_are_kept():
    """70B on a 4090: the first consent fix drops ALLOW_quantization alone, so the next
    must keep it; the core (memory, host RAM and that rule) then still clashes, and the
    answer is the one the second MaxSAT gives, without asking it (tests/refusals.py: the
    MaxSAT on a fresh Model, with the reference core and without)."""
    fields = {"gpus": "1x4090", "model": "llama3-70b"}
    _, core = refusals.plain_deletion(**fields)
    assert "rule:llamafactory.ALLOW_quantization" in core
    assert all(n.startswith("rule:llamafactory.ALLOW_") for n in refusals.consent(**fields))
    with_core, calls = refusals.consent_drops(fields, core)
    without, asked = refusals.consent_drops(fields)
    assert with_core == without == [["rule:llamafactory.ALLOW_quantization"]]
    assert calls == 1 and asked == 2  # the plain MaxSAT asks a second, unsatisfiable one


@pytest.mark.parametrize("gpus,model", [("1x4090", "llama3-70b"), ("2x8xRTX-4090", "llama3-70b"),
                                        ("2x4090", "qwen3-32b"), ("4xRTX-4090", "qwen3-32b")])
def test_a_feasibility_search_without_the_objective_tables_answers_as_the_full_search(
        kb, gpus, model):
    """The hardware fixes' candidates are decided by a search that builds no time or
    preference tables (solver/feasible.py): whether a plan exists is the same, and the
    plan it finds meets every rule and fits."""
    from kbsolve.solver.feasible import FeasibilitySearch
    problem = resolve(kb, Query(gpus=gpus, model=model)).problem
    full = Search(problem).run(first=True, budget=20_000)
    light = FeasibilitySearch(problem).run(first=True, budget=20_000)
    refused = gpus in ("1x4090", "2x4090")
    decided = "infeasible" if refused else "optimal"  # decided within the budget
    assert full.status == light.status == decided
    assert (full.chosen is None) == (light.chosen is None) == refused
    if light.chosen is not None:
        assert light.metrics.feasible and not light.metrics.broken


def test_a_feasibility_search_in_the_reads_order_answers_as_in_the_spreads_order(kb):
    """FeasibilitySearch orders the options the most memory terms read first; over a
    refusal's hardware candidates (fits and misfits) it answers as the spreads' order,
    in fewer nodes all told."""
    from kbsolve.plan.run import _bigger
    from kbsolve.solver.feasible import FeasibilitySearch

    class SpreadsOrder(FeasibilitySearch):
        def _plan_order(self, allowed, by_reads=False):
            return Search._plan_order(self, allowed)

    answers, nodes = {}, {}
    for gpus, build in _bigger(kb, resolve(kb, Query(gpus="1x4090", model="llama3-70b")))[:5]:
        problem = build()
        for kind in (FeasibilitySearch, SpreadsOrder):
            found = kind(problem).run(first=True, budget=20_000)
            assert found.status != "budget"
            answers.setdefault(gpus, set()).add(found.chosen is not None)
            nodes[kind] = nodes.get(kind, 0) + found.nodes
    assert all(len(a) == 1 for a in answers.values())
    assert {True, False} <= set().union(*answers.values())
    assert nodes[FeasibilitySearch] < nodes[SpreadsOrder]


def test_a_table_is_masked_once_for_all_its_axes(qwen, monkeypatch):
    """The budgets' walk over every allowed value masks each table it reads once,
    whichever of its axes is asked for, and each table's per-value ranges are those
    masked afresh for that axis."""
    from kbsolve.program.tables import Table
    from kbsolve.solver import bounds as bounds_module
    made = []
    real = bounds_module._masked

    def counted(cell, allowed):
        made.append(id(cell))
        return real(cell, allowed)
    monkeypatch.setattr(bounds_module, "_masked", counted)
    bounds = ValueBounds(qwen)
    for key, value in _allowed_pairs(qwen):
        bounds.overflows(key, value)
    axes = {}
    for table_id, axis in bounds._per_value:
        axes.setdefault(table_id, set()).add(axis)
    assert any(len(found) > 1 for found in axes.values())  # some table read on two axes
    assert sorted(made) == sorted(axes)  # one masking per table
    tables: dict = {}
    for cell in qwen.tracked:
        if isinstance(cell, Table):
            tables[id(cell)] = cell
        else:
            cell.tables(tables)
    for (table_id, axis), found in bounds._per_value.items():
        afresh = bounds_module._per_value(tables[table_id], axis,
                                          real(tables[table_id], qwen.allowed))
        assert found == afresh
