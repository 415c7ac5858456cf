"""A feasibility search (solver/feasible.py) sets the options with one value left
after the open ones: a hardware candidate's answer is the one the optimisation's
order (single values first) gives, in fewer nodes where the shape fits nothing."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.plan.run import _bigger
from kbsolve.program.query import Query, resolve
from kbsolve.solver.feasible import FeasibilitySearch
from kbsolve.solver.search import Search


class SinglesFirst(FeasibilitySearch):
    """The reads order as the optimisation makes it: single values first."""

    def _plan_order(self, allowed, by_reads=False):
        return Search._plan_order(self, allowed, by_reads=True)


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _candidates(kb, gpus: str, model: str, count: int) -> list:
    return [(shape, build()) for shape, build in
            _bigger(kb, resolve(kb, Query(gpus=gpus, model=model)))[:count]]


def test_single_values_come_after_the_open_options(kb):
    (_, problem), = _candidates(kb, "1x4090", "llama3.1-405b", 1)
    search = FeasibilitySearch(problem)
    assert search.prepare()
    sizes = [int(search.allowed[a].sum()) for a in search.axes]
    first_single = sizes.index(1)
    assert first_single > 0 and all(n > 1 for n in sizes[:first_single])
    assert all(n == 1 for n in sizes[first_single:])
    assert sorted(search.axes) == list(range(len(search.keys)))


@pytest.mark.parametrize("gpus,model,count", [("1x4090", "llama3-70b", 5),
                                              ("1x4090", "llama3.1-405b", 4)])
def test_a_candidate_answers_as_in_the_single_values_first_order(kb, gpus, model, count):
    nodes = {FeasibilitySearch: 0, SinglesFirst: 0}
    answers = []
    for shape, problem in _candidates(kb, gpus, model, count):
        found = {kind: kind(problem).run(first=True, budget=20_000) for kind in nodes}
        assert {f.status for f in found.values()} <= {"optimal", "infeasible"}
        fits = {f.chosen is not None for f in found.values()}
        assert len(fits) == 1, shape
        answers.append(fits.pop())
        if not answers[-1]:
            assert found[FeasibilitySearch].nodes < found[SinglesFirst].nodes, shape
        else:
            assert found[FeasibilitySearch].metrics.feasible
        for kind, f in found.items():
            nodes[kind] += f.nodes
    assert False in answers and (True in answers) == (model == "llama3-70b")
    assert nodes[FeasibilitySearch] < nodes[SinglesFirst]
