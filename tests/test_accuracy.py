"""The memory-accuracy bench: its mapping of published rows, and the issue's targets on the
development set (../shared/data/memory_measurements.yaml, skipped where it is absent)."""

import pytest

from bench import accuracy
from shared_data import shared_dir

LITGPT_FSDP_ROW = {"id": "litgpt-14a", "method": "lora", "distributed": "fsdp-full-shard",
                   "optimizer": "adamw", "micro_batch": 1, "precision": "bf16-true",
                   "gradient_checkpointing": "full", "attention": "sdpa", "packing": False,
                   "lora": {"rank": 8, "targets": ["q_proj", "v_proj"], "dropout": 0.05}}


def test_litgpt_fsdp_rows_carry_the_scripts_wrapping_and_no_sync():
    settings = accuracy.settings_for(LITGPT_FSDP_ROW, {"num_key_value_heads": 32})
    assert settings["sharding"] == "fsdp"
    assert settings["fsdp_no_sync"] == settings["fsdp_mixed_units"] == "true"
    assert settings["attention"] == "flash" and settings["packing"] == "false"
    assert settings["lora_targets"] == "qv"


def test_litgpt_multi_query_attention_takes_the_math_kernel():
    settings = accuracy.settings_for(LITGPT_FSDP_ROW, {"num_key_value_heads": 1})
    assert settings["attention"] == "math"


def test_torchtune_rows_return_fp32_logits_and_others_do_not():
    row = dict(LITGPT_FSDP_ROW, id="torchtune-31", distributed="none")
    assert accuracy.settings_for(row, {})["logits_fp32"] == "true"
    assert "logits_fp32" not in accuracy.settings_for(dict(row, id="peft-mmqa-60"), {})


def test_hf_rows_after_transformers_4_46_keep_16_bit_logits():
    row = dict(LITGPT_FSDP_ROW, id="unsloth-6", framework="hf-trainer", distributed="none")
    assert accuracy.settings_for(row, {})["logits_fp32"] == "true"
    later = dict(row, notes="[ctx:unsloth-ctx] Column 'Hugging Face+FA2'")
    assert "logits_fp32" not in accuracy.settings_for(later, {})


def test_axolotl_rows_before_transformers_4_46_keep_fp32_logits():
    row = dict(LITGPT_FSDP_ROW, id="axolotl-9", framework="axolotl", distributed="none",
               source="https://github.com/axolotl-ai-cloud/axolotl/pull/1428 (merged as "
                      "axolotl-ai-cloud/axolotl@2a1589f6f6fbe74a58f867f48ab9cb0c35cf9df9)")
    assert accuracy.settings_for(row, {})["logits_fp32"] == "true"
    later = dict(row, source="axolotl-ai-cloud/axolotl@eac4a61f55a9 examples/magistral")
    assert "logits_fp32" not in accuracy.settings_for(later, {})


def test_rows_that_repeat_another_rows_memory_figure_repeat_its_run():
    """Answer.AI's dual-4090 tables print the dual-3090 peaks: each memory_repeats row names a
    row of the same run (model, method, sharding, batch, length) with the same peak, and a
    different time (its own speed)."""
    _, rows = accuracy.load_rows(accuracy.data_files()[1:])
    by_id = {r["id"]: r for r in rows}
    repeats = [r for r in rows if r.get("memory_repeats")]
    assert len(repeats) == 7
    for row in repeats:
        first = by_id[row["memory_repeats"]]
        for key in ("model", "method", "distributed", "micro_batch", "seq_len", "peak", "unit",
                    "metric"):
            assert row[key] == first[key], (row["id"], key)
        assert row["gpu"] != first["gpu"]
        assert row["throughput"] != first["throughput"]


def test_adapters_the_model_cannot_express_are_skipped():
    assert accuracy.settings_for(dict(LITGPT_FSDP_ROW, method="ia3"), {}) is None


LLAMAFACTORY_FP16_ROW = {"id": "llamafactory-1", "framework": "llamafactory", "method": "lora",
                         "precision": "fp16-mixed", "optimizer": "adamw", "micro_batch": 4,
                         "grad_accum": 2, "gradient_checkpointing": "full", "attention": "sdpa",
                         "loss": "ce", "packing": False, "distributed": "none", "gpus": 1,
                         "lora": {"rank": 8, "targets": ["q_proj", "v_proj"]}}


