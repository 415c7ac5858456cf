"""Regenerate kb/llamafactory/accepted_keys.yaml: every key LlamaFactory's
HfArgumentParser accepts in a training YAML (the dataclass fields of _TRAIN_ARGS,
transformers' Seq2SeqTrainingArguments included), read from the sources' ASTs.

    python -m bench.accepted_keys LLAMAFACTORY_CHECKOUT COMMIT TRANSFORMERS_WHEEL

Nothing is imported or run: fields are the annotated class attributes of each
@dataclass and its bases, less those declared `field(init=False)`."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

HPARAMS = ("model_args", "data_args", "training_args", "finetuning_args", "generating_args",
           "evaluation_args")
TRAIN_ARGS = ("ModelArguments", "DataArguments", "TrainingArguments", "FinetuningArguments",
              "GeneratingArguments")  # src/llamafactory/hparams/parser.py _TRAIN_ARGS
OTHER_ARGS = {  # the other parsers' dataclasses (parser.py:68-70), each a table of its own
    # (file_kinds.yaml `keys`); with _KTransformersRuntimeArguments (parser.py:52-57: kt_config)
    "inference": ("ModelArguments", "DataArguments", "FinetuningArguments",
                  "GeneratingArguments"),  # _INFER_ARGS: get_infer_args (chat, api, webchat)
    "eval": ("ModelArguments", "DataArguments", "EvaluationArguments",
             "FinetuningArguments"),  # _EVAL_ARGS: get_eval_args (llamafactory-cli eval)
}
TRANSFORMERS = ("transformers/training_args.py", "transformers/training_args_seq2seq.py")
EXTRA = {  # keys a training YAML may hold that no dataclass above declares: key -> why
    "kt_config": "model_args.py:572-574 reads training_args.kt_config (the KTransformers "
                 "integration's field; examples/ktransformers/train_lora use it)",
}


ALLOW_ENV = {  # an environment variable that makes the parser accept any key
    "name": "ALLOW_EXTRA_ARGS", "values": ["true", "y", "1"],
    "because": "parse_dict(..., allow_extra_keys=is_env_enabled('ALLOW_EXTRA_ARGS')): extra keys "
               "are then accepted and unused",
    "source": "llamafactory:src/llamafactory/hparams/parser.py:309-312; "
              "src/llamafactory/extras/misc.py:258-260 (is_env_enabled)"}
CLI_ABBREV = {  # command-line flags: argparse reads a unique prefix of a key as that key
    "because": "flags on the command line (no YAML) go through parse_args_into_dataclasses, an "
               "argparse parser with allow_abbrev left on: a unique prefix such as --max_step is "
               "read as --max_steps; a YAML goes through parse_dict, which matches keys exactly",
    "source": "llamafactory:src/llamafactory/hparams/parser.py:112-126 (read_args returns "
              "sys.argv[1:]), 149-160 (_parse_args); cpython Lib/argparse.py ArgumentParser"
              "(allow_abbrev=True); transformers hf_argparser.py HfArgumentParser(ArgumentParser)"}

VALUES = [  # values of accepted keys that the framework refuses or silently ignores
    {"key": "flash_attn", "values": [True, False], "effect": "refused",
     "because": "flash_attn is the StrEnum AttentionFunction (auto, disabled, sdpa, fa2, fa3); "
                "a bool matches no branch and loading the model raises NotImplementedError "
                "('Unknown attention type')",
     "source": "llamafactory:src/llamafactory/model/model_utils/attention.py:65-94; "
               "src/llamafactory/extras/constants.py:147-152"},
    {"key": "quantization_method", "values": ["bitsandbytes"], "effect": "ignored",
     "because": "QuantizationMethod's bitsandbytes value is 'bnb'; 'bitsandbytes' matches no "
                "on-the-fly branch, so the model loads unquantized without a warning (the "
                "parser's own checks still see quantization_bit)",
     "source": "llamafactory:src/llamafactory/model/model_utils/quantization.py:177-227; "
               "src/llamafactory/extras/constants.py:168-179"},
    {"key": "gradient_checkpointing", "values": [False], "effect": "ignored",
     "because": "HF's gradient_checkpointing: false does not turn checkpointing off under "
                "LlamaFactory: prepare_model_for_training enables it itself unless "
                "disable_gradient_checkpointing is true, so the run recomputes activations all "
                "the same",
     "source": "llamafactory:src/llamafactory/model/model_utils/checkpointing.py:184-199"},
]


def classes(text: str, where: str) -> dict[str, tuple[list[str], list[str], str]]:
    """class name -> (base names, fields, 'file:first-last')."""
    found = {}
    for node in ast.parse(text).body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute)
                 else "" for b in node.bases]
        fields = []
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and \
                    "ClassVar" not in ast.unparse(item.annotation) and not _no_init(item.value):
                fields.append(item.target.id)
        found[node.name] = (bases, fields, f"{where}:{node.lineno}-{node.end_lineno}")
    return found


def _no_init(value) -> bool:
    return isinstance(value, ast.Call) and any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in value.keywords)


def collect(name: str, table: dict, seen: list[str], other: dict | None = None) -> set[str]:
    """The fields of `name` in `table` and of its bases (looked up in `table`, then
    in `other`: transformers' classes for LlamaFactory's)."""
    bases, fields, where = table[name]
    seen.append(f"{where} ({name})")
    out = set(fields)
    for base in bases:
        if base == "BaseTrainingArguments":
            base = "Seq2SeqTrainingArguments"  # training_args.py:36 without USE_MCA
        if base in table and base != name:
            out |= collect(base, table, seen, other)
        elif other is not None and base in other:
            out |= collect(base, other, seen)
    return out


def main(checkout: str, commit: str, wheel: str) -> None:
    table: dict = {}
    for module in HPARAMS:
        path = f"src/llamafactory/hparams/{module}.py"
        text = subprocess.run(["git", "-C", checkout, "show", f"{commit}:{path}"],
                              capture_output=True, text=True, check=True).stdout
        table.update(classes(text, f"llamafactory:{path}@{commit[:7]}"))
    version = Path(wheel).name.split("-")[1]
    theirs: dict = {}
    with zipfile.ZipFile(wheel) as archive:
        for path in TRANSFORMERS:
            theirs.update(classes(archive.read(path).decode(), f"transformers:{path}@v{version}"))
    seen: list[str] = []
    keys = set(EXTRA)
    for name in TRAIN_ARGS:
        keys |= collect(name, table, seen, theirs)
    seen += [f"{key}: {why}" for key, why in EXTRA.items()]
    others = {}
    for kind, names in OTHER_ARGS.items():
        others[kind] = {"kt_config"}
        for name in names:
            others[kind] |= collect(name, table, seen, theirs)
    seen.append(f"llamafactory:src/llamafactory/hparams/parser.py@{commit[:7]}:52-70 "
                f"(_INFER_ARGS, _EVAL_ARGS with _KTransformersRuntimeArguments.kt_config)")
    out = Path(__file__).resolve().parents[1] / "kb" / "llamafactory" / "accepted_keys.yaml"
    lines = ["# Generated by `python -m bench.accepted_keys` (do not edit): every key that",
             "# LlamaFactory's HfArgumentParser accepts in a training YAML, the fields of",
             "# _TRAIN_ARGS (src/llamafactory/hparams/parser.py:60-66) and their bases. A key",
             "# outside this list is refused (parser.py:149-160: parse_dict without",
             "# allow_extra_keys); a key in it that kbsolve has no option for is accepted but",
             "# not modelled. `inference` and `eval`: the keys of get_infer_args and",
             "# get_eval_args (parser.py:68-70), for the file kinds that name them.",
             "# Read by audit/accepted_keys.py.",
             "framework: llamafactory",
             f"because: \"HfArgumentParser.parse_dict raises on any key that is not a field of "
             f"the argument dataclasses (transformers {version})\"",
             "source: >-", "  " + ";\n  ".join(sorted(set(seen))),
             "training:"]
    lines += [f"  - {key}" for key in sorted(keys)]
    for kind, found in others.items():
        lines += [f"{kind}:"] + [f"  - {key}" for key in sorted(found)]
    lines += ["values:"] + [f"  - {json.dumps(entry)}" for entry in VALUES]
    lines += ["allow_env: " + json.dumps(ALLOW_ENV)]
    lines += ["cli_abbrev: " + json.dumps(CLI_ABBREV)]
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(keys)} keys")


if __name__ == "__main__":
    main(*sys.argv[1:4])
