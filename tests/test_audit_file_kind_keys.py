"""Files of a kind the KB does not audit (LlamaFactory eval and chat configs) are
still checked against their own parser's keys (get_eval_args, get_infer_args):
a key that parser refuses is an error, and nothing else is said about them."""

from __future__ import annotations

import json

from audit_helpers import run_cli


def audit(capsys, path, *extra):
    code, out, err = run_cli(capsys, "audit", str(path), "--format", "json", *extra)
    assert code == 0 and "Traceback" not in out + err, err
    return json.loads(out)


EVAL = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
finetuning_type: lora
task: mmlu_test
{extra}template: fewshot
lang: en
n_shot: 5
batch_size: 4
"""


def test_a_key_the_eval_parser_refuses_is_an_error(capsys, tmp_path):
    (tmp_path / "eval.yaml").write_text(EVAL.format(extra="split: test\n"))
    report = audit(capsys, tmp_path)
    [unit] = report["units"]
    assert unit["kind"] == "keys" and unit["path"] == "eval.yaml"
    assert [f["id"] for f in unit["errors"]] == ["split"]
    assert unit["errors"][0]["location"] == "eval.yaml:4:1"
    assert not unit["silent"] and not unit["changes"] and unit["fit"] is None


def test_an_eval_config_with_its_own_keys_only_has_no_finding(capsys, tmp_path):
    """task, lang, n_shot, batch_size are EvaluationArguments' fields: accepted."""
    (tmp_path / "eval.yaml").write_text(EVAL.format(extra=""))
    [unit] = audit(capsys, tmp_path)["units"]
    assert unit["errors"] == [] and unit["silent"] == []


def test_a_training_key_in_a_chat_config_is_refused(capsys, tmp_path):
    """get_infer_args has no TrainingArguments: bf16 in a chat config is refused."""
    (tmp_path / "chat.yaml").write_text("model_name_or_path: Qwen/Qwen3-8B\ntemplate: qwen3\n"
                                        "infer_backend: huggingface\nbf16: true\n")
    [unit] = audit(capsys, tmp_path)["units"]
    assert [f["id"] for f in unit["errors"]] == ["bf16"]


def test_allow_extra_args_in_the_launch_lets_any_key_pass(capsys, tmp_path):
    (tmp_path / "eval.yaml").write_text(EVAL.format(extra="split: test\n"))
    (tmp_path / "run.sh").write_text("ALLOW_EXTRA_ARGS=1 llamafactory-cli eval eval.yaml\n")
    [unit] = audit(capsys, tmp_path)["units"]
    assert unit["errors"] == []


# ---- settings of a feature that is never turned on -----------------------------

GOOD = """model_name_or_path: Qwen/Qwen3-8B
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: my_data
template: qwen3
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 4
learning_rate: 1.0e-4
bf16: true
"""


def _unit(capsys, tmp_path, text):
    (tmp_path / "train.yaml").write_text(text)
    [unit] = audit(capsys, tmp_path, "--gpus", "1xA100-80G-SXM")["units"]
    return unit


def test_quantization_settings_without_quantization_bit_are_no_ops(capsys, tmp_path):
    """LlamaFactory quantizes on the fly only when quantization_bit is set
    (model_utils/quantization.py:177 @ff6d4d12): method, type and double quantization
    alone, even at their defaults, do nothing; the estimate gives no QLoRA credit and
    no fix deletes what the user meant."""
    plain_run = _unit(capsys, tmp_path, GOOD)
    meant = _unit(capsys, tmp_path, GOOD + "quantization_method: bnb\nquantization_type: nf4\n"
                                           "double_quantization: true\n")
    no_ops = {f["id"]: f for f in meant["silent"] if f["kind"] == "no_op"}
    assert set(no_ops) == {"quantization_method", "quantization_type", "double_quantization"}
    assert all("quantization_bit is not set" in f["message"] and f["fix"] == {}
               for f in no_ops.values())
    assert plain_run["fit"]["predicted_gib"] and \
        meant["fit"]["predicted_gib"] == plain_run["fit"]["predicted_gib"]
    assert not {c["key"] for c in meant["changes"]} & set(no_ops)


def test_quantization_settings_with_quantization_bit_are_read(capsys, tmp_path):
    unit = _unit(capsys, tmp_path, GOOD + "quantization_bit: 4\nquantization_method: bnb\n"
                                          "quantization_type: nf4\n")
    assert not [f for f in unit["silent"] if f["kind"] == "no_op"]
    assert not [n for n in unit["notes"] if "not a value kbsolve knows" in n]


def test_a_default_left_beside_a_chosen_setting_is_not_flagged(capsys, tmp_path):
    """lora_rank: 8 (the default) in a full fine-tune that says finetuning_type: full
    is a leftover, not a feature meant and never turned on."""
    text = GOOD.replace("finetuning_type: lora\nlora_target: all\n",
                        "finetuning_type: full\nlora_rank: 8\n")
    unit = _unit(capsys, tmp_path, text)
    assert not [f for f in unit["silent"] if f["kind"] == "no_op" and f["id"] == "lora_rank"]


# ---- overrides after the config on llamafactory-cli's command line --------------

def test_dashed_overrides_after_the_yaml_are_refused(capsys, tmp_path):
    """read_args merges OmegaConf.from_cli(sys.argv[2:]) (parser.py:112-127 @ff6d4d12):
    key=value only; `--cutoff_len 512` is two unknown keys."""
    (tmp_path / "train.yaml").write_text(GOOD)
    (tmp_path / "run.sh").write_text("llamafactory-cli train train.yaml \\\n"
                                     "    --cutoff_len 512 --learning_rate=1e-5 2>&1 | tee log\n")
    [unit] = audit(capsys, tmp_path)["units"]
    [error] = [f for f in unit["errors"] if f["kind"] == "override_form"]
    assert error["location"] == "run.sh" and error["id"] == "--cutoff_len"
    assert "cutoff_len=512 learning_rate=1e-5" in error["message"]


