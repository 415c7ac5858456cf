"""The time cut (solver/search.py CUT_ON_TIME): once there is an incumbent, a
child whose time alone loses to it is cut before its memory and other cells are
read. The tree is the one the search without the cut walks: the same nodes, the
same plan, the same tried and pruned counts at every place (the next round's
order is learned from them), also where a budget stops the search mid-tree; a
feasibility search, which reads only its memory, finds the same first plan."""

from __future__ import annotations

import math

import pytest

from kbsolve import api
from kbsolve.program.query import Query, resolve
from kbsolve.solver import search as search_module
from kbsolve.solver.search import Search

# The cut takes 76 % of the pytorch query's children, 17 % of the LlamaFactory one's
# (its tree is checked under -m slow: ~1 s of CPU). LlamaFactory's own order (reads
# first) walks ~520 nodes; in the lifts' order (READS_FIRST out of reach) its tree has
# ~4k, which the cut must walk alike as well.
QUERIES = [
    ({"gpus": "8xH100", "model": "qwen3-0.6b", "framework": "pytorch"}, None),
    pytest.param({"gpus": "1xT4", "model": "qwen3-8b"}, 2.0, marks=pytest.mark.slow),
]


@pytest.fixture(scope="module")
def kb():
    return api.load_kb()


def _walks(kb, fields, cut: bool, monkeypatch) -> list:
    monkeypatch.setattr(search_module, "CUT_ON_TIME", cut)
    cuts = []
    beyond = search_module._beyond

    def counted(low, ceiling):
        found = beyond(low, ceiling)
        cuts.append(found)
        return found

    monkeypatch.setattr(search_module, "_beyond", counted)
    search = Search(resolve(kb, Query(**fields)).problem)
    assert search.prepare()
    found, state = search._round(None, None, 400, False, math.inf)  # stopped mid-tree
    walks = [(found.status, found.nodes, found.chosen, state.tried, state.pruned)]
    inner = search._round
    rounds = []

    def kept(*args):
        found, state = inner(*args)
        rounds.append((found.status, found.nodes, found.chosen, state.tried, state.pruned))
        return found, state

    search._round = kept
    found = search.run()  # the optimisation, in its own order, to the end
    del search._round
    walks += rounds
    key = sorted(search.p.choices)[0]
    value = next(v for v in search.p.choices[key] if v != found.chosen[key])
    for first, budget in ((True, 2_000), (False, 500)):  # explanations' searches
        held = search.run(start=found.chosen, fixed={key: value}, budget=budget, first=first)
        walks.append((held.status, held.nodes, held.chosen))
    return walks, sum(cuts)


@pytest.mark.parametrize("fields,reads_first", QUERIES, ids=["pytorch", "llamafactory"])
def test_the_time_cut_walks_the_tree_the_search_without_it_walks(kb, fields, reads_first,
                                                                  monkeypatch):
    if reads_first is not None:
        monkeypatch.setattr(search_module, "READS_FIRST", reads_first)
    plain, none = _walks(kb, fields, False, monkeypatch)
    cut, some = _walks(kb, fields, True, monkeypatch)
    assert none == 0 and some > 100  # the cut was taken, often
    assert plain[0][0] == "budget" and plain[1][0] == "optimal"
    assert plain[1][1] > 2_000  # a tree, not a few nodes
    assert cut == plain
