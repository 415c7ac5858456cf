"""Flow-Factory's phases run one after the other (trainers/abc.py#L178-L196,
L235-L269 and trainers/grpo.py#L85-L87 at a0b2bc5): preprocessing holds the
text encoders and the VAE alone, before the denoiser, the optimizer and the
rewards are on the GPU, so the peak is the larger phase, never the encoders on
top of training. Held on the framework's own examples (../shared/examples)."""

from __future__ import annotations

import pytest

from kbsolve import api
from plans import shipped_kb
from shared_data import shared_dir

GIB = 2**30
NOT_ALLOCATED = {"preprocessing_phase", "allocator_cache", "cuda_context", "error_band"}


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def fit_of(kb, rel: str, gpus: str = "8xH100"):
    config = shared_dir("examples", "flow-factory", "examples") / rel
    return api.audit(str(config), gpus, kb=kb)[0].units[0].fit


def test_a_big_text_encoder_is_not_added_to_training(kb):
    # LTX-2's 12B Gemma-3 encoder (22 GiB) is freed before the 19B denoiser trains:
    # the shipped example fits 8 H100s, which the summed phases called OOM
    fit = fit_of(kb, "grpo/lora/ltx2/t2av.yaml")
    terms = {t.term: t.gib for t in fit.breakdown}
    assert fit.status == "fits" and terms.get("preprocessing_phase", 0) == 0
    assert "preprocessing_encoders" not in terms


def test_the_peak_is_the_larger_phase(kb):
    # Wan2.1-1.3B: the 5.7B umT5 encoder and the VAE (10.85 GiB in bf16) outweigh the
    # whole training phase, so the tensor peak is the preprocessing phase itself
    fit = fit_of(kb, "nft/lora/wan21/t2v.yaml")
    terms = {t.term: t.gib for t in fit.breakdown}
    training = sum(g for t, g in terms.items() if t not in NOT_ALLOCATED)
    preprocessing = (5.7 + 0.127) * 1e9 * 2 / GIB  # catalog: text encoder, VAE; bf16
    assert terms["preprocessing_phase"] > 0
    assert training + terms["preprocessing_phase"] == pytest.approx(preprocessing, abs=0.01)