def test_fp16_autocast_keeps_the_frozen_base_in_16_bits_where_the_script_does():
    settings = accuracy.settings_for(LLAMAFACTORY_FP16_ROW, {})
    assert settings["precision"] == "fp16-mixed" and settings["base_weights_16bit"] == "true"
    assert settings["grad_accum"] == "2" and settings["packing"] == "false"
    litgpt = accuracy.settings_for(dict(LITGPT_FSDP_ROW, precision="bf16-mixed"), {})
    assert litgpt["precision"] == "bf16-mixed" and "base_weights_16bit" not in litgpt


TORCHTITAN_FP8_ROW = {"id": "torchtitan-11", "framework": "torchtitan", "method": "full",
                      "precision": "fp8", "optimizer": "adamw", "micro_batch": 16, "gpus": 256,
                      "fp8": {"library": "torchao", "recipe": "tensorwise",
                              "fsdp_float8_all_gather": True},
                      "gradient_checkpointing": "full", "attention": "sdpa", "loss": "ce",
                      "packing": True, "distributed": "fsdp-full-shard", "seq_len": 8192,
                      "parallelism": {"dp_shard": 32, "tp": 8, "async_tp": False},
                      "source": "benchmarks/llama3_h100_202412_torchtitan.md"}


def test_torchtitan_fp8_with_tensor_parallelism():
    settings = accuracy.settings_for(TORCHTITAN_FP8_ROW, {})
    assert settings["precision"] == "bf16-mixed" and settings["fp8_linear"] == "true"
    assert settings["fp8_all_gather"] == "true" and settings["sharding"] == "fsdp"
    assert settings["tp"] == "8" and settings["sp"] == "true"  # torchtitan's TP plan is SP
    assert accuracy.cluster(TORCHTITAN_FP8_ROW) == (8, 3200)


def test_torchtitan_compiles_its_loss_where_its_version_did():
    """torchtitan compiles the loss under training.compile from 2025-04 (the Trainy runs at
    e7c0cae, the MI300X float8 table at 2c8b5947), not at the December 2024 benchmark."""
    row = dict(TORCHTITAN_FP8_ROW, compile=True, parallelism={"dp_shard": 256}, gpus=256,
               notes="Trainy team on WhiteFiber, June 2025; torchtitan e7c0cae, torch 2.8")
    assert accuracy.settings_for(row, {})["loss_compiled"] == "true"
    for other in (dict(row, notes="[ctx:torchtitan-2412] Table 3"), dict(row, compile=False),
                  dict(row, framework="torchtune", id="torchtune-42")):
        assert "loss_compiled" not in accuracy.settings_for(other, {})


def test_deepspeed_16bit_engines_keep_a_16bit_loss_and_their_zero_buckets():
    """Qwen's Q-LoRA script (ZeRO-2, ds_config_zero2.json: 2 x 2e8-element buckets) and
    DeepSpeed-Chat's OPT runs (DeepSpeed's default 5e8) keep a 16-bit loss; other scripts and
    DeepSpeed's other demos keep neither setting."""
    qwen = dict(LITGPT_FSDP_ROW, id="qwenreadme-7", framework="qwen-finetune", distributed="zero2",
                precision="fp16-mixed", method="lora")
    assert accuracy.settings_for(qwen, {})["loss_16bit"] == "true"
    assert accuracy.settings_for(qwen, {})["zero_bucket_elements"] == "400000000"
    chat = dict(qwen, id="deepspeed-4", framework="deepspeed",
                source="microsoft/DeepSpeedExamples@3a77097a applications/DeepSpeed-Chat/...")
    assert accuracy.settings_for(chat, {})["zero_bucket_elements"] == "500000000"
    for other in (dict(chat, source="delock/deepspeed_finetune_demo"),
                  dict(qwen, framework="hf-trainer"), dict(qwen, precision="bf16-true")):
        settings = accuracy.settings_for(other, {})
        assert "loss_16bit" not in settings
    assert "zero_bucket_elements" not in accuracy.settings_for(dict(qwen, distributed="zero3"), {})


