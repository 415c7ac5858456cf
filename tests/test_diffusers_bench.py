"""The DiT measurements (bench/data/measurements/dit_training.yaml) and their bench
(bench/dit_accuracy.py): the rows are well-formed and sourced, the mapping onto the diffusers
framework is true to each row or skips it with a reason, and the diffusers estimates meet
the issue's target on the rows they express."""

from __future__ import annotations

import pytest
import yaml

from bench import dit_accuracy
from plans import shipped_kb

DATA = yaml.safe_load(dit_accuracy.DATA.read_text(encoding="utf-8"))
ROW = {"id": "test-row", "model": "flux1-dev", "gpus": 1, "gpu": "H100-SXM", "method": "lora",
       "lora": {"rank": 4, "targets": ["to_k", "to_q", "to_v", "to_out.0"]},
       "precision": "bf16-true", "optimizer": "adamw8bit", "gradient_checkpointing": "full",
       "micro_batch": 1, "grad_accum": 4, "resolution": "512x768", "text_encoders": "precomputed",
       "vae": "cached", "max_sequence_length": 77}


def test_at_least_fifteen_sourced_rows_from_several_sources():
    rows = DATA["measurements"]
    assert len(rows) >= 15
    assert len({r["id"].split("-")[0] for r in rows}) >= 6
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert row["source"] and row["grade"] in ("A", "B", "C") and row["notes"], row["id"]
        assert row["model"] in DATA["models"], row["id"]
        if row.get("peak") is not None:
            assert row["unit"] in ("GB", "GiB", "MB", "MiB"), row["id"]
        else:
            assert row.get("outcome") == "oom" or row.get("throughput"), row["id"]


def test_a_blog_row_maps_onto_the_scripts_flags():
    query, settings = dit_accuracy.diffusers_settings(dict(ROW), shipped_kb())
    assert query["gpus"] == "1xH100-SXM" and query["global_batch"] == 4
    assert settings["lora_layers"] == "attn.to_k,attn.to_q,attn.to_v,attn.to_out.0"
    assert settings["use_8bit_adam"] == "true" and settings["optimizer"] == "AdamW"
    assert settings["resolution"] == "624"  # 512x768 as the square of equal area: 39^2 tokens
    assert settings["cache_latents"] == "true" and "caption_column" not in settings
    resident = dict(ROW, text_encoders="resident")
    assert dit_accuracy.diffusers_settings(resident, shipped_kb())[1]["caption_column"] == "text"


@pytest.mark.parametrize("change, reason", [
    ({"base_precision": "int8-quanto"}, "int8-quanto base"),
    ({"base_precision": "nf4", "method": "qlora", "text_encoders": "resident"}, "NF4"),
    ({"method": "full"}, "LoRA scripts"),
    ({"optimizer": "lion8bit-paged"}, "not a flag value"),
    ({"gradient_checkpointing": "unknown"}, "checkpointing not stated"),
    ({"micro_batch": "unknown"}, "micro-batch"),
    ({"text_encoders": "unknown"}, "text encoders"),
    ({"resolution": "unknown"}, "resolution"),
])
def test_settings_the_scripts_lack_skip_the_row(change, reason):
    assert reason in dit_accuracy.diffusers_settings(dict(ROW, **change), shipped_kb())


def test_an_nf4_row_takes_the_nf4_script_and_a_16_bit_row_the_16_bit_one():
    nf4 = dict(ROW, method="qlora", base_precision="nf4")
    settings = dit_accuracy.diffusers_settings(nf4, shipped_kb())[1]
    assert settings["script"] == "train_dreambooth_lora_flux_miniature.py"
    assert "lora_layers" not in settings  # the script's adapters are fixed
    bf16 = dict(ROW, gpu="RTX-4090")  # a 4090, where the KB's own choice would be NF4
    assert dit_accuracy.diffusers_settings(bf16, shipped_kb())[1]["script"] == \
        "train_dreambooth_lora_flux.py"


def test_speed_units_convert_to_seconds_per_step():
    assert dit_accuracy._speed({"throughput": {"value": 41, "unit": "min/700-steps"}}) == \
        pytest.approx(41 * 60 / 700)
    assert dit_accuracy._speed({"throughput": {"value": 2.0, "unit": "it/s"}}) == 0.5
    assert dit_accuracy._speed({"throughput": {"value": 84.4, "unit": "min/time-to-train"}}) is None


def test_leave_one_source_out_scales_by_the_other_sources():
    rows = [{"source": "a", "measured": 10.0, "predicted": 5.0, "bound": None},
            {"source": "b", "measured": 9.0, "predicted": 9.0, "bound": None}]
    assert dit_accuracy.loso_scales(rows) == {"a": 1.0, "b": 2.0}


def test_diffusers_estimates_are_within_the_target():
    summary = dit_accuracy.summarise(dit_accuracy.evaluate())
    diffusers = summary["frameworks"]["diffusers"]["whole"]
    assert diffusers["rows_compared"] >= 3
    assert diffusers["mape_pct"] <= 25 and diffusers["under_10pct_share"] == 0
    assert diffusers["bound_agreement_pct"] == 100
    reasons = {s["id"]: s["reason"] for s in summary["skipped"]}
    assert "time to a quality target" in reasons["mlperf-flux-8xb200-fp4"]
    assert "video model" in reasons["simpletuner-wan-1.3b-r16"]
