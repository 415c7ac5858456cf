"""Flow-Factory's own example configs (read in place from ../shared/examples):
each is estimated by kbsolve, and the rules it breaks are exactly the ones the
fact sheet documents."""

from __future__ import annotations

import pytest

from kbsolve import api
from flowfactory_examples import example_query
from plans import shipped_kb
from shared_data import needs_shared, shared_dir, shared_path

pytestmark = needs_shared  # every test here reads the examples
ROOT = shared_path("examples", "flow-factory")
EXAMPLES = sorted(p for p in ROOT.glob("**/*.yaml")
                  if "config" not in p.relative_to(ROOT).parts[:1]
                  and p.name != "fsdp2_wan.yaml") if ROOT else []
# Fact sheet R17: the Wan2.2 LoRA examples pair ZeRO-2 with both experts. R11: the
# async template runs 6 ranks with M = 64 under the forced group_contiguous sampler.
BROKEN = {"examples/grpo/lora/wan22/t2v.yaml": {"R17"},
          "examples/grpo/lora/wan22/i2v.yaml": {"R17"},
          "examples/template/sd3_5/async_reward.yaml": {"R11_CONTIGUOUS"},
          # fact sheet section 4: the repository's guidance offloads samples for video
          "multinode_examples/train.yaml": {"VIDEO_OFFLOAD"}}


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def test_the_examples_are_here():
    assert ROOT is not None, "../shared has no examples/flow-factory"
    assert len(EXAMPLES) > 50


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_breaks_only_documented_rules(kb, path):
    query, config, skipped = example_query(kb, str(path))
    assert all(s.startswith("model.target_modules=") for s in skipped), skipped
    estimate = api.estimate(query, config, kb)
    broken = {r.rule.split(".")[-1] for r in estimate.broken}
    assert broken == BROKEN.get(str(path.relative_to(ROOT)), set())


def test_wan22_lora_example_is_fixed_by_the_solver(kb):
    path = shared_dir("examples", "flow-factory", "examples/grpo/lora/wan22/t2v.yaml")
    query, _, _ = example_query(kb, str(path))
    plan = api.solve({**query, "set": ["target_components=both"]}, kb)
    assert plan.status in ("optimal", "feasible")
    chosen = {c.option: c.value for c in plan.explanation}
    assert chosen["deepspeed"] == "none" and chosen["fsdp"] != "fsdp2"
