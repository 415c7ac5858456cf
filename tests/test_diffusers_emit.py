"""The DSL pieces the diffusers framework brought: an `args` file (a script's
command-line flags as a bash array), a framework's `tier` (which trainer plans a
query that names none) and the refusal of a model a framework cannot train."""

from __future__ import annotations

import pytest

from kbsolve import api
from kbsolve.diagnostics import KbError
from kbsolve.plan.emit import _flags, fill_launch
from plans import shipped_kb


def test_flags_follow_argparse_conventions():
    lines = _flags("flags", {"rank": 4, "gradient_checkpointing": True, "cache_latents": False,
                             "lora_layers": None, "instance_prompt": "a photo of sks dog",
                             "learning_rate": 0.0001, "ids": ["a", "b c"]})
    assert lines == ["flags=(", "  --rank 4", "  --gradient_checkpointing",
                     "  --instance_prompt 'a photo of sks dog'", "  --learning_rate 0.0001",
                     "  --ids a 'b c'", ")"]


def test_an_args_file_is_its_array_in_the_launch_line():
    kb = shipped_kb()
    framework = kb.frameworks["diffusers"]
    filled = fill_launch(kb, framework, "accelerate launch --config_file {accelerate} {SCRIPT} {flags}")
    assert filled == 'accelerate launch --config_file accelerate_config.yaml "$SCRIPT" "${flags[@]}"'


def test_a_second_trainer_of_a_kind_plans_only_when_named():
    kb = shipped_kb()
    assert kb.frameworks["diffusers"].tier == 2 and kb.frameworks["flow-factory"].tier == 1
    plan = api.solve({"gpus": "1xH100", "model": "flux1-dev", "top": 0}, kb)
    assert plan.framework == "flow-factory"


def test_an_llm_for_diffusers_names_the_frameworks_that_train_it():
    with pytest.raises(KbError) as error:
        api.estimate({"gpus": "1x4090", "model": "qwen3-8b", "framework": "diffusers"}, {},
                     shipped_kb())
    diagnostic = error.value.diagnostics[0]
    assert "--framework diffusers trains diffusion models" in diagnostic.message
    assert "llamafactory" in diagnostic.hint and "pytorch" in diagnostic.hint
    assert "diffusers" not in diagnostic.hint
