"""--network is read by every framework that trains on several nodes: the step time
prices traffic across nodes at the network's share per GPU, `--set
inter_node_gbps=N` is the same input, and a warning about a missing network
appears only when none was given (issue 24)."""

from __future__ import annotations

import pytest

from kbsolve import api
from plans import shipped_kb

# framework -> (query on two nodes, a configuration whose collectives cross them)
CASES = {
    "llamafactory": ({"gpus": "2x8xH100", "model": "llama3-8b"},
                     {"finetuning_type": "full", "deepspeed": "z3"}),
    "pytorch": ({"gpus": "2x8xH100", "model": "qwen3-8b", "framework": "pytorch"},
                {"method": "full", "sharding": "fsdp"}),
    "flow-factory": ({"gpus": "2x8xA100", "model": "wan14b"}, {}),
    "torchtitan": ({"gpus": "2x8xH100", "model": "flux1-dev", "framework": "torchtitan"}, {}),
}
MISSING = {"W_NO_NETWORK", "W_INTER_NODE_BANDWIDTH"}


def _estimate(query: dict, config: dict, network: str | None = None):
    return api.estimate({**query, "network": network} if network else query, config,
                        shipped_kb())


@pytest.mark.parametrize("framework", sorted(CASES))
def test_the_network_sets_the_speed_across_nodes(framework):
    query, config = CASES[framework]
    slow, fast = _estimate(query, config, "ib-200"), _estimate(query, config, "ib-8x400")
    assert slow.speed.step_time_s > 1.2 * fast.speed.step_time_s
    for given in (slow, fast):
        assert not MISSING & {w.id for w in given.warnings}
        assert not any("no network" in w.because for w in given.warnings)
    assert MISSING & {w.id for w in _estimate(query, config).warnings}


def test_set_inter_node_gbps_is_the_network_flag():
    query, config = CASES["llamafactory"]
    by_flag = _estimate(query, config, "ib-400")
    by_set = _estimate(query, {**config, "inter_node_gbps": "400"})
    assert by_set.speed.step_time_s == by_flag.speed.step_time_s
    assert any("taken as --network" in note for note in by_set.notes)
    with pytest.raises(api.KbError, match="follows --network, which gives 400"):
        _estimate(query, {**config, "inter_node_gbps": "200"}, "ib-400")