def test_key_value_overrides_after_the_yaml_are_read_fine(capsys, tmp_path):
    (tmp_path / "train.yaml").write_text(GOOD)
    (tmp_path / "run.sh").write_text("llamafactory-cli train train.yaml cutoff_len=512\n"
                                     "FORCE_TORCHRUN=1 llamafactory-cli train train.yaml > log\n")
    [unit] = audit(capsys, tmp_path)["units"]
    assert not [f for f in unit["errors"] if f["kind"] == "override_form"]


# ---- paths on a launch line after the script's cd ------------------------------

def test_a_config_path_that_the_scripts_cd_breaks_is_an_error(capsys, tmp_path):
    (tmp_path / "LF" / "cfg").mkdir(parents=True)
    (tmp_path / "LF" / "cfg" / "train.yaml").write_text(GOOD)
    (tmp_path / "run.sh").write_text("cd ./LF\nllamafactory-cli train ./LF/cfg/train.yaml\n")
    [unit] = audit(capsys, tmp_path)["units"]
    [error] = [f for f in unit["errors"] if f["kind"] == "launch_path"]
    assert error["location"] == "run.sh" and error["id"] == "./LF/cfg/train.yaml"
    assert "from LF the config is cfg/train.yaml" in error["message"]


def test_a_config_path_right_after_the_cd_is_fine(capsys, tmp_path):
    (tmp_path / "LF" / "cfg").mkdir(parents=True)
    (tmp_path / "LF" / "cfg" / "train.yaml").write_text(GOOD)
    (tmp_path / "run.sh").write_text("cd LF\nllamafactory-cli train cfg/train.yaml\n")
    [unit] = audit(capsys, tmp_path)["units"]
    assert not [f for f in unit["errors"] if f["kind"] == "launch_path"]


# ---- a chat template of another model family ------------------------------------

def _template_warned(capsys, tmp_path, template, model="qwen3-8b", chat=False):
    text = ("model_name_or_path: /data/models/mine\ntemplate: {t}\ninfer_backend: huggingface\n"
            if chat else GOOD.replace("template: qwen3", "template: {t}"))
    (tmp_path / "cfg.yaml").write_text(text.format(t=template))
    [unit] = audit(capsys, tmp_path, "--model", model)["units"]
    return [f for f in unit["silent"] if f["id"] == "W_TEMPLATE_OTHER_FAMILY"]


def test_another_familys_template_is_a_silent_failure(capsys, tmp_path):
    """qwen (Qwen2's, with its default system prompt) on Qwen3, whose template is
    qwen3 (LlamaFactory README table; template.py:2041-2071 @ff6d4d12)."""
    [warned] = _template_warned(capsys, tmp_path, "qwen")
    assert "template=qwen" in warned["message"] and warned["location"] == "cfg.yaml:7:1"
    assert _template_warned(capsys, tmp_path, "llama3", model="qwen2.5-7b")


def test_a_chat_config_is_judged_for_its_template(capsys, tmp_path):
    assert _template_warned(capsys, tmp_path, "qwen", chat=True)
    assert not _template_warned(capsys, tmp_path, "qwen3", chat=True)


def test_the_familys_own_generic_and_shared_templates_are_fine(capsys, tmp_path):
    for template in ("qwen3", "qwen3_nothink", "default", "alpaca", "empty"):
        assert not _template_warned(capsys, tmp_path, template), template
    assert not _template_warned(capsys, tmp_path, "gemma", model="gemma2-9b")  # one row


# ---- datasets with images: text-only stages and templates without a plugin -------

INFO = ('{"caps": {"file_name": "caps.json", "formatting": "sharegpt", '
        '"columns": {"messages": "conversations", "images": "image"}}, '
        '"text": {"file_name": "text.json"}}')


def _media(capsys, tmp_path, stage, template, dataset="caps"):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "dataset_info.json").write_text(INFO)
    text = GOOD.replace("stage: sft", f"stage: {stage}").replace("dataset: my_data",
                                                                 f"dataset: {dataset}")
    (tmp_path / "train.yaml").write_text(text.replace("template: qwen3", f"template: {template}"))
    [unit] = audit(capsys, tmp_path)["units"]
    return [(f["kind"], f["id"]) for f in unit["errors"] + unit["silent"]
            if f["kind"].startswith("media_")]


def test_pretraining_on_an_image_dataset_drops_the_images(capsys, tmp_path):
    """pretrain.py:27-30 @ff6d4d12 keeps messages[0]['content'] only."""
    assert _media(capsys, tmp_path, "pt", "qwen2_vl") == [("media_dropped", "dataset")]


def test_an_image_dataset_with_a_text_only_template_is_refused(capsys, tmp_path):
    """mm_plugin.py:147-170: the base plugin raises on images."""
    assert _media(capsys, tmp_path, "sft", "qwen") == [("media_template", "template")]
    assert _media(capsys, tmp_path, "sft", "qwen2_vl") == []
    assert _media(capsys, tmp_path, "sft", "qwen", dataset="text") == []


def test_no_dataset_info_in_the_project_is_not_judged(capsys, tmp_path):
    (tmp_path / "train.yaml").write_text(GOOD.replace("stage: sft", "stage: pt"))
    [unit] = audit(capsys, tmp_path)["units"]
    assert not [f for f in unit["errors"] + unit["silent"] if f["kind"].startswith("media_")]
