"""Flow-Factory plans keep each trainer's shipped example recipe (issue 24): dynamics,
steps per epoch, group size, learning rate, guidance, EMA and the evaluation shape,
marked for review; nothing of it changes without consent."""

import pytest

from plans import solved


def _plan(model: str, task: str, gpus: str = "8xH100"):
    plan = solved({"gpus": gpus, "model": model, "task": task, "top": 0})
    assert plan.status == "optimal", plan.core
    return plan


def _kind(plan, name: str) -> str:
    return next(c.kind for c in plan.explanation if c.option == name)


def _config(plan) -> dict:
    """The plan's values by option name (the config is keyed by the framework's keys)."""
    return {c.option: plan.config[c.key] for c in plan.explanation if c.key in plan.config}


@pytest.mark.parametrize("task, ema, steps", [("nft", 0.5, 1), ("awm", 0.3, 1)])
def test_nft_and_awm_keep_their_examples_recipe(task, ema, steps):
    plan = _plan("sd3.5-medium", task)
    config = _config(plan)
    assert config["dynamics_type"] == "ODE" and config["gradient_step_per_epoch"] == steps
    assert config["group_size"] == 16 and config["learning_rate"] == pytest.approx(3e-4)
    assert config["ema_decay"] == pytest.approx(ema) and config["ema_update_interval"] == 1
    assert config["eval_height"] == config["height"] and config["eval_width"] == config["width"]
    assert _kind(plan, "learning_rate") == "recipe" and _kind(plan, "ema_decay") == "recipe"


def test_dpo_keeps_its_group_of_four_and_small_learning_rate():
    config = _config(_plan("sd3.5-medium", "dpo"))
    assert config["group_size"] == 4 and config["dynamics_type"] == "ODE"
    assert config["learning_rate"] == pytest.approx(1e-5)
    assert config["guidance_scale"] == pytest.approx(1.0)


def test_flux2_grpo_keeps_the_group_of_sixteen():
    plan = _plan("flux2-dev", "grpo")
    assert _config(plan)["group_size"] == 16
    assert _kind(plan, "group_size") != "memory"
