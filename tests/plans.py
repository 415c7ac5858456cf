"""The shipped KB and the plans several tests read, built once per test run.

`shipped_kb()` is the shipped KB without packs, loaded once (without the cache,
so that it is the same whatever the calling test's cache holds); `solved(query)`
is `api.solve(query, shipped_kb())`, solved once per query in a run (one
pytest-xdist worker solves it, the others read its JSON) and copied for each
caller, so that a test may change its plan without changing another's.

Tests of the solver's own determinism, of packs, or of the top-level API call
`api.solve` themselves.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from kbsolve import api


@lru_cache(maxsize=1)
def shipped_kb():
    # KBSOLVE_PATH cleared here too: test_plan.py names its items from this KB while
    # collecting, before the conftest's fixtures clear it for each test
    import os
    from unittest import mock
    with mock.patch.dict(os.environ):
        os.environ.pop("KBSOLVE_PATH", None)
        return api.load_kb(use_cache=False)


PLANS_DIR = "KBSOLVE_TEST_PLANS_DIR"  # the run's folder of solved plans (tests/conftest.py)


@lru_cache(maxsize=None)
def _solved(key: str):
    folder = os.environ.get(PLANS_DIR)
    if not folder:
        return api.solve(json.loads(key), shipped_kb())
    return shared_solve(Path(folder), key)


def shared_solve(folder: Path, key: str):
    """The run's one solve of the query `key`, shared by the run's processes (pytest-xdist
    workers each asked for the same plans, ~5 s of CPU a run): the first to ask solves it
    and writes the plan's JSON, kept only where it reads back equal to the plan; the
    others wait on the query's lock and read it."""
    import fcntl
    import hashlib

    from kbsolve.results.plan import Plan
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        stored = folder / f"{name}.json"
        if stored.exists():
            return Plan.model_validate_json(stored.read_text(encoding="utf-8"))
        plan = api.solve(json.loads(key), shipped_kb())
        text = plan.model_dump_json()
        if Plan.model_validate_json(text) == plan:
            stored.write_text(text, encoding="utf-8")
        return plan


def solved(query: dict):
    """The plan for `query` on the shipped KB: a deep copy of the run's one solve."""
    return _solved(json.dumps(query, sort_keys=True)).model_copy(deep=True)


# ---- an independent check of a golden plan -----------------------------------------
# The goldens freeze what the solver printed; these checks say the printed plan is right
# by other means: the reference evaluator (program/metrics.py) recomputes its memory and
# step time from its config, and the reference enumerator (solver/enumerate.py) finds no
# better plan among those that differ from it in one option. The whole space is far too
# big to enumerate (10^5 to 10^12 configurations); each one-option neighbourhood is the
# enumerator's exact optimum on the problem with every other option pinned to the plan.

def problem_of(query: dict):
    """The problem the solver solved for `query` (resolved again, not the solver's own)."""
    from kbsolve.program.query import Query, resolve
    return resolve(shipped_kb(), Query(**query)).problem


def chosen_of(problem, plan) -> dict:
    """The plan's printed config as the problem's values, one per option it chooses."""
    from kbsolve.plan.report import option_key, plain
    chosen = {}
    for option in problem.options:
        if option.key not in problem.choices:
            continue
        shown = plan.config[option_key(problem.kb, option)]
        values = [v for v in problem.choices[option.key] if plain(v) == shown]
        assert len(values) == 1, (option.key, shown, problem.choices[option.key])
        chosen[option.key] = values[0]
    return chosen


def check_by_reference(query: dict, plan) -> int:
    """Assert that the evaluator reproduces the plan's figures and that every one-option
    neighbourhood's enumerated optimum is the plan; returns the neighbourhoods checked."""
    import dataclasses

    from kbsolve.program.metrics import full_assignment, measure, sort_key
    from kbsolve.program.recipe import settle
    from kbsolve.plan import report
    from kbsolve.solver.enumerate import enumerate_best

    problem = problem_of(query)
    chosen = chosen_of(problem, plan)
    assignment = full_assignment(problem, chosen)
    assert report.config(problem, settle(problem, assignment)) == plan.config
    metrics = measure(problem, assignment)
    assert metrics.feasible, (metrics.broken, metrics.irrelevant_changed)
    assert plan.memory.per_gpu_gib.model_dump() == {k: report.gib(v)
                                                    for k, v in metrics.levels.items()}
    assert plan.memory.fits and plan.memory.budget_gib == report.gib(problem.budget_bytes)
    assert plan.speed.step_time_s == round(float(metrics.step_time), 6)
    assert plan.speed.terms == {k.split(".", 1)[1]: round(float(v), 6)
                                for k, v in {**metrics.times, **metrics.factors}.items()}
    return neighbourhoods_agree(problem, chosen, sort_key(metrics))


def neighbourhoods_agree(problem, chosen: dict, best: tuple) -> int:
    """Assert that the enumerator's optimum on each one-option neighbourhood of `chosen`
    (every other option pinned to it) has the sort key `best`; returns how many."""
    import dataclasses

    from kbsolve.program.metrics import sort_key
    from kbsolve.solver.enumerate import enumerate_best

    checked = 0
    for key in sorted(set(problem.choices) - set(problem.pinned)):
        others = {k: v for k, v in chosen.items() if k != key}
        around = dataclasses.replace(problem, pinned={**problem.pinned, **others})
        found = enumerate_best(around)
        assert found.status == "optimal", key  # `chosen` itself is in the neighbourhood
        assert sort_key(found.metrics) == best, (key, found.chosen[key], chosen[key])
        checked += 1
    return checked


def check_refusal_by_reference(query: dict, plan) -> int:
    """A refusal on memory prints the least GPU memory any plan within the other limits
    needs: the evaluator reproduces it on the configuration the solver found for it (no
    budget, the memory objective), and that configuration is the enumerator's optimum
    on each of its one-option neighbourhoods; returns the neighbourhoods checked."""
    import dataclasses
    from fractions import Fraction

    from kbsolve.program.metrics import full_assignment, measure, sort_key
    from kbsolve.plan import report
    from kbsolve.solver.optimize import solve

    problem = problem_of(query)
    unlimited = dataclasses.replace(problem, budget_bytes=Fraction(2) ** 80, objective="memory")
    found = solve(unlimited)
    assert found.status == "optimal", found.status
    metrics = measure(unlimited, full_assignment(unlimited, found.chosen))
    assert metrics.feasible and sort_key(metrics) == sort_key(found.metrics)
    least = report.gib(metrics.levels["device"])
    assert least > report.gib(problem.budget_bytes)  # the refusal's reason holds
    fit = [r.detail for r in plan.core if r.rule == "memory:fit"]
    assert len(fit) == 1 and f"({least:.2f} GiB with it)" in fit[0], (least, fit)
    return neighbourhoods_agree(unlimited, found.chosen, sort_key(metrics))


def defaults(problem) -> dict:
    """The problem's fixed values and each choice's default (its first value where the
    default is not among the choices): a plain assignment to measure and vary."""
    options = problem.kb.options
    return {**problem.fixed, **{k: options[k].default if options[k].default in v else v[0]
                                for k, v in problem.choices.items()}}


def prepared_search(gpus: str = "8xA100", model: str = "qwen3-8b"):
    """A prepared Search of a query over the shipped KB (tests of the search's own parts)."""
    from kbsolve.program.query import Query, resolve
    from kbsolve.solver.search import Search
    found = Search(resolve(api.load_kb(), Query(gpus=gpus, model=model)).problem)
    assert found.prepare()
    return found
