"""The diffusers framework: the issue's FLUX estimate on a 4090, plans for FLUX and
SD3, and the emitted run.sh, whose `accelerate launch` flags are parsed with the
scripts' own argument lists (tests/fixtures/diffusers/*.args.json: every
add_argument call of parse_args(), read from the scripts at the commit the JSON
names; the scripts are not in the diffusers wheel)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_helpers import run_in_process
from kbsolve import api
from kbsolve.plan.emit import file_contents
from plans import shipped_kb, solved

FIXTURES = Path(__file__).parent / "fixtures" / "diffusers"
BASH = "/bin/bash"
GIB = 2**30
ISSUE_QUERY = {"gpus": "1x4090", "model": "flux1-dev", "framework": "diffusers",
               "resolution": "768x512"}
ISSUE_SET = {"rank": "4", "mixed_precision": "bf16", "use_8bit_adam": "true",
             "gradient_checkpointing": "true", "cache_latents": "true", "train_batch_size": "1"}
PLANS = {
    "flux_h100": {"gpus": "1xH100", "model": "flux1-dev", "framework": "diffusers", "top": 0},
    "flux_pins": {"gpus": "1xA100", "model": "flux1-dev", "framework": "diffusers", "top": 0,
                  "set": ["optimizer=prodigy", "train_text_encoder=true",
                          "gradient_checkpointing=true", "lora_layers=attn.to_k,attn.to_q,attn.to_v,attn.to_out.0",
                          "with_prior_preservation=true", "validation_prompt=a sks dog in a bucket"]},
    "sd3_two_nodes": {"gpus": "2x8xH100", "model": "sd3.5-large", "framework": "diffusers",
                      "top": 0, "set": ["distributed_type=DEEPSPEED", "zero_stage=2"]},
    "flux_nf4_4090": {"gpus": "1x4090", "model": "flux1-dev", "framework": "diffusers", "top": 0,
                      "allow": ["nf4_base"], "set": ["optimizer=prodigy"]},
    "sd3_captions": {"gpus": "4xL40S", "model": "sd3.5-medium", "framework": "diffusers", "top": 0,
                     "set": ["dataset_name=Norod78/Yarn-art-style", "caption_column=text"]},
}


def _arglist(script: str) -> dict:
    return json.loads((FIXTURES / f"{script}.args.json").read_text(encoding="utf-8"))


def _parser(script: str) -> argparse.ArgumentParser:
    """The script's parser, rebuilt from its argument list (types, choices, store_true)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    types = {"int": int, "float": float, "str": str}
    for flag, spec in _arglist(script)["flags"].items():
        if spec["action"] == "store_true":
            parser.add_argument(f"--{flag}", action="store_true")
        else:
            parser.add_argument(f"--{flag}", type=types.get(spec["type"], str),
                                choices=spec.get("choices"), default=spec.get("default"))
    return parser


@pytest.fixture(scope="module")
def issue_estimate():
    return api.estimate(ISSUE_QUERY, ISSUE_SET, shipped_kb())


def test_the_issue_estimate_keeps_the_16_bit_script_and_names_the_nf4_one(issue_estimate):
    """16-bit flags on a 4090: the estimate is the 16-bit script's, which does not fit
    (the transformer and T5 together), and the warning names the NF4 script as the
    change that needs consent; it never switches to it by itself."""
    assert issue_estimate.config["SCRIPT"] == "train_dreambooth_lora_flux.py"
    assert not issue_estimate.feasible
    assert issue_estimate.memory.per_gpu_gib.device > issue_estimate.memory.gpu_gib
    warning = next(w for w in issue_estimate.warnings if w.id == "W_NF4_SCRIPT_ALTERNATIVE")
    assert "--set script=train_dreambooth_lora_flux_miniature.py" in warning.because
    assert "--allow nf4_base" in warning.because


