"""bench/explain_quality.py counts what a change did to the decisive comparisons."""

from __future__ import annotations

import json

from bench.explain_quality import compare


def _dump(detail: str, alternatives: list[float], config: dict | None = None) -> dict:
    plan = {"status": "optimal", "config": config or {"a": 1},
            "explanation": [{"option": "x", "reasons": [{"detail": detail}]}],
            "alternatives": [{"speed_delta_pct": p} for p in alternatives]}
    return {"--gpus 1xA100 --model m": {"exit": 0, "stdout": json.dumps(plan)}}


FOUND = ("x=2 fits only with other changes; the best plan found with it (y=1) "
         "is 5.6% slower")
PROVEN = "x=2 fits only with other changes; the best plan with it (y=3) is as fast"


def test_a_proven_closer_rival_and_a_better_runner_up_are_counted():
    counts = compare(_dump(FOUND, [5.6]), _dump(PROVEN, [0.4]))
    assert counts == {"plans changed": 0, "found->proven": 1, "closer": 1,
                      "runner-up better": 1}


def test_a_changed_plan_and_a_farther_rival_are_counted():
    counts = compare(_dump(PROVEN, [0.4]), _dump(FOUND, [5.6], {"a": 2}))
    assert counts == {"plans changed": 1, "proven->found": 1, "farther": 1,
                      "runner-up worse": 1}