@pytest.mark.parametrize("change, reason", [
    ({"parallelism": {"dp_shard": 4, "cp": 2}, "gpus": 8}, "context parallelism"),
    ({"parallelism": {"dp_shard": 32, "tp": 8, "async_tp": True}}, "async TP"),
    ({"parallelism": {"dp_shard": 16, "tp": 8}}, "do not multiply"),
    ({"fp8": {"library": "transformer-engine", "recipe": "delayed"}}, "transformer-engine"),
    ({"framework": "nemo"}, "Megatron-core"),
    ({"gradient_checkpointing": "unknown"}, "not stated"),
    ({"gradient_checkpointing": "selective", "framework": "fms-fsdp"}, "some blocks"),
    ({"micro_batch": None}, "micro-batch"),
])
def test_settings_the_framework_cannot_express_skip_the_row_with_a_reason(change, reason):
    row = dict(TORCHTITAN_FP8_ROW, **change)
    assert reason in accuracy.skip_reason(row, {"kind": "llm"})
    assert accuracy.settings_for(row, {}) is None


def test_hybrid_shard_over_nodes_and_the_sources_network():
    row = {"id": "fmsfsdp-1", "framework": "fms-fsdp", "method": "full", "gpus": 128,
           "gpu": "A100-80GB", "precision": "bf16-mixed", "optimizer": "adamw",
           "micro_batch": 2, "gradient_checkpointing": "none", "attention": "sdpa",
           "packing": True, "distributed": "fsdp-hybrid-shard", "shard_group_size": 8}
    assert accuracy.settings_for(row, {})["sharding"] == "hybrid-shard"
    assert accuracy.cluster(row) == (8, 0)  # its 400Gbps: per node or per GPU not said
    assert "other than the nodes" in accuracy.skip_reason(dict(row, shard_group_size=16),
                                                          {"kind": "llm"})


def test_throughput_units_convert_as_their_sources_count():
    deepspeed = {"framework": "deepspeed", "gpus": 16, "seq_len": 512, "method": "full",
                 "throughput": {"value": 171.74, "unit": "samples/s"}}
    assert accuracy.tokens_per_s_gpu(deepspeed, {}, 1e15) == pytest.approx(171.74 * 512 / 16)
    answerai = {"framework": "fsdp_qlora", "gpus": 2, "seq_len": 2048, "method": "qlora",
                "throughput": {"value": 998, "unit": "s/benchmark-run"}}
    assert accuracy.tokens_per_s_gpu(answerai, {}, 1e15) == pytest.approx(1024 * 2048 / 998 / 2)
    llama2 = {"hidden_size": 4096, "intermediate_size": 11008, "vocab_size": 32000,
              "num_hidden_layers": 32}
    atorch = {"framework": "atorch", "gpus": 8, "seq_len": 4096, "method": "lora",
              "gradient_checkpointing": "full",
              "throughput": {"value": 177.9, "unit": "tflops/gpu"}}
    # compute_llama2_training_flops: per layer (8sh^2 + 4s^2h + 6shi) x (2 + 1), logits 2shV x 2
    s, h = 4096, 4096
    per_token = (32 * (8 * s * h * h + 4 * s * s * h + 6 * s * h * 11008) * 3
                 + 2 * s * h * 32000 * 2) / s
    assert accuracy.tokens_per_s_gpu(atorch, llama2, 1e15) == pytest.approx(177.9e12 / per_token)
    litgpt = {"id": "litgpt-1a", "gpus": 1, "method": "lora",
              "throughput": {"value": 1.62, "unit": "min/1k-iters"}}
    assert accuracy.tokens_per_s_gpu(litgpt, {}, 1e15) is None  # padded: tokens unknown


def _synthetic_row(tokens_per_s: float, terms: dict, factors: dict | None = None) -> dict:
    return {"tokens_per_s_gpu": tokens_per_s, "predicted_tokens_per_s_gpu": 1000.0,
            "step_time_s": sum(terms.values()), "speed_terms": terms,
            "speed_factors": factors or {}}


def test_the_speed_fit_recovers_constants_that_generated_the_rows():
    """Rows made with known constants (committed ones halved or doubled) are fitted back
    to them: the design is linear in every constant."""
    from bench import fit
    committed = {name: fit.PRIORS[name] for name in fit.SPEED_CONSTANTS}
    truth = dict(committed, gemm_time_scale=committed["gemm_time_scale"] * 1.2,
                 memory_time_scale=committed["memory_time_scale"] * 1.5)
    rows = []
    shapes = [(8, 1, 0.2), (2, 3, 0.5), (5, 0.5, 0.1), (1, 1, 1), (9, 4, 0.3)]
    for gemm, memory, launch in shapes * 20:  # enough rows that the priors' pull is small
        terms = {"gemms": gemm, "memory_bound": memory, "layer_overhead": launch}
        real_step = (gemm * 1.2 + memory * 1.5 + launch)
        rows.append(_synthetic_row(1000.0 * sum(terms.values()) / real_step, terms))
    fitted = fit.fit_speed(rows, committed)
    assert abs(fitted["gemm_time_scale"] - truth["gemm_time_scale"]) < 0.1
    assert abs(fitted["memory_time_scale"] - truth["memory_time_scale"]) < 0.15
    for row in rows:  # and the refitted constants predict the rows' measured throughput
        predicted = fit.predict_speed(row, committed, fitted)
        assert abs(predicted / row["tokens_per_s_gpu"] - 1) < 0.05


