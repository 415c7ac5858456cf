"""The shipped model catalog: coverage of LLMs and Flow-Factory models, and internal consistency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbsolve.catalog import Catalog, hf_param_count, load_catalog
from kbsolve.cli.main import main

SHIPPED = Path(__file__).resolve().parents[1] / "kb" / "catalog"

# Flow-Factory model registry keys (fact sheet table 2; `bagel` lives on branch `bagel`).
# wan2_v2v and ltx2_i2av are task variants that load the same checkpoints as
# wan2_t2v / ltx2_t2av, so no catalog entry carries them as its model_type.
FF_MODEL_TYPES = {"sd3-5", "flux1", "flux1-kontext", "flux2", "flux2-klein", "qwen-image",
                  "qwen-image-edit-plus", "z-image", "wan2_t2v", "wan2_i2v", "ltx2_t2av", "bagel"}

MLA_TYPES = {"deepseek_v3"}  # multi-head latent attention: the generic shape formula does not apply


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog([SHIPPED])


def llms(cat: Catalog):
    return [m for m in cat.models.values() if m.kind == "llm"]


def test_at_least_30_llms_with_hf_ids_and_sources(shipped):
    found = llms(shipped)
    assert len(found) >= 30, sorted(m.name for m in found)
    for m in found:
        assert m.hf_id and "/" in m.hf_id, m.name
        assert "huggingface.co" in m.source or m.source.startswith("hf:"), m.name


def test_required_llm_families_present(shipped):
    for name in ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b",
                 "qwen2.5-32b", "qwen2.5-72b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b",
                 "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "llama3.2-1b",
                 "llama3.2-3b", "llama3-8b", "llama3-70b", "llama3.1-405b", "llama3.3-70b",
                 "mistral-7b-v0.3", "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3", "deepseek-r1",
                 "glm4-9b", "gemma2-9b", "gemma2-27b", "gemma3-4b", "gemma3-12b", "gemma3-27b",
                 "phi3-mini", "phi3-medium", "phi4"]:
        assert shipped.model(name).kind == "llm", name


def test_every_flow_factory_model_type_present(shipped):
    types = {m.model_type for m in shipped.models.values() if m.kind != "llm"}
    assert FF_MODEL_TYPES <= types, FF_MODEL_TYPES - types
    for m in shipped.models.values():
        if m.kind != "llm":
            assert m.model_type in FF_MODEL_TYPES, (m.name, m.model_type)


@pytest.mark.parametrize("alias, name", [
    ("wan14b", "wan2.1-t2v-14b"), ("WAN14B", "wan2.1-t2v-14b"), ("flux-dev", "flux1-dev"),
    ("qwen3-8b", "qwen3-8b"), ("Qwen/Qwen3-8B", "qwen3-8b"), ("llama3-70b", "llama3-70b"),
    ("llama3.1-8b", "llama3-8b"), ("mixtral-8x7b", "mixtral-8x7b"), ("deepseek-v3", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1"), ("Qwen/Qwen2.5-7B", "qwen2.5-7b"),
    ("bagel", "bagel-7b-mot"), ("ltx2", "ltx-2"), ("flux-kontext", "flux1-kontext-dev"),
])
def test_aliases_resolve(shipped, alias, name):
    assert shipped.model(alias).name == name


def test_kv_heads_divide_heads(shipped):
    for m in llms(shipped):
        assert m.heads % m.kv_heads == 0, m.name
        assert m.head_dim is not None and m.head_dim > 0, m.name


def test_moe_fields_consistent(shipped):
    for m in llms(shipped):
        if m.experts > 1:
            assert m.moe_intermediate, m.name
            assert 1 < m.experts_active <= m.experts, m.name
        else:
            assert m.experts_active == 1 and m.shared_experts == 0 and m.moe_intermediate is None, m.name
    ds = shipped.model("deepseek-v3")
    assert (ds.layers, ds.hidden, ds.heads, ds.kv_heads) == (61, 7168, 128, 128)
    assert (ds.experts, ds.experts_active, ds.shared_experts, ds.params_b) == (256, 8, 1, 671.0)
    assert "MLA" in ds.notes
    q = shipped.model("qwen3-30b-a3b")
    assert (q.experts, q.experts_active, q.moe_intermediate) == (128, 8, 768)


def test_dense_param_counts_match_shape_within_10_percent(shipped):
    checked = 0
    for m in llms(shipped):
        if m.experts > 1 or m.model_type in MLA_TYPES:
            continue
        count = hf_param_count(m.model_dump(), m.tied_embeddings) / 1e9
        assert abs(count - m.params_b) / m.params_b < 0.10, (m.name, count, m.params_b)
        checked += 1
    assert checked >= 25


def test_moe_non_mla_param_counts_match_shape(shipped):
    for m in llms(shipped):
        if m.experts > 1 and m.model_type not in MLA_TYPES:
            count = hf_param_count(m.model_dump(), m.tied_embeddings) / 1e9
            assert abs(count - m.params_b) / m.params_b < 0.02, (m.name, count)


def test_known_shapes(shipped):
    assert shipped.model("llama3.1-405b").layers == 126
    assert shipped.model("gemma2-9b").head_dim == 256  # differs from 3584 // 16
    assert shipped.model("qwen2.5-72b").intermediate == 29568
    assert shipped.model("glm4-9b").kv_heads == 2
    assert shipped.model("mistral-7b-v0.3").vocab == 32768


def test_diffusion_geometry(shipped):
    for m in shipped.models.values():
        if m.kind == "llm":
            continue
        assert m.hf_id, m.name
        assert m.denoiser_hidden % m.denoiser_heads == 0, m.name
        assert m.text_encoders, m.name
        if m.kind == "video":
            assert m.vae_temporal > 1, m.name
        else:
            assert m.vae_temporal == 1, m.name
    ti2v = shipped.model("wan2.2-ti2v-5b")
    assert (ti2v.latent_channels, ti2v.vae_spatial * ti2v.patch_size) == (48, 32)
    ltx = shipped.model("ltx-2")
    assert (ltx.kind, ltx.latent_channels, ltx.vae_spatial, ltx.vae_temporal, ltx.patch_size) == \
        ("video", 128, 32, 8, 1)
    a14b = shipped.model("wan2.2-t2v-a14b")
    assert a14b.denoiser_experts == 2 and "boundary" in a14b.notes
    assert shipped.model("flux2-dev").latent_channels == 32
    assert "bagel" in shipped.model("bagel-7b-mot").notes


def test_cfg_doubling_flags(shipped):
    doubles = {"sd3.5-medium", "sd3.5-large", "qwen-image", "qwen-image-edit-2509", "z-image",
               "flux2-klein-base-4b", "flux2-klein-base-9b", "wan2.1-t2v-14b", "wan2.2-t2v-a14b",
               "ltx-2"}
    single = {"flux1-dev", "flux1-kontext-dev", "flux2-dev", "z-image-turbo"}
    for name in doubles:
        assert shipped.model(name).cfg_doubles is True, name
    for name in single:
        assert shipped.model(name).cfg_doubles is False, name


def test_cli_lists_models_as_json(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(["list", "models", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {row["name"] for row in rows}
    assert len(rows) == len(load_catalog([SHIPPED]).models)
    assert {"qwen3-235b-a22b", "deepseek-v3", "wan2.2-ti2v-5b", "ltx-2", "bagel-7b-mot"} <= names
