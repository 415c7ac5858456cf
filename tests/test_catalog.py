"""Tests for kbsolve.catalog: YAML positions, schemas, loading, layering, HF configs."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbsolve.catalog import (Catalog, GpuSpec, ModelSpec, QueryFacts, fact_field_type, fact_fields,
                             hf_param_count, load_catalog, load_yaml, model_from_hf_config)
from kbsolve.diagnostics import KbError

FIX = Path(__file__).resolve().parent / "fixtures" / "catalog"
SHIPPED = Path(__file__).resolve().parents[1] / "kb" / "catalog"


def errors(fn, *args, **kwargs) -> list[tuple[str, int, str]]:
    """(file relative to the fixtures, line, message) of every diagnostic raised."""
    with pytest.raises(KbError) as info:
        fn(*args, **kwargs)
    out = []
    for d in info.value.diagnostics:
        file = d.span.file if d.span else ""
        if file.startswith(str(FIX)):
            file = Path(file).relative_to(FIX).as_posix()
        out.append((file, d.span.line if d.span else 0, d.message))
    return out


def load(*names: str) -> Catalog:
    return load_catalog([FIX / n for n in names])


# ---- the shipped catalog -------------------------------------------------------


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog([SHIPPED])


def test_shipped_catalog_loads_with_required_entries(shipped):
    for name in ["A100-80G-SXM", "A100-40G-SXM", "H100-SXM", "H200", "H20", "RTX-4090",
                 "V100-32G", "T4", "L40S"]:
        assert name in shipped.gpus
    for name in ["qwen3-8b", "llama3-8b", "llama3-70b", "qwen2.5-7b", "wan2.1-t2v-14b",
                 "wan2.1-t2v-1.3b", "flux1-dev"]:
        assert name in shipped.models
    for name in ["ib-400", "ib-200", "roce-200", "eth-100", "eth-10"]:
        assert name in shipped.networks
    for table in (shipped.gpus, shipped.models, shipped.networks):
        for entry in table.values():
            assert entry.source.strip()
            assert entry.span is not None and entry.span.line > 0


def test_a100_alias_resolves_to_80g_sxm_with_note(shipped):
    gpu = shipped.gpu("a100")
    assert gpu.name == "A100-80G-SXM"
    assert gpu.memory_gib == 80.0
    assert gpu.bf16_tflops == 312
    assert shipped.resolved_alias_note("a100") == gpu.alias_note
    assert "80 GB SXM4" in gpu.alias_note
    assert shipped.resolved_alias_note("A100-80G-SXM") == ""
    assert shipped.gpu("h100").name == "H100-SXM"
    assert shipped.model("WAN14B").name == "wan2.1-t2v-14b"
    assert shipped.model("flux-dev").denoiser_blocks == 57


def test_shipped_gpu_feature_flags(shipped):
    for gpu in shipped.gpus.values():
        assert gpu.bf16 == (gpu.arch not in ("volta", "turing")), gpu.name
        assert gpu.fp8 == (gpu.arch in ("hopper", "ada", "blackwell", "cdna3")), gpu.name
        assert gpu.fa3 == (gpu.arch == "hopper"), gpu.name
        assert gpu.fa2 == (gpu.arch in ("ampere", "ada", "hopper", "blackwell")), gpu.name
    assert shipped.gpu("H100").fp8_tflops == 1979
    assert shipped.gpu("H20").bf16_tflops == 148
    assert shipped.gpu("4090").bf16_tflops == 165.2


def test_shipped_llm_params_match_their_shape(shipped):
    for m in shipped.models.values():
        if m.kind != "llm" or m.model_type == "deepseek_v3":
            continue  # DeepSeek's MLA attention and dense first layers are outside the formula
        count = hf_param_count(m.model_dump(), m.tied_embeddings) / 1e9
        assert abs(count - m.params_b) / m.params_b < 0.01, (m.name, count)
    assert shipped.model("qwen3-8b").head_dim == 128
    assert shipped.model("llama3-70b").head_dim == 128  # filled in: 8192 // 64


def test_shipped_diffusion_totals_add_up(shipped):
    for m in shipped.models.values():
        if m.kind != "llm":
            parts = m.denoiser_params_b * m.denoiser_experts + m.text_encoder_params_b + m.vae_params_b
            assert abs(parts - m.params_b) < 0.05, m.name


def test_catalog_pickles(shipped):
    again = pickle.loads(pickle.dumps(shipped))
    assert again.gpu("A100").name == "A100-80G-SXM"
    assert again.gpu("A100").span == shipped.gpu("A100").span
    assert again == shipped


# ---- lookups ---------------------------------------------------------------------


def test_unknown_names_suggest_close_ones(shipped):
    assert errors(shipped.gpu, "A10O") == [("", 0, "unknown GPU 'A10O'; did you mean 'A100'?")]
    assert errors(shipped.model, "qwen3-8c") == [
        ("", 0, "unknown model 'qwen3-8c'; did you mean 'qwen3-8b'?")]
    assert errors(shipped.network, "zzz") == [("", 0, "unknown network 'zzz'")]


def test_lookup_error_uses_given_span(shipped):
    from kbsolve.diagnostics import Span
    with pytest.raises(KbError) as info:
        shipped.gpu("B300", span=Span("query.kb", 3, 7))
    assert str(info.value.diagnostics[0].span) == "query.kb:3:7"


# ---- bad catalog files ---------------------------------------------------------


def test_unknown_top_level_key():
    assert errors(load, "unknown_top") == [
        ("unknown_top/gpus.yaml", 1, "unknown top-level key 'gpu'; did you mean 'gpus'?")]


def test_unknown_field_suggests_and_reports_missing():
    assert errors(load, "unknown_field") == [
        ("unknown_field/gpus.yaml", 2, "GPU 'L4' is missing required field 'memory_gib'"),
        ("unknown_field/gpus.yaml", 5,
         "GPU 'L4': unknown field 'memroy_gib'; did you mean 'memory_gib'?"),
    ]


def test_missing_source():
    assert errors(load, "missing_source") == [
        ("missing_source/gpus.yaml", 2, "GPU 'L4' is missing required field 'source'")]


def test_negative_memory():
    assert errors(load, "negative_memory") == [
        ("negative_memory/gpus.yaml", 5,
         "GPU 'L4': memory_gib: Input should be greater than 0 (got -24)")]


def test_impossible_model_shapes():
    assert errors(load, "bad_models") == [
        ("bad_models/models.yaml", 10, "model 'kv-too-many': kv_heads (16) must not exceed heads (8)"),
        ("bad_models/models.yaml", 23,
         "model 'kv-not-divisor': heads (8) must be divisible by kv_heads (3)"),
        ("bad_models/models.yaml", 28, "model 'no-vocab' (kind 'llm') is missing required field 'vocab'"),
        ("bad_models/models.yaml", 52,
         "model 'too-many-active': experts_active (8) must not exceed experts (4)"),
        ("bad_models/models.yaml", 59, "model 'zero-params': params_b: Input should be greater than 0 (got 0)"),
        ("bad_models/models.yaml", 71, "model 'zero-params': field 'layers' does not apply to kind 'diffusion'"),
    ]


def test_errors_of_all_files_come_together():
    assert errors(load, "two_bad", "negative_memory") == [
        ("negative_memory/gpus.yaml", 5,
         "GPU 'L4': memory_gib: Input should be greater than 0 (got -24)"),
        ("two_bad/models.yaml", 2,
         "model 'wan-broken' (kind 'video') is missing required fields: 'denoiser_blocks', "
         "'denoiser_hidden', 'denoiser_heads', 'text_encoder_params_b', 'text_encoders', "
         "'vae_params_b', 'latent_channels', 'vae_spatial', 'patch_size', 'cfg_doubles'"),
        ("two_bad/networks.yaml", 4, "network 'eth-1': gbps: Input should be greater than 0 (got 0)"),
        ("two_bad/networks.yaml", 7,
         "network 'ib-x': kind: Input should be 'infiniband', 'roce' or 'ethernet' (got 'infinband'); "
         "did you mean 'infiniband'?"),
        ("two_bad/networks.yaml", 9,
         "network 'ib-x': source: String should have at least 1 character (got '')"),
    ]


def test_duplicate_alias_across_files_names_both_places():
    with pytest.raises(KbError) as info:
        load("base", "dup_alias")
    [d] = info.value.diagnostics
    assert d.message == "duplicate GPU name or alias 'a100' (already used by GPU 'A100-80G-SXM')"
    assert (Path(d.span.file).relative_to(FIX).as_posix(), d.span.line, d.span.col) == \
        ("dup_alias/gpus.yaml", 3, 26)
    [note] = d.notes
    assert note.message == "first defined here"
    assert (Path(note.span.file).relative_to(FIX).as_posix(), note.span.line) == ("base/gpus.yaml", 3)
    assert "override" in d.hint


def test_duplicate_within_one_file(tmp_path):
    base = (FIX / "base" / "gpus.yaml").read_text()
    t4 = base[base.index("  - name: T4"):]
    (tmp_path / "gpus.yaml").write_text(base + t4.replace("name: T4", "name: t4"))
    msgs = [m for _, _, m in errors(load_catalog, [tmp_path])]
    assert msgs == ["duplicate GPU name or alias 't4' (already used by GPU 'T4')"]


def test_alias_repeating_own_name(tmp_path):
    text = (FIX / "base" / "models.yaml").read_text().replace("[tiny]", "[tiny, TINY-LLM]")
    (tmp_path / "models.yaml").write_text(text)
    assert [(line, m) for _, line, m in errors(load_catalog, [tmp_path])] == [
        (3, "model 'tiny-llm' lists 'TINY-LLM' twice (names and aliases ignore case)")]


def test_syntax_error_has_parser_position():
    assert errors(load, "syntax_error") == [
        ("syntax_error/gpus.yaml", 4, "YAML syntax error: mapping values are not allowed here")]


def test_yaml_bomb_is_refused():
    assert errors(load, "bomb") == [
        ("bomb/gpus.yaml", 1, "YAML too large or uses too many aliases (more than 200000 nodes)")]


def test_binary_file_is_refused():
    assert errors(load, "binary") == [
        ("binary/gpus.yaml", 5, "file looks binary (it contains NUL bytes); expected UTF-8 text")]


def test_missing_directory():
    assert errors(load, "no_such_dir") == [("no_such_dir", 0, "catalog directory not found")]


def test_pack_override_needs_a_reason():
    assert errors(load, "base", "override_no_reason") == [
        ("override_no_reason/gpus.yaml", 3,
         "override on GPU 'A100-80G-SXM' needs a non-empty reason string")]


def test_pack_override_with_reason_replaces_entry():
    cat = load("base", "override_reason")
    gpu = cat.gpu("a100")
    assert gpu.hbm_gbps == 1800
    assert gpu.override_reason == "our nodes run HBM at a lower clock (measured 1800 GB/s)"
    assert gpu.span.file.endswith("override_reason/gpus.yaml")
    [ov] = cat.overrides
    assert (ov.kind, ov.name, ov.replaced) == ("gpu", "A100-80G-SXM", "A100-80G-SXM")
    assert ov.replaced_span.file.endswith("base/gpus.yaml") and ov.replaced_span.line == 2
    # aliases of the replaced entry that the new one does not repeat are gone
    assert errors(cat.gpu, "A100-80G")[0][2].startswith("unknown GPU 'A100-80G'")
    assert cat.gpu("T4").name == "T4"  # untouched entries stay


def test_override_that_replaces_nothing():
    assert errors(load, "override_reason") == [
        ("override_reason/gpus.yaml", 3, "override on GPU 'A100-80G-SXM' replaces nothing: "
         "no earlier GPU has this name or one of its aliases")]


def test_wrong_types_are_rejected(tmp_path):
    text = (FIX / "base" / "networks.yaml").read_text().replace("gbps: 400", 'gbps: "400"')
    (tmp_path / "networks.yaml").write_text(text)
    assert errors(load_catalog, [tmp_path]) == [
        (str(tmp_path / "networks.yaml"), 4,
         "network 'ib-400': gbps: Input should be a valid number (got '400')")]


def test_all_missing_fields_in_one_diagnostic(tmp_path):
    (tmp_path / "networks.yaml").write_text("networks:\n  - name: n\n    gbps: 1\n")
    assert [(line, m) for _, line, m in errors(load_catalog, [tmp_path])] == [
        (2, "network 'n' is missing required fields: 'source', 'kind'")]


def test_entries_must_be_mappings(tmp_path):
    (tmp_path / "gpus.yaml").write_text("gpus:\n  - just-a-name\n")
    (tmp_path / "models.yaml").write_text("models: {a: 1}\n")
    assert [(line, m) for _, line, m in errors(load_catalog, [tmp_path])] == [
        (2, "each entry under 'gpus' must be a mapping"),
        (1, "'models' must be a list of entries"),
    ]


# ---- yamlpos ---------------------------------------------------------------------


def test_positions_of_keys_and_items():
    data, pos = load_yaml("gpus:\n  - name: A\n    memory_gib: 80\n  - name: B\n", file="t.yaml")
    assert data == {"gpus": [{"name": "A", "memory_gib": 80}, {"name": "B"}]}
    assert str(pos[("gpus",)]) == "t.yaml:1:1"
    assert str(pos[("gpus", 1)]) == "t.yaml:4:5"
    assert str(pos[("gpus", 0, "memory_gib")]) == "t.yaml:3:5"


def test_merge_keys_keep_origin_positions():
    data, pos = load_yaml("base: &b {x: 1, y: 2}\nitem:\n  <<: *b\n  y: 3\n")
    assert data["item"] == {"x": 1, "y": 3}
    assert pos[("item", "x")].line == 1 and pos[("item", "y")].line == 4


def test_duplicate_key_is_an_error():
    assert errors(load_yaml, "a: 1\nb: 2\na: 3\n") == [("<string>", 3, "duplicate key 'a'")]


def test_yaml_limits(tmp_path):
    assert errors(load_yaml, "a: [1, 2, 3, 4]\n", max_nodes=4) == [
        ("<string>", 1, "YAML too large or uses too many aliases (more than 4 nodes)")]
    assert errors(load_yaml, "a: 123456\n", max_bytes=5) == [
        ("<string>", 0, "file is too large (over 5 bytes)")]
    assert errors(load_yaml, "&a [*a]\n") == [
        ("<string>", 1, "YAML alias refers to itself (recursive data)")]
    assert errors(load_yaml, "[" * 5000 + "]" * 5000) == [("<string>", 0, "YAML nested too deeply")]
    assert errors(load_yaml, "x: " + "[" * 150 + "]" * 150) == [
        ("<string>", 1, "YAML nested too deeply (more than 100 levels)")]


def test_yaml_refuses_bad_files(tmp_path):
    assert errors(load_yaml, tmp_path) == [(str(tmp_path), 0, "is a directory, not a file")]
    assert errors(load_yaml, tmp_path / "none.yaml") == [
        (str(tmp_path / "none.yaml"), 0, "file not found")]
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("a: 1\nname: caf\u00e9\n".encode("latin-1"))
    assert errors(load_yaml, bad) == [(str(bad), 2, "file is not valid UTF-8 (byte 0xe9)")]


def test_yaml_other_errors():
    assert errors(load_yaml, "a: !!python/object:os.system x\n") == [
        ("<string>", 1, "YAML error: could not determine a constructor for the tag "
         "'tag:yaml.org,2002:python/object:os.system'")]
    assert errors(load_yaml, "a: 1\n---\nb: 2\n") == [
        ("<string>", 2, "YAML syntax error: but found another document")]
    assert errors(load_yaml, "a: \x07\n") == [
        ("<string>", 1, "YAML syntax error: unacceptable character #x0007")]
    assert errors(load_yaml, "? [1, 2]\n: x\n") == [("<string>", 1, "mapping keys must be plain scalars")]
    assert load_yaml("") == (None, {})
    assert load_yaml("# only a comment\n") == (None, {})


@pytest.mark.ci  # ~2.4 s; by default test_fuzz_inputs.py's project files (load_yaml) and
# the limits above
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_yaml_never_raises_anything_but_kberror(blob):
    try:
        load_yaml(blob)
    except KbError:
        pass


# ---- Hugging Face configs ---------------------------------------------------------


def test_hf_dense_config_counts_parameters_exactly():
    m = model_from_hf_config(FIX / "hf" / "Llama-3.1-8B" / "config.json")
    assert m.name == "Llama-3.1-8B"
    assert (m.kind, m.model_type, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim) == \
        ("llm", "llama", 32, 4096, 32, 8, 128)
    assert (m.intermediate, m.vocab, m.max_positions, m.tied_embeddings) == (14336, 128256, 131072, False)
    assert round(m.params_b * 1e9) == 8_030_261_248  # the published safetensors total


def test_hf_moe_config():
    m = model_from_hf_config(FIX / "hf" / "mixtral-8x7b.json", name="mixtral")
    assert (m.name, m.experts, m.experts_active) == ("mixtral", 8, 2)
    assert round(m.params_b * 1e9) == 46_702_792_704


def test_hf_multimodal_reads_text_config():
    m = model_from_hf_config(FIX / "hf" / "multimodal.json")
    assert (m.model_type, m.layers, m.hidden, m.head_dim, m.kv_heads, m.tied_embeddings) == \
        ("gemma3", 34, 2560, 256, 4, True)
    attn = 2560 * 256 * (2 * 8 + 2 * 4)
    norms = 4 * 2560 + 2 * 256  # Gemma 3: four RMSNorms a layer, and q_norm, k_norm
    expected = 34 * (attn + 3 * 2560 * 10240 + norms) + 262208 * 2560 + 2560
    assert round(m.params_b * 1e9) == expected


def test_hf_bad_configs():
    hf = FIX / "hf"
    assert errors(model_from_hf_config, hf / "not_json.json") == [
        ("hf/not_json.json", 3, "not valid JSON: Expecting ',' delimiter")]
    assert errors(model_from_hf_config, hf / "missing_field.json") == [
        ("hf/missing_field.json", 0, "missing field 'hidden_size' in Hugging Face config "
                                     "(model_type 'llama' needs it for hidden)")]
    assert errors(model_from_hf_config, hf / "negative.json") == [
        ("hf/negative.json", 5, "field 'num_attention_heads' must be a positive integer (got -32)"),
        ("hf/negative.json", 7, "field 'vocab_size' must be a positive integer (got 0)"),
    ]
    assert errors(model_from_hf_config, hf / "kv_gt_heads.json") == [
        ("hf/kv_gt_heads.json", 6, "num_key_value_heads: kv_heads (64) must not exceed heads (32)")]
    assert errors(model_from_hf_config, hf / "list.json") == [
        ("hf/list.json", 1, "expected a JSON object (a Hugging Face config.json)")]
    assert errors(model_from_hf_config, hf / "absent.json") == [("hf/absent.json", 0, "file not found")]
    assert errors(model_from_hf_config, FIX / "binary" / "gpus.yaml") == [
        ("binary/gpus.yaml", 5, "file looks binary (it contains NUL bytes); expected UTF-8 text")]


# ---- schemas and facts -----------------------------------------------------------


def test_fact_field_types():
    assert fact_field_type("gpu", "memory_gib") == "num"
    assert fact_field_type("gpu", "fa3") == "bool"
    assert fact_field_type("gpu", "pcie_gen") == "int"
    assert fact_field_type("gpu", "nvlink_gen") == "int"  # Optional unwrapped
    assert fact_field_type("gpu", "arch") == ("enum", ("volta", "turing", "ampere", "ada", "hopper",
                                                       "blackwell", "cdna3", "davinci"))
    assert fact_field_type("model", "family") == "str"
    assert fact_field_type("model", "kv_heads") == "int"
    assert fact_field_type("network", "gbps") == "num"
    assert fact_field_type("query", "seq_len") == "int"
    for bookkeeping in ("name", "aliases", "alias_note", "source", "notes"):
        assert fact_field_type("gpu", bookkeeping) is None
    assert fact_field_type("model", "text_encoders") is None
    assert fact_field_type("gpu", "memroy_gib") is None
    assert fact_field_type("cluster", "nodes") is None


def test_fact_fields_lists():
    assert fact_fields("network") == ["kind", "gbps"]
    assert fact_fields("query") == ["num_gpus", "nodes", "gpus_per_node", "seq_len", "height",
                                    "width", "frames", "host_headroom_pct", "global_batch",
                                    "inter_node_gbps", "headroom_pct"]
    assert "memory_gib" in fact_fields("gpu") and "source" not in fact_fields("gpu")
    assert fact_fields("nope") == []


def test_query_facts_validation():
    q = QueryFacts(num_gpus=8, nodes=2, gpus_per_node=4)
    assert (q.seq_len, q.headroom_pct) == (2048, 10)
    with pytest.raises(Exception):
        QueryFacts(num_gpus=0)
    with pytest.raises(Exception):
        QueryFacts(bogus=1)


def test_gpu_flags_must_match_tflops():
    base = dict(name="X", vendor="nvidia", arch="ada", memory_gib=24, bf16_tflops=100,
                fp16_tflops=100, fp32_tflops=50, fp8_tflops=0, hbm_gbps=1000, link="pcie",
                link_gbps=32, pcie_gen=4, bf16=True, fp8=True, fa2=True, fa3=False, source="s")
    with pytest.raises(Exception, match="fp8 is true but fp8_tflops is 0"):
        GpuSpec.model_validate(base)
    assert GpuSpec.model_validate({**base, "fp8_tflops": 200}).fp8


def test_model_head_dim_default():
    m = ModelSpec.model_validate(dict(name="m", kind="llm", family="f", model_type="llama",
                                      params_b=1, layers=2, hidden=768, heads=12, kv_heads=4,
                                      intermediate=2048, vocab=1000, max_positions=512, source="s"))
    assert m.head_dim == 64 and m.span is None


# ---- the models come from the KB's vocabulary, built when first needed ------------


def test_importing_the_catalog_builds_no_model():
    import subprocess
    import sys
    code = ("import sys, kbsolve.catalog.schema, kbsolve.catalog\n"
            "print('pydantic' in sys.modules, 'lark' in sys.modules,"
            " 'kbsolve.catalog._models' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_shipped_models_follow_the_vocabulary():
    from kbsolve.dsl.vocab import shipped
    vocab = shipped()
    assert vocab.enums["gpu_vendor"].values == ("nvidia", "amd", "huawei")
    assert vocab.memory_levels == ("allocated", "reserved", "device")
    assert vocab.default("query.headroom_pct") == 10 and vocab.default("query.seq_len") == 2048
    assert fact_field_type("gpu", "memory_gib") == "num" and vocab.field("gpu", "memory_gib").unit == "GiB"
    assert list(GpuSpec.model_fields)[:6] == ["name", "aliases", "source", "notes", "alias_note",
                                              "vendor"]
    from kbsolve.catalog.schema import model_class
    assert model_class("gpu", vocab) is GpuSpec  # one class per vocabulary, cached
