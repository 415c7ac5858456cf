"""The full table output of representative plans (issue 15; issue 17 adds torchtitan): what a user
reads, line by line. KBSOLVE_REGOLD=1 rewrites the files; read every changed
line before committing it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbsolve.render import render
from plans import (check_by_reference, check_refusal_by_reference, chosen_of, neighbourhoods_agree,
                   problem_of, solved)

GOLDEN = Path(__file__).resolve().parent / "golden" / "plans"
PLANS = {
    "lora_sft_1x4090": {"gpus": "1x4090", "model": "qwen3-8b"},
    "video_grpo_8xa100": {"gpus": "8xA100", "model": "wan14b"},
    "two_nodes_70b": {"gpus": "2x8xH100", "model": "llama3-70b", "top": 0},
    "dpo_32b_8xh100": {"gpus": "8xH100", "model": "qwen3-32b", "task": "dpo", "top": 0},
    "nft_sd35_1xa100": {"gpus": "1xA100", "model": "sd3.5-medium", "task": "nft", "top": 0},
    "full_70b_refused": {"gpus": "1x4090", "model": "llama3-70b",
                         "set": ["finetuning_type=full"], "top": 0},
    "flux_torchtitan_8x8xa100": {"gpus": "8x8xA100", "model": "flux1-dev",
                                 "framework": "torchtitan", "top": 0},
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plan_table_matches_golden(name):
    text = render(solved(PLANS[name]), "table") + "\n"
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("KBSOLVE_REGOLD"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
    assert "you set" not in text.replace("unless you set it", "") or PLANS[name].get("set")
    assert " 0.00 GiB" not in text  # zero rows are hidden in the table


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plan_is_the_reference_optimum_around_it(name):
    """Each golden plan by an independent property (issue 25): the exact evaluator
    reproduces its memory and step time from its config, and the reference enumerator
    finds no better plan that differs from it in one option; for the refusal, the
    least memory it prints is the evaluator's, on a plan the enumerator agrees with."""
    plan = solved(PLANS[name])
    if plan.status == "infeasible":
        assert check_refusal_by_reference(PLANS[name], plan) >= 10
        return
    assert plan.status == "optimal"
    assert check_by_reference(PLANS[name], plan) >= 10


def test_the_reference_check_rejects_a_worse_plan():
    """The check above can fail: a feasible config one option away from the plan and
    slower than it is refused by the enumerator's neighbourhoods."""
    from kbsolve.program.metrics import full_assignment, measure, sort_key

    query = PLANS["lora_sft_1x4090"]
    plan = solved(query)
    problem = problem_of(query)
    chosen = chosen_of(problem, plan)
    best = sort_key(measure(problem, full_assignment(problem, chosen)))
    worse = None
    for key in sorted(set(problem.choices) - set(problem.pinned)):
        for value in problem.choices[key]:
            metrics = measure(problem, full_assignment(problem, {**chosen, key: value}))
            if metrics.feasible and sort_key(metrics) > best:
                worse = {**chosen, key: value}, sort_key(metrics)
                break
        if worse:
            break
    assert worse is not None
    with pytest.raises(AssertionError):
        neighbourhoods_agree(problem, *worse)