def test_the_issue_estimate_with_the_nf4_script_set():
    """The HF QLoRA post's 4090 recipe with the NF4 script set: ~9 GB as published."""
    issue_estimate = api.estimate(ISSUE_QUERY, dict(
        ISSUE_SET, script="train_dreambooth_lora_flux_miniature.py"), shipped_kb())
    memory, speed = issue_estimate.memory, issue_estimate.speed
    terms = {i.term: i.gib for i in memory.breakdown if i.location == "gpu"}
    assert issue_estimate.config["SCRIPT"] == "train_dreambooth_lora_flux_miniature.py"
    assert terms["transformer_weights"] == pytest.approx(12e9 * 0.5625 / GIB, rel=1e-3)
    assert 0 < terms["optimizer_states"] < 0.1  # 8-bit states of a rank-4 adapter
    assert terms["activations"] > 0 and speed.step_time_s > 0
    assert issue_estimate.config["resolution"] == 768  # 768x512 trains 768x768 crops
    # the published ~9 GB (nvidia-smi) against the device level without the error band, as
    # bench/accuracy.py compares nvidia-smi rows; the band (the widest 16-bit LLM band, which
    # moves with every refit) is on top of it, and the run still fits a 4090 at its upper end
    assert issue_estimate.feasible and 7 < memory.per_gpu_gib.device - terms["error_band"] < 10
    warnings = {w.id for w in issue_estimate.warnings}
    assert {"W_SQUARE_CROP", "W_MINIATURE_DATASET"} <= warnings


def test_the_16_bit_script_does_not_fit_a_4090():
    estimate = api.estimate(ISSUE_QUERY, dict(ISSUE_SET, script="train_dreambooth_lora_flux.py"),
                            shipped_kb())
    terms = {i.term: i.gib for i in estimate.memory.breakdown if i.location == "gpu"}
    assert terms["transformer_weights"] == pytest.approx(12e9 * 2 / GIB, rel=1e-3)
    # T5 moved to the GPU beside the transformer, and kept there all run: the flux script
    # deletes the encoders' names but not the list text_encoders that holds them
    assert terms["text_encoders"] > 5 and terms.get("load_phase", 0) == 0
    assert not estimate.feasible and estimate.memory.per_gpu_gib.device > estimate.memory.gpu_gib


def test_the_issue_estimate_from_the_command_line(capsys):
    """In this process: the test is about what the command prints (the children that
    test a fresh process's behaviour are in test_cli_kb, test_cli_solve, test_hermetic)."""
    args = ["estimate", "--framework", "diffusers", "--model", "flux1-dev", "--gpus", "1x4090",
            "--resolution", "768x512"] + [a for k, v in ISSUE_SET.items()
                                           for a in ("--set", f"{k}={v}")]
    done = run_in_process(args, capsys)
    assert done.returncode == 1, done.stdout + done.stderr  # the 16-bit script: no fit
    assert "Memory per GPU" in done.stdout and "transformer_weights" in done.stdout
    assert "Speed: step" in done.stdout and "DOES NOT FIT" in done.stdout
    assert "W_NF4_SCRIPT_ALTERNATIVE" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_4090_plan_needs_consent_to_the_nf4_base():
    refused = solved({"gpus": "1x4090", "model": "flux1-dev", "framework": "diffusers", "top": 0})
    assert refused.status == "infeasible"
    assert any("--allow nf4_base" in str(f) for f in refused.fixes)
    plan = solved(PLANS["flux_nf4_4090"])
    assert plan.status == "optimal"
    assert plan.config["SCRIPT"] == "train_dreambooth_lora_flux_miniature.py"
    assert 'python "$EMBEDDINGS" --max_sequence_length "$T5_TOKENS"' in plan.launch


def test_an_llm_is_refused_with_the_frameworks_that_train_it(capsys):
    done = run_in_process(["--gpus", "1x4090", "--model", "qwen3-8b", "--framework",
                           "diffusers"], capsys)
    assert done.returncode == 2
    assert "trains diffusion models" in done.stderr and "llamafactory" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", sorted(PLANS))