def test_bands_are_the_conformal_rank_of_measured_over_predicted():
    from bench import fit
    rows = [{"method_class": "lora", "measured": 1.0 + i / 100, "predicted": 1.0,
             "length_unknown": False} for i in range(20)]
    # rank ceil(21 * 0.9) = 19 of 20: one above the plain 90th percentile (0.17)
    assert fit.bands(rows)["memory_band_lora"] == pytest.approx(0.18)
    assert fit.bands(rows)["memory_band_full"] == 0.0  # no rows: no band claimed
    assert fit.band_value([0.5, 0.1]) == 0.5  # the rank passes n: the largest


def _memory_row(source: str, cls: str, measured: float) -> dict:
    """A row whose allocated memory is 10 GiB and whose reserved metric is `measured`."""
    return {"source": source, "method_class": cls, "measured": measured, "metric": "reserved",
            "level": "reserved", "length_unknown": False,
            "levels": {"allocated": 10.0, "reserved": 10.0, "device": 10.0},
            "breakdown": {}}


def test_coverage_counts_rows_under_a_band_fitted_without_their_source():
    """Nine sources whose runs use 5 % more than predicted and one that uses 50 % more: each
    of the nine is covered by the band of the other sources (which holds the outlier), the
    outlier by no band fitted without it."""
    from bench import fit
    committed = {"allocator_fraction": 0.0}
    rows = [_memory_row(f"s{i}", "lora", 10.5) for i in range(9)] + [_memory_row("odd", "lora", 15.0)]
    covered = fit.coverage(rows, committed)
    assert covered["lora"] == (9, 10)
    assert covered["full"] == (0, 0)
    text = fit.band_because("lora", *covered["lora"])
    assert "covered 9 of 10 runs from sources left out of the fit" in text


def test_scripts_that_keep_their_outputs_keep_the_kv_cache():
    """atorch's example and llama-recipes' PR state that held `outputs` through backward keep
    every layer's key and value (use_cache stays on under torch's checkpoint wrapper);
    atorch's wrap_trainable_outmost puts the adapters in a unit of their own."""
    atorch = dict(LITGPT_FSDP_ROW, id="dlrover-1", framework="atorch")
    assert accuracy.settings_for(atorch, {})["kv_cache_kept"] == "true"
    assert "fsdp_mixed_units" not in accuracy.settings_for(atorch, {})
    recipes = dict(LITGPT_FSDP_ROW, id="llamarecipes-2", framework="llama-recipes")
    assert "kv_cache_kept" not in accuracy.settings_for(recipes, {})
    assert accuracy.settings_for(dict(recipes, outputs_kept=True), {})["kv_cache_kept"] == "true"


def test_torchtune_rows_of_torchao_01_quantize_at_load_in_one_pass():
    row = dict(LITGPT_FSDP_ROW, id="torchtune2-10", framework="torchtune", method="qlora",
               distributed="none", quantization={"library": "torchao NF4Tensor"},
               source="pytorch/torchtune@20747cd87 README.md memory table")
    assert accuracy.settings_for(row, {})["nf4_load_unchunked"] == "true"
    for other in (dict(row, source="pytorch/torchtune@bd2a0fc README.md"),
                  dict(row, quantization={"library": "bitsandbytes"})):
        assert "nf4_load_unchunked" not in accuracy.settings_for(other, {})


def test_gptq_checkpoints_take_autogptqs_torch_path():
    """Qwen's Int4 rows (quantization library auto-gptq) run AutoGPTQ's QuantLinear, which
    saves dequantized weights, not bitsandbytes' saved inputs; the other libraries keep theirs."""
    row = dict(LITGPT_FSDP_ROW, id="qwenreadme-19", framework="qwen-finetune", method="qlora",
               distributed="zero2", quantization={"library": "auto-gptq"})
    assert accuracy.settings_for(row, {})["quant_library"] == "gptq"
    for library, expected in (("bitsandbytes", "bnb"), ("torchao NF4Tensor", "torchao")):
        other = dict(row, quantization={"library": library})
        assert accuracy.settings_for(other, {})["quant_library"] == expected


