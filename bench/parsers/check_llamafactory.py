"""Run inside the llamafactory side venv: each case {file, kind, cwd} through the
parser LlamaFactory itself uses for that kind of file; prints one JSON list of
{file, verdict: accepted|refused, message, parser}.

kinds: train (get_train_args: train, predict), infer (get_infer_args: chat, export),
eval (get_eval_args), v1 (llamafactory.v1 get_args). transformers' bf16 capability
question is answered yes, as on the GPU the config is meant for. Other checks that
need a GPU or an optional package (CUDA, bitsandbytes, flash-attn) are environment,
not verdicts: the case then falls back to the parse alone (HfArgumentParser over the
same dataclasses, unknown keys refused) and the message is kept as `environment`."""

import contextlib
import io
import json
import os
import sys

import yaml

ENVIRONMENT = ("cuda", "gpu", "npu", "please install", "no module named", "is not installed",
               "no package metadata", "importerror", "modulenotfounderror", "bitsandbytes",
               "flash_attn", "flash-attn", "liger", "process group", "torch.distributed",
               "force_torchrun")  # parser.py 354: DeepSpeed outside torchrun


def _as_on_a_gpu() -> None:
    """transformers asks whether the GPU does bf16 (training_args.py, 'Your setup
    doesn't support bf16/gpu'): the corpus configs are meant for one that does."""
    import transformers.training_args as training_args
    training_args.is_torch_bf16_gpu_available = lambda: True


def _parsers():
    _as_on_a_gpu()
    from llamafactory.hparams import parser as lf
    lf.is_torch_bf16_gpu_available = lambda: True  # parser.py 381: pure_bf16
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


def _copy(args):
    return dict(args) if isinstance(args, dict) else list(args)


def _value(args, key: str):
    if isinstance(args, dict):
        return args.get(key)
    flag = f"--{key}"
    return args[args.index(flag) + 1] if flag in args[:-1] else None


def _without(args, key: str):
    if isinstance(args, dict):
        return {k: v for k, v in args.items() if k != key}
    flag, out, skip = f"--{key}", [], False
    for word in args:
        if skip:
            skip = False
        elif word == flag:
            skip = True
        else:
            out.append(word)
    return out


def _as_dict(argv: list[str]) -> dict:
    """--key value / --flag pairs as the dict HfArgumentParser would build (a bare flag
    is true); a first word that is a .yaml file is loaded and the rest override it."""
    args: dict = {}
    if argv and argv[0].endswith((".yaml", ".yml", ".json")):
        with open(argv[0], encoding="utf-8") as handle:
            args.update(yaml.safe_load(handle))
        argv = argv[1:]
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--"):
            key = word[2:]
            if "=" in key:
                key, value = key.split("=", 1)
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value, i = argv[i + 1], i + 1
            else:
                value = "true"
            args[key] = yaml.safe_load(value) if value else value
        elif "=" in word:  # key=value overrides after a yaml file
            key, value = word.split("=", 1)
            args[key] = yaml.safe_load(value)
        i += 1
    return args


def _quiet(call, args):
    """call(args); argparse's refusal (SystemExit) carries its stderr line."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return call(args)
    except SystemExit as error:
        lines = [l for l in err.getvalue().splitlines() if "error:" in l]
        raise ValueError(lines[-1].split("error:", 1)[1].strip() if lines else f"exit {error}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def check(case: dict, parsers: dict) -> dict:
    full, parse_only, name = parsers[case["kind"]]
    out = {"file": case["file"], "parser": name}
    here = os.getcwd()
    try:
        os.chdir(case["cwd"])
        if "argv" in case:  # a command line: what llamafactory-cli hands the parser
            argv = case["argv"]
            args = _as_dict(argv) if argv and argv[0].endswith((".yaml", ".yml", ".json")) \
                else list(argv)
        else:
            with open(case["path"], encoding="utf-8") as handle:
                args = yaml.safe_load(handle)
        if case.get("overrides") and isinstance(args, dict):
            args.update(case["overrides"])
        try:
            _quiet(full, _copy(args))
            out["verdict"] = "accepted"
        except BaseException as error:  # HfArgumentParser refuses with ValueError/SystemExit
            message = _first_line(error)
            deepspeed = str(_value(args, "deepspeed") or "")
            elsewhere = deepspeed.startswith("/") or "$" in deepspeed  # their machine, their shell
            if parse_only is not None and (any(w in message.lower() for w in ENVIRONMENT) or (
                    elsewhere and "existing deepspeed config" in message)):
                try:
                    _quiet(parse_only, _without(args, "deepspeed") if elsewhere else _copy(args))
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
