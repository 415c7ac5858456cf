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
