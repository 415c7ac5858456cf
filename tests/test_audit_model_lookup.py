"""A config value that looks like a home path of no user ('~:/x', '~nosuchuser/x') is no
local model folder and never a traceback (pathlib's expanduser raises for it)."""

from __future__ import annotations

import pytest

from kbsolve import api


@pytest.mark.parametrize("value", ["~:/.cache/models/x", "~nosuchuser-kbsolve/qwen"])
def test_a_home_path_of_no_user_is_not_a_model_folder(tmp_path, value):
    config = tmp_path / "train.yaml"
    config.write_text(f"model_name_or_path: {value}\nstage: sft\ndo_train: true\n"
                      "finetuning_type: lora\ndataset: alpaca_en_demo\ntemplate: qwen\n"
                      "output_dir: saves/x\n")
    report, _ = api.audit(str(config), "1xH100")
    assert len(report.units) == 1 and report.units[0].fit.status != "oom"