def test_fsdp1_scripts_and_torchtunes_fsdp1_commits_take_the_pending_frees():
    """Answer.AI's, llama-recipes' and accelerate's FSDP wrap with FSDP1, as torchtune's
    distributed recipes did before their FSDP2 migration; torchtitan runs FSDP2, and a run
    without sharding has no gathered units."""
    row = dict(LITGPT_FSDP_ROW, id="answerai-3", framework="fsdp_qlora", method="lora",
               distributed="fsdp-full-shard")
    assert accuracy.settings_for(row, {})["fsdp1"] == "true"
    tune = dict(row, id="torchtune2-7", framework="torchtune",
                source="pytorch/torchtune@fef3ed10d README.md memory table")
    assert accuracy.settings_for(tune, {})["fsdp1"] == "true"
    for other in (dict(tune, source="pytorch/torchtune@3fddc5694 README.md"),
                  dict(row, framework="torchtitan"), dict(row, distributed="ddp")):
        assert "fsdp1" not in accuracy.settings_for(other, {})


def test_band_level_rises_until_sources_left_out_are_covered_nine_in_ten():
    """Eighteen sources 5 % over their prediction, one 30 % over, and one whose three runs
    are 20 % over: at the 90 % rank the three-run source is covered by no band fitted
    without it (18 of 22 runs); at 91 % the band without it takes the 30 % source's
    residual and covers it (21 of 22), so the band is set there and says so."""
    from bench import fit
    committed = {"allocator_fraction": 0.0}

    def row(source, measured):
        return dict(_memory_row(source, "lora", measured), metric="allocated", level="allocated")
    rows = [row(f"s{i}", 10.5) for i in range(18)] + [row("big", 13.0)] + [row("t", 12.0)] * 3
    assert fit.coverage(rows, committed)["lora"] == (18, 22)
    levels = fit.band_levels(rows, committed)
    assert levels["lora"] == 0.91 and levels["full"] == 0.9  # no runs: the target level
    assert fit.coverage(rows, committed, levels)["lora"] == (21, 22)
    assert "set at the 91% conformal rank" in fit.band_because("lora", 21, 22, 0.91)
    assert "raised from 90%" in fit.band_because("lora", 21, 22, 0.91)
    assert "raised" not in fit.band_because("lora", 21, 22)


def test_residuals_sort_sources_by_error_and_rows_by_under_prediction():
    from bench import fit
    rows = [dict(_memory_row("a", "lora", 12.0), id="a-1", predicted=10.0),
            dict(_memory_row("a", "lora", 9.0), id="a-2", predicted=10.0),
            dict(_memory_row("b", "full", 10.5), id="b-1", predicted=10.0),
            dict(_memory_row("c", "full", 30.0), id="c-1", predicted=10.0, length_unknown=True)]
    per_source, per_row = fit.residuals(rows)
    # a: |10/12 - 1| and |10/9 - 1| average 13.9 %, one row under by > 10 %; c is a bound
    assert per_source == [("a", 2, 13.9, 1), ("b", 1, 4.8, 0)]
    assert [r[0] for r in per_row] == ["a-1", "b-1", "a-2"] and per_row[0][5] == 1.2


def test_calibration_rewrite_writes_the_measured_coverage_into_the_band():
    from bench import fit
    text = 'let memory_band_lora: count = 0.1 {\n  because "9 in 10 published runs"\n  source "x"\n}\n'
    out = fit.rewrite({"memory_band_lora": 0.16}, text,
                      becauses={"memory_band_lora": fit.band_because("lora", 55, 61)})
    assert "0.16 {" in out and "9 in 10" not in out
    assert fit.committed_becauses(out)["memory_band_lora"].count("covered 55 of 61") == 1


def test_calibration_rewrite_changes_only_the_numbers():
    from bench import fit
    text = 'let memory_time_scale: count = 1.5 {\n  because "x"\n}\nlet layer_pass_seconds: s = 0.0004 s {\n}\n'
    out = fit.rewrite({"memory_time_scale": 1.62, "layer_pass_seconds": 0.00021}, text)
    assert fit.committed_constants(out) == {"memory_time_scale": 1.62, "layer_pass_seconds": 0.00021}
    assert out.count("because") == 1 and "0.00021 s {" in out


