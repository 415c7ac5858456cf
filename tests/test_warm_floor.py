"""bench/warm_floor.py splits a warm plan's CPU by phase and bounds it from below."""

from __future__ import annotations

from bench import warm_floor
from kbsolve.plan import explain, run
from kbsolve.solver import search


def test_the_floor_is_the_setup_plus_every_node_at_the_least_rate():
    cpu = {"setup": 0.020, "main": 0.050, "decisive": 0.030, "clash": 0.002}
    nodes = {"main": 400, "decisive": 1500, "clash": 50}  # clash: too few nodes for a rate
    least = 0.030 / 1500
    assert warm_floor._floor(cpu, nodes) == 0.020 + least * 1950


def test_one_plan_is_split_into_phases_that_add_up_to_less_than_its_cpu():
    originals = (search.Search.__init__, search.Search.run, search.Search.clash,
                 explain._decisive, run._refused)
    rows: list = []
    figures = warm_floor.measure(plans=1, listing=rows)
    (fields, status, total, cpu, nodes, floor), = rows
    assert (fields, status) == ({"gpus": "8xA100", "model": "qwen3-8b"}, "optimal")
    assert nodes["main"] > 0 and nodes["decisive"] > 0  # an explained LLM plan
    phases = cpu["setup"] + sum(cpu.get(p, 0.0) for p in warm_floor.PHASES)
    assert 0 < phases <= total
    assert 0 < floor < total
    assert figures["plans"] == 1 and figures["floor_median_ms"] == round(floor * 1000, 1)
    # the wrapped functions are put back
    assert (search.Search.__init__, search.Search.run, search.Search.clash,
            explain._decisive, run._refused) == originals
