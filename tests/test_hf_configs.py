"""Any Hugging Face config.json (issue 15, part 3): the readers of
kb/catalog/hf_configs.yaml against published configs and parameter counts.

Each config below holds the published config.json's architecture keys (the
Hugging Face repo named in its id; other keys such as dropout, token ids and
rope settings are left out, as the reader ignores them). Each count is the
model card's or the checkpoint's published total.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbsolve.catalog import hf_param_count, model_from_hf_config, shipped_table
from kbsolve.catalog.hf import load_hf_table
from kbsolve.cli.main import main
from kbsolve.diagnostics import DiagnosticSink, KbError, SourceCache

CONFIGS = {
    # openai-community/gpt2: 124,439,808 (the GPT-2 small count, model.num_parameters())
    "gpt2": ({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
              "n_positions": 1024, "n_ctx": 1024, "n_inner": None, "vocab_size": 50257,
              "activation_function": "gelu_new"}, 124_439_808),
    # EleutherAI/gpt-j-6b model card: n_parameters 6,053,381,344
    "gpt-j-6b": ({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 28,
                  "n_positions": 2048, "rotary_dim": 64, "n_inner": None, "vocab_size": 50400,
                  "tie_word_embeddings": False}, 6_053_381_344),
    # EleutherAI/gpt-neox-20b: 20,554,567,680 (GPT-NeoX-20B paper, Table 1 notes)
    "gpt-neox-20b": ({"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
                      "num_hidden_layers": 44, "intermediate_size": 24576, "vocab_size": 50432,
                      "max_position_embeddings": 2048, "rotary_pct": 0.25,
                      "use_parallel_residual": True, "tie_word_embeddings": False},
                     20_554_567_680),
    # bigscience/bloom-7b1 model card: 7,069,016,064 parameters
    "bloom-7b1": ({"model_type": "bloom", "hidden_size": 4096, "n_head": 32, "n_layer": 30,
                   "vocab_size": 250880, "offset_alibi": 100, "pretraining_tp": 1},
                  7_069_016_064),
    # tiiuae/falcon-7b model card: 7B parameters
    "falcon-7b": ({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
                   "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
                   "parallel_attn": True, "bias": False, "new_decoder_architecture": False,
                   "alibi": False}, 7_000_000_000),
    # Qwen/Qwen-7B (Qwen-1, remote code) README: 7.7B parameters
    "qwen-7b": ({"model_type": "qwen", "hidden_size": 4096, "intermediate_size": 22016,
                 "num_attention_heads": 32, "num_hidden_layers": 32, "kv_channels": 128,
                 "max_position_embeddings": 32768, "seq_length": 8192, "vocab_size": 151936,
                 "no_bias": True, "rotary_pct": 1.0, "tie_word_embeddings": False},
                7_700_000_000),
    # meta-llama/Llama-3.1-8B: 8,030,261,248 (safetensors total)
    "llama-3.1-8b": ({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
                      "num_attention_heads": 32, "num_key_value_heads": 8,
                      "num_hidden_layers": 32, "vocab_size": 128256,
                      "max_position_embeddings": 131072, "tie_word_embeddings": False},
                     8_030_261_248),
    # mistralai/Mistral-7B-v0.1: 7,241,732,096 (safetensors total)
    "mistral-7b": ({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
                    "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096,
                    "tie_word_embeddings": False}, 7_241_732_096),
    # Qwen/Qwen2.5-7B model card: 7.61B parameters
    "qwen2.5-7b": ({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                    "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
                    "vocab_size": 152064, "max_position_embeddings": 131072,
                    "tie_word_embeddings": False}, 7_610_000_000),
    # Qwen/Qwen3-8B model card: 8.2B parameters
    "qwen3-8b": ({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
                  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                  "num_hidden_layers": 36, "vocab_size": 151936,
                  "max_position_embeddings": 40960, "tie_word_embeddings": False},
                 8_190_000_000),
    # google/gemma-7b: 8.54B (safetensors total)
    "gemma-7b": ({"model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576,
                  "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
                  "num_hidden_layers": 28, "vocab_size": 256000,
                  "max_position_embeddings": 8192}, 8_540_000_000),
    # google/gemma-2-9b: 9,241,705,984 (safetensors total)
    "gemma-2-9b": ({"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
                    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                    "num_hidden_layers": 42, "vocab_size": 256000,
                    "max_position_embeddings": 8192, "final_logit_softcapping": 30.0,
                    "attn_logit_softcapping": 50.0}, 9_241_705_984),
    # microsoft/phi-2 safetensors: 2.78B parameters (model card: "2.7 billion")
    "phi-2": ({"model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240,
               "num_attention_heads": 32, "num_key_value_heads": None, "num_hidden_layers": 32,
               "vocab_size": 51200, "max_position_embeddings": 2048,
               "partial_rotary_factor": 0.4, "hidden_act": "gelu_new",
               "tie_word_embeddings": False}, 2_780_000_000),
    # microsoft/Phi-3-mini-4k-instruct model card: 3.8B parameters
    "phi-3-mini": ({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
                    "num_attention_heads": 32, "num_key_value_heads": 32,
                    "num_hidden_layers": 32, "vocab_size": 32064,
                    "max_position_embeddings": 4096, "tie_word_embeddings": False},
                   3_800_000_000),
    # mistralai/Mixtral-8x7B-v0.1: 46.7B parameters (12.9B active)
    "mixtral-8x7b": ({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                      "num_attention_heads": 32, "num_key_value_heads": 8,
                      "num_hidden_layers": 32, "num_local_experts": 8, "num_experts_per_tok": 2,
                      "vocab_size": 32000, "max_position_embeddings": 32768,
                      "tie_word_embeddings": False}, 46_700_000_000),
    # Qwen/Qwen1.5-MoE-A2.7B model card: 14.3B parameters in total, 2.7B activated
    "qwen1.5-moe-a2.7b": ({"model_type": "qwen2_moe", "hidden_size": 2048,
                           "intermediate_size": 5632, "moe_intermediate_size": 1408,
                           "shared_expert_intermediate_size": 5632, "num_experts": 60,
                           "num_experts_per_tok": 4, "decoder_sparse_step": 1,
                           "num_attention_heads": 16, "num_key_value_heads": 16,
                           "num_hidden_layers": 24, "vocab_size": 151936,
                           "max_position_embeddings": 8192, "tie_word_embeddings": False},
                          14_300_000_000),
    # Qwen/Qwen3-30B-A3B model card: 30.5B in total, 3.3B activated
    "qwen3-30b-a3b": ({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                       "moe_intermediate_size": 768, "num_experts": 128,
                       "num_experts_per_tok": 8, "num_attention_heads": 32,
                       "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48,
                       "vocab_size": 151936, "max_position_embeddings": 40960,
                       "tie_word_embeddings": False}, 30_500_000_000),
    # deepseek-ai/DeepSeek-V2-Lite model card: 15.7B total parameters, 2.4B activated
    "deepseek-v2-lite": ({"model_type": "deepseek_v2", "hidden_size": 2048,
                          "intermediate_size": 10944, "moe_intermediate_size": 1408,
                          "n_routed_experts": 64, "n_shared_experts": 2,
                          "num_experts_per_tok": 6, "first_k_dense_replace": 1,
                          "moe_layer_freq": 1, "num_attention_heads": 16,
                          "num_key_value_heads": 16, "num_hidden_layers": 27,
                          "q_lora_rank": None, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                          "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 102400,
                          "max_position_embeddings": 163840, "tie_word_embeddings": False},
                         15_700_000_000),
    # deepseek-ai/DeepSeek-V3: 671B main-model parameters (technical report §2)
    "deepseek-v3": ({"model_type": "deepseek_v3", "hidden_size": 7168,
                     "intermediate_size": 18432, "moe_intermediate_size": 2048,
                     "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
                     "first_k_dense_replace": 3, "moe_layer_freq": 1,
                     "num_attention_heads": 128, "num_key_value_heads": 128,
                     "num_hidden_layers": 61, "q_lora_rank": 1536, "kv_lora_rank": 512,
                     "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
                     "vocab_size": 129280, "max_position_embeddings": 163840,
                     "num_nextn_predict_layers": 1, "tie_word_embeddings": False},
                    671_000_000_000),
}


def _write(tmp_path: Path, name: str, config: dict) -> Path:
    path = tmp_path / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_published_config_counts_its_published_parameters(tmp_path, name):
    config, published = CONFIGS[name]
    model = model_from_hf_config(_write(tmp_path, name, config))
    assert abs(model.params_b * 1e9 / published - 1) < 0.02, (name, model.params_b)
    assert model.model_type == config["model_type"] and model.name == name
    # the catalog's own count agrees with the reader's (the same table, canonical fields);
    # MLA's ranks are no catalog fields, so a DeepSeek entry cannot be recounted
    if config["model_type"].startswith("deepseek"):
        with pytest.raises(KbError, match="no value for .*kv_lora_rank"):
            hf_param_count(model.model_dump())
    else:
        assert hf_param_count(model.model_dump()) == round(model.params_b * 1e9)


# LlamaFactory's chat template by the README's supported-models table (None: its default)
TEMPLATES = {"llama-3.1-8b": "llama3", "qwen2.5-7b": "qwen", "qwen3-8b": "qwen3",
             "qwen3-30b-a3b": "qwen3", "qwen1.5-moe-a2.7b": "qwen", "qwen-7b": "qwen",
             "mistral-7b": "mistral", "mixtral-8x7b": "mistral", "phi-3-mini": "phi",
             "gemma-7b": "gemma", "gemma-2-9b": "gemma2", "deepseek-v3": "deepseek3",
             "gpt2": None, "phi-2": None}


def test_a_config_gets_its_family_chat_template(tmp_path):
    for name, template in TEMPLATES.items():
        model = model_from_hf_config(_write(tmp_path, name, CONFIGS[name][0]))
        assert getattr(model, "template", None) == template, name
    llama2 = dict(CONFIGS["llama-3.1-8b"][0], vocab_size=32000)  # not a Llama 3 vocabulary
    assert getattr(model_from_hf_config(_write(tmp_path, "llama-2", llama2)), "template",
                   None) is None


def test_the_plan_writes_the_config_s_template(tmp_path):
    from kbsolve import api
    path = _write(tmp_path, "Qwen2.5-7B-Instruct", CONFIGS["qwen2.5-7b"][0])
    estimate = api.estimate({"gpus": "1xH100", "model": str(path)}, {})
    assert estimate.config["template"] == "qwen"


def test_the_quirks_are_read_as_the_table_says(tmp_path):
    def read(name):
        return model_from_hf_config(_write(tmp_path, name, CONFIGS[name][0]))
    gpt2 = read("gpt2")  # attribute_map aliases, n_inner null is 4 x hidden, tied by default
    assert (gpt2.hidden, gpt2.layers, gpt2.heads, gpt2.max_positions, gpt2.intermediate,
            gpt2.tied_embeddings, gpt2.mlp) == (768, 12, 12, 1024, 3072, True, "gelu")
    bloom = read("bloom-7b1")  # ALiBi: no max positions at all
    assert (bloom.max_positions, bloom.intermediate, bloom.tied_embeddings) == \
        (None, 16384, True)
    falcon = read("falcon-7b")  # multi-query: one key/value head
    assert (falcon.kv_heads, falcon.head_dim, falcon.max_positions) == (1, 64, 2048)
    qwen = read("qwen-7b")  # intermediate_size is both SwiGLU branches; seq_length
    assert (qwen.intermediate, qwen.max_positions, qwen.mlp) == (11008, 8192, "swiglu")
    assert read("phi-2").mlp == "gelu" and read("phi-2").kv_heads == 32
    assert read("gemma-2-9b").head_dim == 256 and read("gemma-2-9b").tied_embeddings
    moe = read("qwen1.5-moe-a2.7b")  # one shared expert four routed experts wide
    assert (moe.experts, moe.experts_active, moe.moe_intermediate, moe.shared_experts) == \
        (60, 4, 1408, 4)
    v2 = read("deepseek-v2-lite")  # MLA: head_dim is v_head_dim
    assert (v2.experts, v2.experts_active, v2.shared_experts, v2.head_dim) == (64, 6, 2, 128)


def test_missing_fields_are_one_error_naming_them_and_the_model_type(tmp_path):
    config = {k: v for k, v in CONFIGS["gpt2"][0].items() if k not in ("n_embd", "vocab_size")}
    path = _write(tmp_path, "gpt2-broken", config)
    with pytest.raises(KbError) as info:
        model_from_hf_config(path)
    assert [d.message for d in info.value.diagnostics] == [
        "missing fields 'n_embd' and 'vocab_size' in Hugging Face config "
        "(model_type 'gpt2' needs them for hidden, vocab)"]
    assert "hidden from n_embd or hidden_size" in info.value.diagnostics[0].hint
    mla = {k: v for k, v in CONFIGS["deepseek-v2-lite"][0].items() if k != "kv_lora_rank"}
    with pytest.raises(KbError, match=r"missing field 'kv_lora_rank' .*'deepseek_v2'"):
        model_from_hf_config(_write(tmp_path, "mla", mla))


def test_the_cli_refuses_a_config_missing_a_field_with_exit_2(tmp_path, capsys):
    config = {k: v for k, v in CONFIGS["bloom-7b1"][0].items() if k != "n_layer"}
    path = _write(tmp_path, "bloom", config)
    code = main(["--gpus", "8xA100", "--model", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "missing field 'n_layer'" in err and "model_type 'bloom'" in err
    assert "Traceback" not in err


def test_estimate_json_carries_the_model_facts(tmp_path):
    import kbsolve
    path = _write(tmp_path, "mixtral", CONFIGS["mixtral-8x7b"][0])
    facts = kbsolve.estimate({"gpus": "8xH100", "model": str(path)}, {}).model_facts
    assert (facts["layers"], facts["hidden"], facts["heads"], facts["kv_heads"],
            facts["head_dim"], facts["vocab"], facts["experts"], facts["experts_active"]) == \
        (32, 4096, 32, 8, 128, 32000, 8, 2)
    assert facts["params"] == 46_702_792_704  # the KB's `params` of the config's count
    assert 12.5e9 < facts["active_params"] < 13.3e9  # published: 12.9B active


def test_a_bad_table_entry_is_reported_at_its_line(tmp_path):
    path = tmp_path / "hf_configs.yaml"
    path.write_text("fallback: base\nhf_configs:\n"
                    "  - model_type: base\n    because: b\n    source: s\n"
                    "    fields:\n      hidden: {keys: [hidden_size]}\n"
                    "    count:\n      params: \"hiden * 2\"\n")
    sink = DiagnosticSink()
    load_hf_table([path], sink, SourceCache())
    assert [(d.span.line, d.message) for d in sink.errors] == [
        (9, "model_type 'base': count 'params' reads 'hiden', which is no field or count "
            "term; did you mean 'hidden'?")]


def test_an_unknown_model_type_is_read_as_the_fallback(tmp_path):
    config = dict(CONFIGS["llama-3.1-8b"][0], model_type="my_llama")
    model = model_from_hf_config(_write(tmp_path, "mine", config))
    assert round(model.params_b * 1e9) == 8_030_261_248
    assert shipped_table().reader("my_llama").model_type == shipped_table().fallback


_TABLE = ("fallback: base\nhf_configs:\n"
          "  - model_type: base\n    because: b\n    source: s\n"
          "    fields:\n      hidden: {keys: [hidden_size]}\n"
          "    count:\n      params: \"hidden * {n}\"\n")


def test_a_table_read_again_in_one_process_sees_its_file_change(tmp_path):
    path = tmp_path / "hf_configs.yaml"
    path.write_text(_TABLE.replace("{n}", "2"))
    first = load_hf_table([path], DiagnosticSink(), SourceCache())
    again = load_hf_table([path], DiagnosticSink(), SourceCache())
    assert again.readers == first.readers and again.readers is not first.readers
    path.write_text(_TABLE.replace("{n}", "3"))
    changed = load_hf_table([path], DiagnosticSink(), SourceCache())
    assert changed.reader("base").count["params"] == "hidden * 3"
    path.write_text(_TABLE.replace("{n}", "2").replace("hidden * ", "hiden * "))
    for _ in range(2):  # a table with a problem reports it on every read
        sink = DiagnosticSink()
        load_hf_table([path], sink, SourceCache())
        assert [d.span.line for d in sink.errors] == [9]


def test_a_table_taken_again_fills_the_caller_s_sources(tmp_path):
    path = tmp_path / "hf_configs.yaml"
    path.write_text(_TABLE.replace("{n}", "2"))
    load_hf_table([path], DiagnosticSink(), SourceCache())
    sources = SourceCache()
    table = load_hf_table([path], DiagnosticSink(), sources)
    assert sources.line(str(path), 9).strip() == 'params: "hidden * 2"'
    table.readers.clear()  # the caller's own dict: the next read is whole
    assert load_hf_table([path], DiagnosticSink(), SourceCache()).reader("base").model_type == "base"
