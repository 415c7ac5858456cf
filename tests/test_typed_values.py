"""The values users type (issue 15, part 4): LlamaFactory's and Flow-Factory's own
file paths and zero3-style names for --set, generic GPUs (2x16GB, --gpu-spec),
suggestions that keep the size, and Hugging Face hub ids with variant suffixes."""

import pytest

from kbsolve.api import load_kb
from kbsolve.cli.main import main
from kbsolve.diagnostics import KbError, did_you_mean, size_tokens
from kbsolve.program.query import Query, resolve


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def notes(kb, **fields):
    return resolve(kb, Query(**fields)).notes


def headline(capsys, *argv):
    """The error line of a refused query (exit 2, no traceback)."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and all(line.startswith("  ") for line in lines[1:])
    return lines[0]


# ---- --set: the framework's own files and zero3-style names --------------------------


def test_llamafactory_deepspeed_path_is_pinned_with_a_note(capsys):
    code, out, _ = run(capsys, "--gpus", "8xA100", "--model", "qwen3-8b", "--top", "0",
                       "--set", "deepspeed=examples/deepspeed/ds_z3_config.json")
    assert code == 0
    assert "deepspeed=examples/deepspeed/ds_z3_config.json read as z3" in out
    assert '"z3"  [pinned]' in out


@pytest.mark.parametrize("raw, value", [
    ("examples/deepspeed/ds_z0_config.json", "z0"),
    ("/opt/LLaMA-Factory/examples/deepspeed/ds_z2_offload_config.json", "z2_offload"),
    ("examples/deepspeed/ds_z2_autotp_config.json", "z2_autotp"),
    ("ds_z3_offload_config.json", "z3_offload"),
    ("zero3", "z3"), ("ZERO2", "z2"), ("zero3_offload", "z3_offload"), ("zero0", "z0"),
])
def test_llamafactory_deepspeed_spellings(kb, raw, value):
    resolved = resolve(kb, Query(gpus="8xA100", model="qwen3-8b", set=[f"deepspeed={raw}"]))
    assert resolved.problem.pinned["llamafactory.deepspeed"] == value
    assert any(n.startswith(f"deepspeed={raw} read as {value}") for n in resolved.notes)


def test_flowfactory_accelerate_files_are_pinned(kb):
    resolved = resolve(kb, Query(gpus="8xA100", model="wan14b",
                                 set=["fsdp=config/accelerate_configs/fsdp2.yaml",
                                      "deepspeed=config/deepspeed/deepspeed_zero2.yaml"]))
    assert resolved.problem.pinned["flow-factory.fsdp"] == "fsdp2"
    assert resolved.problem.pinned["flow-factory.deepspeed"] == "zero2"
    said = [n for n in resolved.notes if n.startswith(("fsdp=", "deepspeed="))]
    assert len(said) == 2 and "also stands for deepspeed=none" in said[0]


def test_an_unknown_file_lists_the_known_ones(capsys):
    line = headline(capsys, "--gpus", "8xA100", "--model", "qwen3-8b", "--set",
                    "deepspeed=examples/deepspeed/ds_z3_fp8_config.json")
    assert "not a value of deepspeed" in line and "examples/deepspeed/ds_z3_config.json" in line


def test_an_old_spelling_is_read_with_its_reason(kb):
    said = notes(kb, gpus="8xA100", model="qwen3-8b", set=["quantization_method=bitsandbytes"])
    assert any(n.startswith("quantization_method=bitsandbytes read as bnb (") for n in said)


# ---- generic GPUs ----------------------------------------------------------------


def test_generic_gpu_by_memory_plans_and_lists_its_assumptions(capsys):
    code, out, _ = run(capsys, "--gpus", "2x16GB", "--model", "qwen3-8b", "--top", "0")
    assert code == 0
    note = next(line for line in out.splitlines() if "GPU '16GB' is no catalog card" in line)
    assert "memory 15 GiB" in note  # 16 GB as nvidia-smi shows it, 93.75 %
    for assumed in ("bf16 false", "fp8 false", "fa2 false", "arch turing", "link pcie",
                    "node_host_ram_gib 64"):
        assert assumed in note
    assert "kb/catalog/gpus.yaml generic" in note and "--gpu-spec" in note
    assert "bf16                            true" not in out  # never assumed


def test_generic_gpu_in_gib_and_nodes(kb):
    resolved = resolve(kb, Query(gpus="2x8x48GiB", model="qwen3-8b"))
    assert resolved.gpu.memory_gib == 48 and resolved.gpu.bf16 is False
    assert resolved.problem.facts["query.num_gpus"] == 16


def test_gpu_spec_fills_in_what_it_omits(kb, tmp_path):
    spec = tmp_path / "rtx4080.yaml"
    spec.write_text("name: RTX-4080\nmemory_gib: 15.99\narch: ada\nbf16: true\n"
                    "bf16_tflops: 97.5\nfp16_tflops: 97.5\nfa2: true\n")
    resolved = resolve(kb, Query(gpus="2", gpu_spec=str(spec), model="qwen3-8b"))
    assert resolved.gpu.name == "RTX-4080" and resolved.gpu.bf16 and resolved.gpu.fa2
    assert resolved.problem.facts["query.num_gpus"] == 2
    note = next(n for n in resolved.notes if "--gpu-spec" in n)
    assert "assumed vendor nvidia" in note and "hbm_gbps 320" in note
    assert "bf16 " not in note.split("assumed", 1)[1].split("(")[0]  # stated, not assumed
    assert resolve(kb, Query(gpus="4xRTX-4080", gpu_spec=str(spec),
                             model="qwen3-8b")).problem.facts["query.num_gpus"] == 4


@pytest.mark.parametrize("text, needle", [
    ("bf16: true\nmemory_gib: 16\n", "bf16 is true but bf16_tflops is 0"),
    ("name: X\n", "memory_gib is missing"),
    ("- 1\n", "a mapping of fields"),
    ("memory_gib: 16\nwarp: 9\n", "warp"),
])
def test_bad_gpu_spec_is_one_line(capsys, tmp_path, text, needle):
    spec = tmp_path / "card.yaml"
    spec.write_text(text)
    assert needle in headline(capsys, "--gpu-spec", str(spec), "--gpus", "2",
                              "--model", "qwen3-8b")


def test_gpu_spec_and_gpus_must_agree(capsys, tmp_path):
    spec = tmp_path / "card.yaml"
    spec.write_text("name: RTX-4080\nmemory_gib: 16\n")
    assert "describes 'RTX-4080'" in headline(capsys, "--gpu-spec", str(spec), "--gpus",
                                              "2xA100", "--model", "qwen3-8b")
    assert "no such file" in headline(capsys, "--gpu-spec", str(tmp_path / "nope.yaml"),
                                      "--model", "qwen3-8b")


def test_a_count_alone_names_no_gpu(capsys):
    assert "names no GPU type" in headline(capsys, "--gpus", "8", "--model", "qwen3-8b")


# ---- suggestions keep the size ---------------------------------------------------


def refused(kb, **fields) -> KbError:
    with pytest.raises(KbError) as error:
        resolve(kb, Query(**fields))
    return error.value


def test_unlisted_cards_are_not_taken_for_another_size(capsys, kb):
    code, _, err = run(capsys, "--gpus", "1xRTX-4080", "--model", "qwen3-8b")
    line = err.splitlines()[0]
    assert code == 2 and "did you mean" not in line
    assert "the nearest listed differ in size: 'RTX-4090' (23.99 GiB)" in line
    assert "help: a card the catalog lacks: --gpus COUNTxMEMORY" in err and "--gpu-spec" in err
    message = refused(kb, gpus="1xA40", model="qwen3-8b").diagnostics[0].message
    assert "did you mean" not in message and "'A10' (22.49 GiB)" in message


def test_models_of_another_size_are_listed_with_their_size(kb):
    message = refused(kb, gpus="8xA100", model="llama3-7b").diagnostics[0].message
    assert "did you mean" not in message
    assert "'llama3-70b' (70.55B parameters)" in message
    assert "'llama3-8b' (8.03B parameters)" in message


def test_an_ambiguous_name_names_both(capsys):
    line = headline(capsys, "--gpus", "8xA100", "--model", "wan2.2-a14b")
    assert line.endswith("ambiguous: 'wan2.2-i2v-a14b' or 'wan2.2-t2v-a14b'")


@pytest.mark.parametrize("fields, needle", [
    ({"model": "qwen3-8c"}, "did you mean 'qwen3-8b'?"),
    ({"gpus": "8xH10"}, "did you mean 'H100'"),
    ({"gpus": "8xA10O"}, "did you mean 'A100'?"),
])
def test_typos_are_still_suggested(kb, fields, needle):
    query = {"gpus": "8xA100", "model": "qwen3-8b", **fields}
    assert needle in refused(kb, **query).diagnostics[0].message


def test_size_tokens_and_did_you_mean():
    assert size_tokens("llama3-70b") == (("3", ""), ("70", "b"))
    assert size_tokens("wan2.2-t2v-a14b") == (("2.2", ""), ("14", "b"))  # t2v's 2 is no size
    assert size_tokens("Mixtral-8x7B") == (("8", ""), ("7", "b"))
    assert did_you_mean("z4", ["z0", "z2", "z3"]) == ""
    assert did_you_mean("P99", ["P9"]) == "; did you mean 'P9'?"


# ---- hub ids ---------------------------------------------------------------------


@pytest.mark.parametrize("hub_id, entry", [
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama3-8b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3-8b"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("google/gemma-2-9b-it", "gemma2-9b"),
    ("google/gemma-3-4b-it", "gemma3-4b"),
    ("Qwen/Qwen3-8B-Chat", "qwen3-8b"),
])
def test_hub_variants_resolve_to_their_base(kb, hub_id, entry):
    resolved = resolve(kb, Query(gpus="8xA100", model=hub_id))
    assert resolved.model.name == entry
    assert any(n.startswith(f"model '{hub_id}' read as {entry}: a -") and
               "same architecture" in n for n in resolved.notes)


def test_an_unknown_hub_id_is_still_refused(kb):
    with pytest.raises(KbError) as error:
        resolve(kb, Query(gpus="8xA100", model="meta-llama/Llama-2-7b-chat-hf"))
    assert "unknown model 'meta-llama/Llama-2-7b-chat-hf'" in error.value.diagnostics[0].message
