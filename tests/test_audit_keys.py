"""LlamaFactory's parser refuses keys that are not fields of its argument
dataclasses (kb/llamafactory/accepted_keys.yaml): misspelt, renamed and
invented keys are errors with a "did you mean"; accepted keys kbsolve does not
model are listed apart; values LlamaFactory refuses or ignores are said so."""

from __future__ import annotations

import pytest

from kbsolve import api
from audit_helpers import shipped_audit
from plans import shipped_kb
from shared_data import shared_dir


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def example():
    return (shared_dir("examples") / "llamafactory/examples/train_lora/qwen3_lora_sft.yaml"
            ).read_text()


def _audit(kb, tmp_path, text):
    (tmp_path / "train.yaml").write_text(text)
    report = api.audit(str(tmp_path), "1xA100", kb=kb)[0]
    assert len(report.units) == 1
    return report.units[0]


def test_refused_keys_are_errors_with_did_you_mean(kb, tmp_path, example):
    text = example.replace("lora_target: all", "Lora_target: all").replace(
        "num_train_epochs: 3.0", "num train epochs: 3.0")
    text += "evaluation_strategy: steps\nglobal_batch_size: 64\n"
    unit = _audit(kb, tmp_path, text)
    refused = {f.id: f for f in unit.errors if f.kind == "refused"}
    assert set(refused) == {"Lora_target", "num train epochs", "evaluation_strategy",
                            "global_batch_size"}
    assert "did you mean 'lora_target'" in refused["Lora_target"].message
    assert "did you mean 'num_train_epochs'" in refused["num train epochs"].message
    assert "did you mean 'eval_strategy'" in refused["evaluation_strategy"].message
    assert refused["Lora_target"].fix == {}  # the user renames it: --fix guesses nothing
    assert not any(c.key in refused or c.key == "lora_target" for c in unit.changes)
    assert "HfArgumentParser" in refused["global_batch_size"].because
    assert "hparams/model_args.py" in refused["global_batch_size"].source
    assert not set(refused) & set(unit.unknown_keys)


def test_accepted_keys_not_modelled_are_one_list(kb, tmp_path, example):
    unit = _audit(kb, tmp_path, example + "adam_beta2: 0.95\nsave_safetensors: true\n")
    assert "adam_beta2" in unit.unknown_keys
    assert not any(f.kind == "refused" for f in unit.errors)


def test_refused_and_ignored_values(kb, tmp_path, example):
    text = example.replace("finetuning_type: lora", "finetuning_type: lora\nflash_attn: true\n"
                           "quantization_bit: 4\nquantization_method: bitsandbytes")
    unit = _audit(kb, tmp_path, text)
    refused = [f for f in unit.errors if f.kind == "refused_value"]
    assert [f.id for f in refused] == ["flash_attn"] and "attention.py" in refused[0].source
    assert not any(f.id == "flash_attn" for f in unit.silent)  # not "read as fa2"
    ignored = [f for f in unit.silent if f.kind == "no_op" and f.id == "quantization_method"]
    assert ignored and "unquantized" in ignored[0].message
    statuses = {c.id: c.status for c in unit.checks}
    assert statuses["A_QLORA"] != "enabled"  # no QLoRA credit: nothing is quantized


def test_llamafactory_examples_have_no_refused_key():
    """LlamaFactory's own training examples all parse: no key of theirs is refused."""
    report = shipped_audit(shared_dir("examples") / "llamafactory")[0]
    refused = [(u.path, f.id) for u in report.units for f in u.errors
               if f.kind in ("refused", "refused_value")]
    assert refused == []


def test_allow_extra_args_lets_every_key_pass(kb, tmp_path, example):
    """ALLOW_EXTRA_ARGS=1 (exported by the launch) makes the parser accept extra keys."""
    (tmp_path / "run.sh").write_text("export ALLOW_EXTRA_ARGS=1\nllamafactory-cli train "
                                     "train.yaml\n")
    unit = _audit(kb, tmp_path, example + "sliding_window: 256\n")
    assert not any(f.kind == "refused" for f in unit.errors)
    assert "sliding_window" in unit.unknown_keys


def test_warnings_the_framework_logs_itself_are_one_note(kb, tmp_path, example):
    """get_train_args logs the upcast_layernorm advice itself (parser.py:563-564): not
    a silent failure, one line of notes (audit.yaml logged_warnings)."""
    text = example.replace("finetuning_type: lora", "finetuning_type: lora\n"
                           "quantization_bit: 4\nrope_scaling: dynamic")
    unit = _audit(kb, tmp_path, text)
    assert not {"W_QUANT_NO_UPCAST", "W_ROPE_DYNAMIC"} & {f.id for f in unit.silent}
    [note] = [n for n in unit.notes if "warns at start-up" in n]
    assert "W_QUANT_NO_UPCAST" in note and "W_ROPE_DYNAMIC" in note


def test_caveats_of_the_estimate_are_one_note_not_a_finding(kb, tmp_path, example):
    """A lora_target list the KB does not size (W_LORA_TARGET_AS_ALL) qualifies the
    estimate, not the config: one note (audit.yaml estimate_caveats), no finding."""
    text = example.replace("lora_target: all", "lora_target: q_proj,o_proj")
    assert text != example
    unit = _audit(kb, tmp_path, text)
    assert "W_LORA_TARGET_AS_ALL" not in {f.id for f in unit.silent + unit.errors}
    [note] = [n for n in unit.notes if n.startswith("the estimate: ")]
    assert "W_LORA_TARGET_AS_ALL" in note


def test_hf_gradient_checkpointing_false_is_a_silent_no_op(kb, tmp_path, example):
    """LlamaFactory turns checkpointing on itself unless disable_gradient_checkpointing
    (checkpointing.py:184-199): gradient_checkpointing: false does nothing, and --fix
    writes nothing for it (turning it off would change the memory)."""
    unit = _audit(kb, tmp_path, example + "gradient_checkpointing: false\n")
    [found] = [f for f in unit.silent if f.id == "gradient_checkpointing"]
    assert found.kind == "no_op" and "disable_gradient_checkpointing" in found.message
    assert not any(c.key.endswith("gradient_checkpointing") for c in unit.changes)
