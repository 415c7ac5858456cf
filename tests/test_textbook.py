"""The memory formulas reproduce the textbook cases (ZeRO paper, mixed-precision
Adam, QLoRA), evaluated straight from the KB."""

from fractions import Fraction

import pytest

from kbsolve.dsl import load_kb
from kbsolve.dsl.ir import OptionRef
from kbsolve.solver.evaluate import Evaluator

FW = "llamafactory"


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def states_gb(kb, deepspeed, gpus=64, pure_bf16=False, params_b=7.5):
    """Model states per GPU (weights, gradients, optimizer) in decimal GB."""
    facts = {"model.params_b": Fraction(str(params_b)), "query.num_gpus": gpus}
    assignment = {o.key: o.default for o in kb.options.values() if o.framework == FW}
    assignment.update({f"{FW}.finetuning_type": "full", f"{FW}.deepspeed": deepspeed,
                       f"{FW}.pure_bf16": pure_bf16, f"{FW}.quantization_bit": Fraction(0)})
    ev = Evaluator(kb, FW, facts)
    names = ("trainable_params", "gradients", "optimizer_states")
    return float(sum(ev.run(kb.memory[f"{FW}.{n}"].expr, assignment) for n in names)) / 1e9


def test_zero_paper_7_5b_on_64_gpus(kb):
    # Rajbhandari et al. 2020, Figure 1: 120 GB baseline, 16.6 GB with P_os+g, 1.9 GB with P_os+g+p
    assert states_gb(kb, "none") == pytest.approx(120, rel=1e-9)
    assert states_gb(kb, "z2") == pytest.approx(16.64, abs=0.01)
    assert states_gb(kb, "z3") == pytest.approx(1.875, abs=0.001)


def test_mixed_precision_adam_is_16_bytes_per_parameter(kb):
    assert states_gb(kb, "none", gpus=1, params_b=1) == pytest.approx(16)
    assert states_gb(kb, "none", gpus=1, params_b=1, pure_bf16=True) == pytest.approx(8)


@pytest.mark.parametrize("double, expected", [(True, 0.516), (False, 0.5625)])
def test_qlora_bytes_per_parameter(kb, double, expected):
    let = kb.lets[f"{FW}.bytes_per_weight"]
    assignment = {f"{FW}.quantization_bit": Fraction(4), f"{FW}.double_quantization": double}
    value = Evaluator(kb, FW, {}).run(let.expr, assignment)
    assert float(value) == pytest.approx(expected)
    assert {n.option for n in _options(let.expr)} <= set(assignment)


def _options(node):
    from kbsolve.dsl.ir import walk
    return [n for n in walk(node) if isinstance(n, OptionRef)]
