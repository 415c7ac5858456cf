"""The memory formulas reproduce the textbook cases (ZeRO paper, mixed-precision
Adam, QLoRA), evaluated straight from the KB."""

from fractions import Fraction

import pytest

from kbsolve.catalog import load_kb
from kbsolve.dsl.ir import OptionRef
from kbsolve.program.evaluate import Evaluator

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


# ---- Megatron-style parallelism (kb/core/parallel.kb through the pytorch framework)

PT = "pytorch"


def pytorch_eval(kb, model="llama3-8b", gpus=8, seq_len=2048, **options):
    """Evaluate pytorch lets, memory and speed terms for one config on one catalog model."""
    from kbsolve.program.facts import collect_facts
    facts = collect_facts(kb, kb.catalog.gpu("H100"), kb.catalog.model(model),
                          {"num_gpus": gpus, "nodes": 1, "gpus_per_node": gpus,
                           "seq_len": seq_len, "headroom_pct": 0})
    assignment = {o.key: o.default for o in kb.options.values() if o.framework == PT}
    assignment.update({f"{PT}.{k}": Fraction(v) if isinstance(v, int) and not isinstance(v, bool)
                       else v for k, v in options.items()})
    ev = Evaluator(kb, PT, facts)

    def value(table, name):
        key = f"{PT}.{name}" if f"{PT}.{name}" in table else f"core.{name}"
        return ev.run(table[key].expr, assignment)
    return value


def test_tp8_divides_weights_by_8(kb):
    one = pytorch_eval(kb, method="full", tp=1)
    eight = pytorch_eval(kb, method="full", tp=8)
    assert eight(kb.lets, "model_share") == Fraction(1, 8)
    for term in ("trainable_weights", "gradients", "optimizer_states"):
        assert eight(kb.memory, term) * 8 == one(kb.memory, term)


def test_pp_stage_holds_its_layers_and_one_vocabulary_matrix(kb):
    value = pytorch_eval(kb, method="full", pp=4)
    params = kb_params(kb, "llama3-8b")
    model = kb.catalog.model("llama3-8b")
    embeddings = 2 * model.vocab * model.hidden
    expected = Fraction(params - embeddings, 4) + model.vocab * model.hidden
    assert float(value(kb.lets, "model_share") * params) == pytest.approx(expected, rel=1e-9)


def test_expert_parallel_splits_only_the_experts(kb):
    dense_part = pytorch_eval(kb, model="qwen3-30b-a3b", ep=1)(kb.lets, "model_share")
    split = pytorch_eval(kb, model="qwen3-30b-a3b", ep=8)(kb.lets, "model_share")
    assert Fraction(1, 8) < split < dense_part == 1


def test_tp_activations_follow_korthikanti(kb):
    # Korthikanti et al. 2022: sequence parallelism divides all activations by t; without it
    # the layer norms' inputs and outputs stay replicated.
    base = dict(method="full", gradient_checkpointing="none", micro_batch=1)
    one = pytorch_eval(kb, **base)(kb.memory, "activations")
    with_sp = pytorch_eval(kb, tp=8, sp=True, **base)(kb.memory, "activations")
    without_sp = pytorch_eval(kb, tp=8, sp=False, **base)(kb.memory, "activations")
    assert with_sp * 8 == one
    assert one / 8 < without_sp < one / 2


def test_1f1b_first_stage_holds_pp_micro_batches(kb):
    base = dict(method="full", gradient_checkpointing="none", micro_batch=1)
    one = pytorch_eval(kb, **base)(kb.memory, "activations")
    four_stages = pytorch_eval(kb, pp=4, grad_accum=8, **base)(kb.memory, "activations")
    assert four_stages == one  # 4 micro-batches in flight of a quarter of the layers
    few = pytorch_eval(kb, pp=4, grad_accum=2, **base)(kb.memory, "activations")
    assert few * 2 == one


@pytest.mark.parametrize("pp, m", [(1, 8), (4, 8), (8, 32)])
def test_pipeline_bubble(kb, pp, m):
    factor = pytorch_eval(kb, pp=pp, grad_accum=m)(kb.speed, "pipeline_bubble_factor")
    assert 1 - 1 / factor == Fraction(pp - 1, m + pp - 1)


def kb_params(kb, model):
    return int(Fraction(str(kb.catalog.model(model).params_b)) * 1_000_000_000)


def test_moe_flops_follow_the_active_parameters(kb):
    # Qwen3-30B-A3B: about 3.3 billion of its 30.5 billion parameters are active per token.
    active = pytorch_eval(kb, model="qwen3-30b-a3b")(kb.lets, "active_params")
    assert 3.0e9 < active < 3.6e9
    dense = pytorch_eval(kb, model="llama3-8b")
    assert dense(kb.lets, "active_params") == dense(kb.lets, "params")
