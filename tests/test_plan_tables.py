"""The full table output of representative plans (issue 15; issue 17 adds torchtitan): what a user
reads, line by line. KBSOLVE_REGOLD=1 rewrites the files; read every changed
line before committing it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbsolve.render import render
from plans import solved

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
