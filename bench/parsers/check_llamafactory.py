"""Run inside the llamafactory side venv: each case {file, kind, cwd} through the
parser LlamaFactory itself uses for that kind of file; prints one JSON list of
{file, verdict: accepted|refused, message, parser}.

kinds: train (get_train_args: train, predict), infer (get_infer_args: chat, export),
eval (get_eval_args), v1 (llamafactory.v1 get_args). Checks that need a GPU or an
optional package (bf16/fp16 on a CPU, bitsandbytes, deepspeed) are environment, not
verdicts: the case then falls back to the parse alone (HfArgumentParser over the same
dataclasses, unknown keys refused) and the message is kept as `environment`."""

import json
import os
import sys

import yaml

ENVIRONMENT = ("bf16", "fp16", "cuda", "gpu", "npu", "please install", "no module named",
               "is not installed", "requires", "importerror", "deepspeed", "bitsandbytes",
               "flash_attn", "liger", "distributed", "torch.distributed")


def _parsers():
    from llamafactory.hparams import parser as lf
    from llamafactory.v1.config.arg_parser import get_args as v1_args
    return {
        "train": (lf.get_train_args, lambda a: lf._parse_args(lf.HfArgumentParser(lf._TRAIN_ARGS), a),
                  "llamafactory.hparams.parser.get_train_args"),
        "infer": (lf.get_infer_args, lambda a: lf._parse_args(lf.HfArgumentParser(lf._INFER_ARGS), a),
                  "llamafactory.hparams.parser.get_infer_args"),
        "eval": (lf.get_eval_args, lambda a: lf._parse_args(lf.HfArgumentParser(lf._EVAL_ARGS), a),
                 "llamafactory.hparams.parser.get_eval_args"),
        "v1": (v1_args, None, "llamafactory.v1.config.arg_parser.get_args"),
    }


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def check(case: dict, parsers: dict) -> dict:
    full, parse_only, name = parsers[case["kind"]]
    out = {"file": case["file"], "parser": name}
    here = os.getcwd()
    try:
        os.chdir(case["cwd"])
        with open(case["path"], encoding="utf-8") as handle:
            args = yaml.safe_load(handle)
        if case.get("overrides"):
            args.update(case["overrides"])
        try:
            full(dict(args))
            out["verdict"] = "accepted"
        except BaseException as error:  # HfArgumentParser refuses with ValueError/SystemExit
            message = _first_line(error)
            if parse_only is not None and any(w in message.lower() for w in ENVIRONMENT):
                try:  # the deepspeed key makes TrainingArguments import deepspeed
                    parse_only({k: v for k, v in args.items() if k != "deepspeed"})
                    out.update(verdict="accepted", environment=message)
                except BaseException as again:
                    out.update(verdict="refused", message=_first_line(again))
            else:
                out.update(verdict="refused", message=message)
    finally:
        os.chdir(here)
    return out


if __name__ == "__main__":
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    parsers = _parsers()
    print(json.dumps([check(case, parsers) for case in cases]))
