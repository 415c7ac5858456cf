"""Both frameworks' own example configs, read in place from ../shared/examples:
none may crash the audit, and the errors found must be true ones (checked
against ../shared/reference/ by hand; see the comments)."""

from __future__ import annotations

import pytest

from kbsolve import api
from audit_helpers import shipped_audit
from plans import shipped_kb
from shared_data import shared_dir


@pytest.fixture(scope="module")
def examples():
    return shared_dir("examples")


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


@pytest.fixture(scope="module")
def lf(examples):
    return shipped_audit(examples / "llamafactory")[0]


@pytest.fixture(scope="module")
def ff(kb, examples):
    return api.audit(str(examples / "flow-factory"), kb=kb)[0]


def test_every_llamafactory_training_example_is_audited(lf, examples):
    paths = {u.path for u in lf.units}
    for folder in ("train_lora", "train_full", "train_qlora"):
        expected = {p.relative_to(examples / "llamafactory").as_posix()
                    for p in (examples / "llamafactory" / "examples" / folder).glob("*.yaml")}
        assert expected and expected <= paths
    assert all(u.framework == "llamafactory" for u in lf.units)
    assert not any("/deepspeed/" in p or "/accelerate/" in p for p in paths)


def test_llamafactory_examples_have_no_errors_but_the_optimizer_default(lf):
    # The project's own examples start, except where they leave optim unset under GaLore or
    # APOLLO: transformers' default is adamw_torch_fused on torch >= 2.8, which their
    # builders refuse (LlamaFactory ff6d4d12 trainer_utils.py L239-246, L330-333).
    assert sorted((u.path, f.id) for u in lf.units for f in u.errors) == [
        ("examples/extras/apollo/llama3_full_sft.yaml", "T2"),
        ("examples/extras/galore/llama3_full_sft.yaml", "T1")]


def test_deepspeed_json_is_read_through_the_reference(lf):
    ds3 = next(u for u in lf.units if u.path.endswith("train_lora/qwen3_lora_sft_ds3.yaml"))
    assert ds3.files["deepspeed"] == "examples/deepspeed/ds_z3_config.json"


def test_every_flow_factory_example_is_audited(ff, examples):
    expected = {p.relative_to(examples / "flow-factory").as_posix()
                for p in (examples / "flow-factory" / "examples").rglob("*.yaml")}
    paths = {u.path for u in ff.units}
    assert expected <= paths
    assert not any(p.startswith("config/") for p in paths)  # accelerate/DeepSpeed files


def test_flow_factory_errors_are_true(ff):
    found = {(u.path, f.id) for u in ff.units for f in u.errors}
    # reference/flowfactory.md R11: with group_contiguous, M % W must be 0, else M is
    # rounded up. template/sd3_5/async_reward: 6 processes, M = 64 (async rewards force
    # group_contiguous, R10); multinode_examples/train.yaml: 32 processes
    # (fsdp2_wan.yaml), M = 48. R17: the grpo/lora/wan22 examples list both experts
    # (target_components as a YAML list) under config/deepspeed/deepspeed_zero2.yaml,
    # which accelerate refuses (one prepared model under DeepSpeed). VIDEO_OFFLOAD
    # (flowfactory.md §4): multinode_examples/train.yaml trains 13-frame Wan2.1 video
    # with offload_samples_to_cpu off, at 12 batches per epoch (M 48 x K 32 / 32 x 4):
    # the repository's advice, which Flow-Factory does not enforce: not an error, and with
    # no estimate behind it a tip in the one tips line (audit.yaml advice_tips)
    # R11 is not refused: args.py's _align_for_group_contiguous rounds M up and logs it
    # (audit.yaml advice_rules and logged_warnings): one line of notes, no finding
    assert found == {("examples/grpo/lora/wan22/t2v.yaml", "R17"),
                     ("examples/grpo/lora/wan22/i2v.yaml", "R17")}
    rounded = {u.path for u in ff.units if any("warns at start-up: R11_CONTIGUOUS" in n
                                               for n in u.notes)}
    assert rounded == {"examples/template/sd3_5/async_reward.yaml",
                       "multinode_examples/train.yaml"}
    warned = {(u.path, f.id) for u in ff.units for f in u.silent if f.kind == "warning"}
    assert ("multinode_examples/train.yaml", "VIDEO_OFFLOAD") not in warned
    tipped = {(u.path, t.split(" ", 1)[0]) for u in ff.units for t in u.tips}
    assert ("multinode_examples/train.yaml", "VIDEO_OFFLOAD") in tipped


def test_flow_factory_sections_are_not_flagged(ff):
    flagged = {f.id for u in ff.units for f in u.silent if f.kind in ("nokey", "wrong_section")}
    assert not any("." in key for key in flagged)  # log.run_name, eval_rewards.dtype are real


def test_llamafactory_examples_of_other_kinds_are_one_line_each(lf):
    """Inference, merge, prediction and v1 configs: "not audited: KIND (why)", no
    finding (the KB's kinds, kb/llamafactory/file_kinds.yaml). Inference and eval
    configs are checked for the keys their own parser refuses: these official ones
    have none."""
    audited = {u.path for u in lf.units if u.kind != "keys"}
    assert not [f.id for u in lf.units if u.kind == "keys" for f in u.errors + u.silent]
    assert "examples/inference/qwen3.yaml" in {u.path for u in lf.units if u.kind == "keys"}
    lines = {line.split(": not audited: ")[0]: line.split(": not audited: ")[1]
             for line in lf.not_audited}
    expected = {"examples/inference/qwen3.yaml": "inference/chat",
                "examples/inference/qwen3_lora_sft.yaml": "inference/chat",
                "examples/merge_lora/qwen3_lora_sft.yaml": "export/merge",
                "examples/extras/nlg_eval/llama3_lora_predict.yaml": "prediction run",
                "examples/v1/train_lora/train_lora_sft.yaml": "v1 config",
                "examples/v1/train_full/train_full_fsdp2.yaml": "v1 config"}
    for path, kind in expected.items():
        assert path not in audited and kind in lines[path], path
    assert "examples/train_lora/qwen3_lora_sft.yaml" in audited


def test_tips_about_the_cluster_are_one_note_not_findings(kb, examples):
    """Flow-Factory's multinode example uses a *_hub attention backend: whether the nodes
    reach the Hub is not in its files, so W_R23_HUB_OFFLINE is one note (audit.yaml
    environment_tips), not a silent failure."""
    report = api.audit(str(examples / "flow-factory" / "multinode_examples"), "8xH100",
                       kb=kb)[0]
    [unit] = [u for u in report.units if u.path.endswith("train.yaml")]
    assert "W_R23_HUB_OFFLINE" not in {f.id for f in unit.silent + unit.errors}
    [note] = [n for n in unit.notes if n.startswith("if your cluster: ")]
    assert "W_R23_HUB_OFFLINE" in note