def test_emitted_flags_are_the_scripts_own(name):
    plan = solved(PLANS[name])
    assert plan.status == "optimal", plan.status
    flags = file_contents(shipped_kb(), plan)["flags"]
    arglist = _arglist(plan.config["SCRIPT"])
    for flag, value in flags.items():
        spec = arglist["flags"].get(flag)
        assert spec is not None, f"--{flag} is not a flag of {arglist['path']}"
        if spec["action"] == "store_true":
            assert value is True or value is False, (flag, value)
            continue
        kind = {"int": int, "float": (int, float), "str": str}[spec["type"]]
        assert isinstance(value, kind) and not isinstance(value, bool), (flag, value)
        if "choices" in spec:
            assert value in spec["choices"], (flag, value, spec["choices"])
    required = [f for f, s in arglist["flags"].items() if s.get("required")]
    assert set(required) <= set(flags)
    if "data_df_path" in arglist["flags"]:  # the NF4 script reads precomputed embeddings
        assert "data_df_path" in flags and "instance_prompt" not in flags
    else:
        assert ("dataset_name" in flags) != ("instance_data_dir" in flags)  # parse_args' check


@pytest.fixture(scope="module")
def stub(tmp_path_factory) -> Path:
    """An `accelerate` and a `python` that write their argv, one per line, to $STUB_LOG
    (python's to $STUB_LOG.python), and a `curl` that logs its URL to $STUB_LOG.curl
    and writes an empty file where -o says."""
    folder = tmp_path_factory.mktemp("stub")
    (folder / "curl").write_text(
        f"#!{BASH}\nwhile [ $# -gt 0 ]; do case $1 in -o) out=$2; shift;; http*) "
        f"echo \"$1\" >> \"$STUB_LOG.curl\";; esac; shift; done\n"
        f"mkdir -p \"$(dirname \"$out\")\" && : > \"$out\"\n", encoding="utf-8")
    (folder / "curl").chmod(0o755)
    for name, log in (("accelerate", "$STUB_LOG"), ("python", "$STUB_LOG.python")):
        (folder / name).write_text(
            f"#!{BASH}\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"{log}\"\n",
            encoding="utf-8")
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.skipif(not Path(BASH).is_file(), reason=f"needs {BASH}")
@pytest.mark.parametrize("name", ["flux_pins", "sd3_two_nodes", "flux_nf4_4090"])
def test_run_sh_passes_flags_the_scripts_parse(name, stub, tmp_path):
    plan = solved(PLANS[name])
    api.emit(plan, str(tmp_path / "out"), shipped_kb())
    log = tmp_path / "argv.txt"
    env = {"PATH": f"{stub}:/usr/bin:/bin", "STUB_LOG": str(log), "MASTER_ADDR": "10.0.0.1"}
    done = subprocess.run([BASH, str(tmp_path / "out" / "run.sh")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    argv = log.read_text(encoding="utf-8").splitlines()
    assert argv[:3] == ["launch", "--config_file", "accelerate_config.yaml"]
    at = next(i for i, a in enumerate(argv) if a.endswith(plan.config["SCRIPT"]))
    parsed = _parser(plan.config["SCRIPT"]).parse_args(argv[at + 1:])
    assert parsed.pretrained_model_name_or_path == plan.config["pretrained_model_name_or_path"]
    assert parsed.train_batch_size == plan.config["train_batch_size"]
    assert parsed.gradient_accumulation_steps == plan.config["gradient_accumulation_steps"]
    assert parsed.mixed_precision == plan.config["mixed_precision"]
    assert parsed.gradient_checkpointing == plan.config["gradient_checkpointing"]
    assert parsed.max_train_steps in (500, 700) and parsed.learning_rate > 0
    commit = json.loads((FIXTURES / f"{plan.config['SCRIPT']}.args.json").read_text())["commit"]
    fetched = (tmp_path / "argv.txt.curl").read_text(encoding="utf-8").splitlines()
    assert any(url.startswith(f"https://raw.githubusercontent.com/huggingface/diffusers/{commit}/")
               and url.endswith(plan.config["SCRIPT"]) for url in fetched)
    assert (tmp_path / "out" / argv[at]).is_file()  # fetched beside run.sh, not ./diffusers
    if name == "flux_pins":
        assert parsed.optimizer.lower() == "prodigy" and parsed.train_text_encoder  # lower-cased by the script
        assert parsed.validation_prompt == "a sks dog in a bucket"
        assert parsed.with_prior_preservation and parsed.class_data_dir
    elif name == "flux_nf4_4090":
        assert parsed.optimizer == "Prodigy" and parsed.data_df_path == "embeddings.parquet"
        embed = (tmp_path / "argv.txt.python").read_text(encoding="utf-8").splitlines()
        assert embed[0].endswith("compute_embeddings.py")
        parsed_embed = _parser("compute_embeddings.py").parse_args(embed[1:])
        assert parsed_embed.output_path == parsed.data_df_path
        assert parsed_embed.max_sequence_length == parsed.max_sequence_length
    else:
        assert "--num_machines" in argv and argv[argv.index("--num_machines") + 1] == "2"


def test_the_accelerate_file_and_requirements_follow_the_plan(tmp_path):
    import yaml
    plan = solved(PLANS["sd3_two_nodes"])
    api.emit(plan, str(tmp_path), shipped_kb())
    config = yaml.safe_load((tmp_path / "accelerate_config.yaml").read_text())
    assert config["distributed_type"] == "DEEPSPEED" and config["num_processes"] == 16
    assert config["deepspeed_config"]["zero_stage"] == 2
    assert config["mixed_precision"] == plan.config["mixed_precision"]
    lines = (tmp_path / "requirements.txt").read_text().splitlines()
    assert any(line.startswith("diffusers @ git+") for line in lines)
    assert any(line.startswith("deepspeed") for line in lines)
    single = solved(PLANS["flux_pins"])
    out = tmp_path / "single"
    api.emit(single, str(out), shipped_kb())
    assert yaml.safe_load((out / "accelerate_config.yaml").read_text())["distributed_type"] == "NO"
    packages = (out / "requirements.txt").read_text()
    assert "prodigyopt" in packages and "bitsandbytes" not in packages


def test_the_fixtures_name_their_commit():
    for path in FIXTURES.glob("*.args.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert len(data["commit"]) == 40 and data["path"].endswith(path.name[:-len(".args.json")])
        assert data["flags"], path
        if path.name.startswith("train_"):
            assert data["flags"]["rank"]["type"] == "int" and data["flags"]["rank"]["default"] == 4


def test_flux_script_keeps_text_encoders_sd3_frees_them():
    """train_dreambooth_lora_flux.py keeps T5 and CLIP on the GPU (the list text_encoders
    outlives `del text_encoder_one, text_encoder_two`); the sd3 script deletes the list and
    frees them: a term of the flux run only, the same for the same flags otherwise."""
    kb = shipped_kb()
    query = {"framework": "diffusers", "model": "flux1-dev", "gpus": "1xH100",
             "resolution": "512x512"}
    flux = api.estimate(query, {"script": "train_dreambooth_lora_flux.py",
                                "train_batch_size": 1}, kb)
    terms = {i.term: i.gib for i in flux.memory.breakdown if i.location == "gpu"}
    assert terms["text_encoders"] > 8  # T5-XXL and CLIP-L in bf16, about 9.1 GiB
    sd3 = api.estimate({**query, "model": "sd3.5-medium"},
                       {"script": "train_dreambooth_lora_sd3.py", "train_batch_size": 1}, kb)
    assert "text_encoders" not in {i.term for i in sd3.memory.breakdown if i.gib}