@pytest.fixture(scope="module")
def summary():
    paths = [shared_dir("data", "memory_measurements.yaml")] + sorted(accuracy.OWN.glob("*.yaml"))
    return accuracy.summarise(accuracy.evaluate(paths))


@pytest.mark.slow  # about 80 s of CPU: every dev-set row estimated, refitted per source
def test_dev_set_figures_hold_whole_and_leave_one_source_out(summary):
    """Regression floors under the figures bench/accuracy.py reports (the issue's targets
    are tracked there, in the README's figures table)."""
    assert summary["rows_compared"] >= 130 and len(summary["sources"]) >= 10
    for name in ("whole", "loso"):
        figures = summary[name]
        assert figures["mape_pct"] <= 16
        assert figures["throughput_rows"] >= 60 and figures["spearman"] >= 0.9


@pytest.mark.slow
def test_the_committed_calibration_is_what_the_procedure_fits(summary):
    assert summary["calibration_drift"] == {}
    assert summary["band_because_stale"] is False  # the printed coverage is the measured one
    for name, (committed, refit) in summary["calibration_held"].items():
        assert committed >= refit, name  # held only wider, never narrower


@pytest.mark.slow
def test_every_band_covers_nine_in_ten_runs_from_sources_left_out(summary):
    """Issue 23's target, measured nested: each source left out of constants and band."""
    for cls, figures in summary["band_coverage"].items():
        assert figures["runs"] >= 30 and figures["share"] >= 0.9, (cls, figures)


@pytest.mark.slow
def test_kbsolve_beats_both_public_baselines(summary):
    figures = summary["all"]
    assert figures["predicted"]["mape_pct"] < figures["deepspeed"]["mape_pct"] / 3
    assert figures["predicted"]["mape_pct"] < figures["accelerate"]["mape_pct"] / 10


def test_set_up_peak_sets_the_reserved_level_where_it_passes_training():
    """A row whose set-up (quantization at load) peaks at 14 GiB allocated over training's
    10: the framework's setup_reserve term is (1 + f) * (14 - 10); the fit predicts the
    reserved level as the larger peak times the pool under any fraction, and fits the pool
    on that peak."""
    from bench import fit
    committed = {"allocator_fraction": 0.05}
    row = dict(_memory_row("tt", "qlora", 14.0 * 1.1),
               levels={"allocated": 10.0, "reserved": 10.0 * 1.05 + 1.05 * 4.0,
                       "device": 10.0 * 1.05 + 1.05 * 4.0},
               breakdown={"allocator_cache": 0.5, "setup_reserve": 1.05 * 4.0})
    assert fit.predict_memory(row, committed, 0.05) == pytest.approx(14.0 * 1.05)
    assert fit.predict_memory(row, committed, 0.1) == pytest.approx(14.0 * 1.1)
    assert fit.predict_memory(row, committed, 0.1, "allocated") == 10.0
    assert fit.fit_allocator([row], committed) == pytest.approx(0.1)
    plain = _memory_row("p", "lora", 11.0)  # no set-up term: the pool scales training's peak
    assert fit.predict_memory(plain, committed, 0.1) == pytest.approx(11.0)


def test_a_repeated_memory_figure_counts_once_and_its_speed_stays():
    from types import SimpleNamespace
    levels = SimpleNamespace(model_dump=lambda: {"allocated": 20.0, "reserved": 21.0,
                                                 "device": 22.0})
    estimate = SimpleNamespace(
        memory=SimpleNamespace(per_gpu_gib=levels, breakdown=[], gpu_gib=0),
        speed=SimpleNamespace(step_time_s=1.0, terms={}, tokens_per_s=2000.0), gpu="RTX4090")
    row = {"id": "answerai-21", "framework": "fsdp_qlora", "method": "qlora", "gpus": 2,
           "seq_len": 2048, "micro_batch": 4, "metric": "reserved", "unit": "GiB", "peak": 22.98,
           "distributed": "fsdp-full-shard+cpu-offload",
           "throughput": {"value": 2061, "unit": "s/benchmark-run"}}
    model = {"params_b": 34.39}
    alone = accuracy._compare(row, estimate, model)
    assert alone["measured"] == pytest.approx(22.98)
    repeated = accuracy._compare(dict(row, memory_repeats="answerai-12"), estimate, model)
    assert repeated["measured"] is None
    assert repeated["tokens_per_s_gpu"] == alone["tokens_per_s_gpu"] == pytest.approx(
        1024 * 2048 / 2061 / 2)
