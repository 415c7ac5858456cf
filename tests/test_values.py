"""Inputs that count (issue 24): values the framework accepts beyond the search's
domains, lists as the frameworks write them, cards given by their memory, and a
global batch smaller than the GPU count."""

import pytest

from kbsolve.api import load_kb
from kbsolve.cli.main import main
from kbsolve.solver.query import Query, resolve


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ---- a card given by its memory: bf16 unknown, not absent ------------------------------


def test_bf16_on_a_card_given_by_memory_is_taken_with_a_warning(capsys):
    code, out, _ = run(capsys, "estimate", "--gpus", "2x80GB", "--model", "qwen3-8b",
                       "--set", "bf16=true")
    assert code == 0 and "HW_BF16" not in out
    assert "W_BF16_UNSTATED" in out


def test_plan_on_a_card_given_by_memory_uses_bf16_only_with_consent(capsys):
    code, out, _ = run(capsys, "--gpus", "2x24GB", "--model", "qwen3-8b", "--top", "0")
    assert code == 0 and "bf16_unstated" in out.split("kept out without your consent")[1]
    code, out, _ = run(capsys, "--gpus", "2x24GB", "--model", "qwen3-8b", "--top", "0",
                       "--set", "bf16=true", "--format", "json")
    assert code == 0 and '"bf16": true' in out and "W_BF16_UNSTATED" in out


def test_a_spec_that_states_no_bf16_still_refuses_it(capsys, tmp_path):
    spec = tmp_path / "v100ish.yaml"
    spec.write_text("name: OLD-16\nmemory_gib: 15\nbf16: false\n")
    code, out, _ = run(capsys, "estimate", "--gpus", "1", "--gpu-spec", str(spec),
                       "--model", "qwen3-0.6b", "--set", "bf16=true")
    assert code == 1 and "HW_BF16" in out
    resolved = resolve(load_kb(), Query(gpus="1", gpu_spec=str(spec), model="qwen3-0.6b"))
    assert resolved.problem.facts["gpu.bf16_known"] is True
    assert resolve(load_kb(), Query(gpus="1x16GB", model="qwen3-0.6b")
                   ).problem.facts["gpu.bf16_known"] is False
