"""Fuzzing the readers of user input other than rule files: the Hugging Face
config.json reader, the query flags (`--gpus`, `--set`, the whole `estimate`
command line) and the audit's readers (project files as YAML/JSON, launch
scripts, Python scripts, whole projects).

The oracle: a result, or kbsolve's own error (KbError with a file for file
input; the audit's `Unreadable` note for project files); never another
exception, never a traceback on the command line.

`KBSOLVE_INPUT_FUZZ_EXAMPLES` sets the examples per test (default 20); the
`slow` variants run 2,000 each.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import kbsolve_argv
from kbsolve import api
from kbsolve.catalog import model_from_hf_config
from kbsolve.catalog.schema import ModelSpec
from kbsolve.diagnostics import KbError
from plans import shipped_kb
from shared_data import shared_dir, shared_path

EXAMPLES = int(os.environ.get("KBSOLVE_INPUT_FUZZ_EXAMPLES", "20"))
FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
LONG = settings(FAST, max_examples=2_000)


def kb():
    return shipped_kb()


def assert_reported(error: KbError, file: str | None = None) -> None:
    assert error.diagnostics
    for d in error.diagnostics:
        assert d.message.strip()
        if file is not None:
            assert d.span is not None and d.span.file == file, d.headline()
    error.render()


# ---- the config.json reader ---------------------------------------------------

HF_OK = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008,
         "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False}
NASTY = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.sampled_from([0, -1, 1, 2 ** 63, 10 ** 400]),
                  st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                  st.text(max_size=6), st.lists(st.integers(), max_size=3),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@st.composite
def hf_configs(draw):
    config = dict(HF_OK)
    for key in draw(st.lists(st.sampled_from(sorted(HF_OK) + ["num_experts", "head_dim",
                                                              "text_config", "n_shared_experts",
                                                              "moe_intermediate_size"]),
                             max_size=4)):
        if draw(st.booleans()):
            config.pop(key, None)
        else:
            config[key] = draw(NASTY)
    return config


def read_config(tmp: str, data: bytes):
    path = Path(tmp) / "config.json"
    path.write_bytes(data)
    try:
        spec = model_from_hf_config(path)
    except KbError as error:
        assert_reported(error, str(path))
        return None
    assert isinstance(spec, ModelSpec) and spec.params_b > 0 and spec.layers >= 1
    return spec


def _dumps(value) -> bytes:
    return json.dumps(value).encode()  # NaN and Infinity too, as Python writes them


@FAST
@given(hf_configs())
def test_mutated_config_json(config):
    with tempfile.TemporaryDirectory() as tmp:
        read_config(tmp, _dumps(config))


@FAST
@given(JSON)
def test_random_json_documents(document):
    with tempfile.TemporaryDirectory() as tmp:
        read_config(tmp, _dumps(document))


@FAST
@given(st.binary(max_size=200) | hf_configs().map(_dumps).flatmap(
    lambda data: st.integers(0, len(data)).map(lambda i: data[:i])))
def test_random_bytes_and_truncated_configs(data):
    with tempfile.TemporaryDirectory() as tmp:
        read_config(tmp, data)


def test_the_unmutated_config_reads():
    with tempfile.TemporaryDirectory() as tmp:
        assert read_config(tmp, _dumps(HF_OK)) is not None


@pytest.mark.slow
@LONG
@given(hf_configs() | JSON)
def test_config_json_long(document):
    with tempfile.TemporaryDirectory() as tmp:
        read_config(tmp, _dumps(document))


# ---- the query flags -------------------------------------------------------------

GPU_TEXT = st.one_of(
    st.text(max_size=12),
    st.tuples(st.sampled_from(["", "0", "1", "8", "-1", "2x8", "0x8", "99999", "1e3", "８"]),
              st.sampled_from(["x", "X", "*", "", "xx"]),
              st.sampled_from(["A100", "H100", "", "a100", "A10O", "4090", "x", " A100", "中"]))
    .map("".join))


@FAST
@given(GPU_TEXT)
def test_gpus_flag_parser(text):
    from kbsolve.program.facts import parse_gpus
    try:
        nodes, per_node, name = parse_gpus(text)
    except KbError as error:
        assert_reported(error)
        assert "--gpus" in error.diagnostics[0].message
        return
    assert nodes >= 1 and per_node >= 1
    assert name or text.strip().isdigit()  # a bare count leaves the card to --gpu-spec


def _option_names():
    return sorted(o.name for o in kb().options.values() if o.framework == "llamafactory")


PIN_TEXT = st.one_of(
    st.text(max_size=16),
    st.tuples(st.one_of(st.sampled_from(["lora_rank", "bf16", "deepspeed", "stage", "use_liger",
                                         "", " ", "lora_rnk", "LORA_RANK"]), st.text(max_size=6)),
              st.sampled_from(["=", "==", "", " = ", "=="]),
              st.one_of(st.sampled_from(["8", "7", "true", "yes", "1", "z3", "", "-1", "1e9",
                                         "nan", "inf", "0x10", "８", "bitsandbytes"]),
                        st.text(max_size=6)))
    .map("".join))


@FAST
@given(PIN_TEXT)
def test_set_flag_parser(text):
    from kbsolve.program.problem import parse_pin
    try:
        key, value = parse_pin(kb(), "llamafactory", text)
    except KbError as error:
        assert_reported(error)
        return
    assert key.startswith("llamafactory.") and key.split(".", 1)[1] in _option_names()
    option = kb().options[key]
    assert option.accepts(value)  # the domain, or any value within a `bound` (lora_rank=1)


FLAG_VALUES = {
    "--gpus": GPU_TEXT, "--model": st.sampled_from(["qwen3-8b", "qwen3-8c", "", "llama3-8b",
                                                    "x.json", "x.yaml", "/", "-"]),
    "--task": st.sampled_from(["sft", "dpo", "sftt", "", "grpo"]),
    "--network": st.sampled_from(["ib-400", "ib-40", ""]),
    "--seq-len": st.sampled_from(["1", "0", "-5", "4k", "1e9", "99999999999999999999"]),
    "--frames": st.sampled_from(["1", "0", "x"]),
    "--resolution": st.sampled_from(["480x832", "0x0", "480", "x", "1e3x2"]),
    "--set": PIN_TEXT, "--headroom": st.sampled_from(["0.1", "1", "-0.5", "nan", "inf", "x"]),
    "--format": st.sampled_from(["json", "table", "xml"]),
    "--framework": st.sampled_from(["llamafactory", "llamafactroy", ""]),
}


@st.composite
def estimate_argv(draw):
    argv = ["estimate", "--gpus", "8xA100", "--model", "qwen3-8b"]
    for flag in draw(st.lists(st.sampled_from(sorted(FLAG_VALUES)), max_size=4)):
        argv += [flag, draw(FLAG_VALUES[flag])]
    if draw(st.booleans()):
        argv.append(draw(st.sampled_from(["--bogus", "-x", "extra", "--set"])))
    return argv


@settings(FAST, max_examples=max(EXAMPLES, 10))
@given(estimate_argv())
def test_estimate_command_line(argv):
    from kbsolve.cli.main import main
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text and "internal error" not in text, (argv, text)
    assert code in (0, 1, 2), (argv, code, text)
    if code == 2:
        assert re.search(r"(^|: )(error|Error): ", err.getvalue(), re.M), (argv, text)


# ---- the audit's readers -------------------------------------------------------

YAML_TEXT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["a: &a [*a]", "a: !!python/object:os.system x", "[" * 500, "{a: 1",
                     "a: 1\na: 2", "- - - -", "%YAML 9.9\n---", "? [a]\n: b", "a: !!binary x",
                     "\ufeffa: 1", "a:\n\t- b", "stage: sft\nfinetuning_type: lora\n"]),
)


@lru_cache(maxsize=1)
def _example_yamls() -> tuple[str, ...]:
    """Every 40th of the frameworks' example YAMLs (none without ../shared: the
    mutations then start from a one-line config)."""
    examples = shared_path("examples")
    if examples is None:
        return ()
    paths = sorted(examples.rglob("*.yaml"))
    return tuple(p.read_text("utf-8", "replace") for p in paths[::max(len(paths) // 40, 1)])


@st.composite
def mutated_example(draw):
    examples = _example_yamls()
    text = draw(st.sampled_from(examples)) if examples else "stage: sft\n"
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["truncate", "insert", "delete"]))
        if how == "truncate":
            text = text[:i]
        elif how == "insert":
            text = text[:i] + draw(st.sampled_from([":", "- ", "{", "[", "&a ", "*a", "\t",
                                                    "\n  ", "'", '"', "\x00", "é"])) + text[i:]
        else:
            text = text[:i] + text[i + draw(st.integers(1, 20)):]
    return text


def read_project_file(rel: str, data: bytes):
    from kbsolve.audit.texts import Unreadable, data_of
    from kbsolve.audit.walk import Entry
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / rel
        path.write_bytes(data)
        try:
            return data_of(Entry(path, rel, len(data)))
        except Unreadable as note:
            assert str(note).startswith(rel), str(note)
            return None


@FAST
@given(st.sampled_from(["train.yaml", "ds.json", "a.yml"]),
       st.one_of(YAML_TEXT, mutated_example()).map(lambda t: t.encode("utf-8", "replace"))
       | st.binary(max_size=100))
def test_audit_reads_project_files(rel, data):
    read_project_file(rel, data)


@FAST
@given(st.text(max_size=300) | st.sampled_from(
    ["torchrun --nproc_per_node=99999999999999999999 x.py", "export CUDA_VISIBLE_DEVICES=",
     "NNODES=٣ torchrun", "accelerate launch --num_processes 8 --num_machines 0 t.py",
     "CUDA_VISIBLE_DEVICES=0,1,,2 python t.py"]))
def test_audit_reads_launch_scripts(text):
    from kbsolve.audit.launch import read_launch
    info = read_launch({"run.sh": text})
    assert info.processes is None or info.processes >= 0


@FAST
@given(st.text(max_size=300) | st.sampled_from(
    ["(" * 200 + ")" * 200, "x = " + "[" * 5000, "import torch\n" * 3 + "def f(:",
     "model = AutoModel.from_pretrained(path)\nmodel.gradient_checkpointing_enable()",
     "\x00import os"]))
def test_audit_reads_python_scripts(code):
    from kbsolve.audit.code_patterns import scan
    uses, why = scan(code, "train.py")
    assert (uses is None) == bool(why)


@st.composite
def projects(draw):
    files = {"train.yaml": draw(mutated_example()).encode("utf-8", "replace")}
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(["ds_z3.json", "run.sh", "train.py", "README.md",
                                     "requirements.txt", "sub/c.yaml", "x.yaml"]))
        files[name] = draw(st.binary(max_size=80) | YAML_TEXT.map(str.encode))
    return files


@settings(FAST, max_examples=max(EXAMPLES // 3, 5))
@given(projects())
def test_audit_of_a_random_project(files):
    with tempfile.TemporaryDirectory() as tmp:
        for rel, data in files.items():
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / rel).write_bytes(data)
        try:
            api.audit(tmp, "8xA100", kb())
        except KbError as error:
            assert_reported(error)


def test_an_unmutated_example_is_audited_as_a_unit(tmp_path):
    """The project fuzz above reaches the audit proper: a real example is a unit."""
    example = next(p for p in sorted(shared_dir("examples").rglob("*.yaml")) if "sft" in p.name)
    (tmp_path / "train.yaml").write_bytes(example.read_bytes())
    report, _ = api.audit(str(tmp_path), "8xA100", kb())
    assert [unit.framework for unit in report.units] == ["llamafactory"]


@pytest.mark.slow
@LONG
@given(st.sampled_from(["train.yaml", "ds.json"]), mutated_example().map(str.encode))
def test_audit_reads_project_files_long(rel, data):
    read_project_file(rel, data)


# ---- the KB cache's reader ---------------------------------------------------------

from kbsolve.dsl.cache import _MAGIC as CACHE_MAGIC  # noqa: E402


def _framed(payload: bytes) -> bytes:
    from kbsolve.codecache import framed
    return framed(CACHE_MAGIC, payload)


@FAST
@given(st.binary(max_size=300) | st.binary(max_size=300).map(_framed)
       | st.binary(max_size=300).map(lambda b: CACHE_MAGIC + b))
def test_cache_reader_takes_any_bytes(data):
    """A damaged or foreign entry is a miss (and is removed), never an exception."""
    from kbsolve.dsl.cache import KbCache
    with tempfile.TemporaryDirectory() as tmp:
        store = KbCache(Path(tmp))
        path = store._path("ab" * 32)
        path.write_bytes(data)
        value = store.get("ab" * 32)
        if value is None:
            assert not path.exists()


@pytest.mark.ci
def test_two_cli_processes_rebuild_a_corrupted_cache_entry(_private_kb_cache):
    """Two `kbsolve` processes start together on a damaged cache entry: both answer
    as an undamaged run does, and the entry left behind is whole again. The entry
    damaged is the test's seeded copy of the shipped KB's (conftest; the key does not
    depend on the working directory): the undamaged run reads it instead of building
    a third KB from the rule files."""
    import subprocess
    cache = _private_kb_cache
    env = {**os.environ, "KBSOLVE_CACHE_DIR": str(cache)}
    command = kbsolve_argv("list", "gpus", "--format", "json")
    (entry,) = cache.glob("kb-*.pickle")
    stamp = entry.stat().st_mtime_ns
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and entry.stat().st_mtime_ns == stamp  # read, not rebuilt
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    both = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    for proc in both:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert out == first.stdout
    (entry,) = cache.glob("kb-*.pickle")
    from kbsolve.dsl.cache import _unwrap
    assert _unwrap(entry.read_bytes()) is not None
    assert not list(cache.glob(".kb-*.tmp"))
