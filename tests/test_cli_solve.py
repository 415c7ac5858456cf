"""`kbsolve --gpus ... --model ...`, `estimate` and `kb test` from the command line."""

import json
import os

import pytest

from cli_helpers import run_kbsolve
from kbsolve.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


_PLANS: dict[str, object] = {}


@pytest.fixture
def solve_once(monkeypatch):
    """The command's `api.solve` on the shipped KB (no packs) solved once per run for each
    distinct set of fields and solver, each caller getting a deep copy: for the tests of
    what the command prints for a plan, several of which print the same query's plan
    (its formats, --explain). The first call is the real solve of exactly those fields."""
    from kbsolve import api
    real = api.solve

    def solve(query, kb=None, *, packs=None, solver="z3"):
        if kb is not None or packs or not isinstance(query, dict):
            return real(query, kb, packs=packs, solver=solver)
        key = json.dumps([query, solver], sort_keys=True, default=str)
        if key not in _PLANS:
            _PLANS[key] = real(query, packs=packs, solver=solver)
        return _PLANS[key].model_copy(deep=True)

    monkeypatch.setattr(api, "solve", solve)


def test_plan_prints_config_memory_and_speed(solve_once, capsys):
    code, out, err = run(capsys, "--gpus", "1x4090", "--model", "qwen3-8b", "--top", "0")
    assert code == 0
    assert "kbsolve: optimal" in out
    assert "Memory per GPU" in out and "Speed:" in out and "tokens/s" in out
    assert "finetuning_type" in out and "[default]" in out and "[speed]" in out


def test_alias_choice_is_stated(solve_once, capsys):
    code, out, _ = run(capsys, "--gpus", "8xA100", "--model", "qwen3-8b", "--top", "0")
    assert code == 0
    assert "GPU 'A100' taken as A100-80G-SXM" in out


def test_infeasible_exits_1_with_core_and_fixes(capsys):
    code, out, _ = run(capsys, "--gpus", "8xA100", "--model", "qwen3-8b",
                       "--set", "use_unsloth=true", "--set", "deepspeed=z3")
    assert code == 1
    assert "P18: Unsloth is incompatible with DeepSpeed ZeRO-3" in out
    assert "drop deepspeed=z3" in out


@pytest.mark.parametrize("fmt", ["json", "yaml", "markdown"])
def test_formats(solve_once, capsys, fmt):
    code, out, _ = run(capsys, "--gpus", "8xA100", "--model", "qwen3-8b", "--top", "0",
                       "--format", fmt)
    assert code == 0
    if fmt == "json":
        assert json.loads(out)["status"] == "optimal"
    elif fmt == "yaml":
        assert "status: optimal" in out
    else:
        assert out.startswith("# kbsolve plan")


def test_explain_one_option(solve_once, capsys):
    code, out, _ = run(capsys, "--gpus", "1x4090", "--model", "qwen3-8b", "--top", "0",
                       "--explain", "flash_attn")
    assert code == 0
    assert out.startswith('flash_attn = "fa2"') and "speed" in out.splitlines()[0]
    assert "slower" in out
    assert "Memory terms in this plan" in out


def test_unrequested_library_needs_allow(solve_once, capsys):
    code, out, _ = run(capsys, "--gpus", "1x4090", "--model", "qwen3-8b", "--top", "0",
                       "--explain", "use_unsloth")
    assert code == 0
    assert out.startswith("use_unsloth = false") and "default" in out.splitlines()[0]
    assert "--allow unsloth" in out
    code, out, _ = run(capsys, "--gpus", "1x4090", "--model", "qwen3-8b", "--top", "0",
                       "--allow", "unsloth", "--explain", "use_unsloth")
    assert code == 0 and out.startswith("use_unsloth = true")


@pytest.mark.parametrize("argv, needle", [
    (["--gpus", "8xA10O", "--model", "qwen3-8b"], "did you mean"),
    (["--gpus", "0xA100", "--model", "qwen3-8b"], "at least 1"),
    (["--gpus", "8x", "--model", "qwen3-8b"], "names no GPU type"),
    (["--gpus", "-1xH100", "--model", "qwen3-8b"], "--gpus"),
    (["--gpus", "8xA100", "--model", "qwen3-8c"], "did you mean 'qwen3-8b'"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--set", "lora_rnk=16"], "did you mean 'lora_rank'"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--set", "quantization_bit=5"], "outside the domain"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--set", "lora_rank"], "not key=value"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--set", "use_liger=true"],
     "the real option is 'enable_liger_kernel'"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--set", "deepspeed=z4"],
     "not a value of deepspeed"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--framework", "flowfactory"], "unknown framework"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--task", "sftt"], "did you mean 'sft'"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--resolution", "480by832"], "HxW"),
    (["--gpus", "8xA100", "--model", "missing/config.json"], "no such file"),
    (["--gpus", "8xA100"], "missing --model"),
    (["--gpus", "8xA100", "--model", "qwen3-8b", "--headroom", "1.5"], "--headroom"),
])
def test_bad_input_exits_2_with_one_clear_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err + out


def test_bad_config_json_names_the_field(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    code, _, err = run(capsys, "--gpus", "8xA100", "--model", str(path))
    assert code == 2
    assert "num_hidden_layers" in err


def test_estimate_command(capsys):
    code, out, _ = run(capsys, "estimate", "--gpus", "8xA100", "--model", "qwen3-8b",
                       "--set", "deepspeed=z2")
    assert code == 0
    assert "Memory per GPU" in out and "optimizer_states" in out


def test_estimate_of_a_broken_config_exits_1(capsys):
    code, out, _ = run(capsys, "estimate", "--gpus", "8xA100", "--model", "qwen3-8b",
                       "--set", "use_unsloth=true", "--set", "deepspeed=z3")
    assert code == 1
    assert "breaks rules" in out and "P18" in out


@pytest.mark.ci  # a child process (CI's own step); main(['kb', 'test', ...]) runs in test_packs.py
def test_kb_test_command_in_a_subprocess():
    done = run_kbsolve(["kb", "test", "-k", "unsloth", "--coverage"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  llamafactory.unsloth_refuses_zero3" in done.stdout
    assert "untested rules: 0" in done.stdout


def test_enumerate_solver_agrees_on_a_pinned_query(capsys):
    # 640 configurations left to enumerate (flash_attn and seven switches), ~1 ms each;
    # fsdp and experts_kernel (a dense model) are pinned too, to the defaults the solver
    # picks here (their five and two values made it 6,400 configurations, ~7 s of CPU)
    pins = []
    for pin in ("stage=sft", "finetuning_type=lora", "quantization_bit=4", "deepspeed=none",
                "bf16=true", "fp16=false", "pure_bf16=false", "fp8=false", "use_galore=false",
                "use_apollo=false", "use_badam=false", "neat_packing=true",
                "quantization_method=bnb", "double_quantization=true", "lora_rank=8",
                "disable_gradient_checkpointing=false", "per_device_train_batch_size=1",
                "gradient_accumulation_steps=8", "optim=adamw_torch", "fsdp=none",
                "experts_kernel=grouped_mm"):
        pins += ["--set", pin]
    base = ["--gpus", "1x4090", "--model", "qwen3-8b", "--top", "0", "--format", "json"] + pins
    _, by_z3, _ = run(capsys, *base)
    _, by_brute, _ = run(capsys, *base, "--solver", "enumerate")
    z3_plan, brute_plan = json.loads(by_z3), json.loads(by_brute)
    assert z3_plan["speed"]["step_time_s"] == brute_plan["speed"]["step_time_s"]
    assert z3_plan["memory"]["per_gpu_gib"] == brute_plan["memory"]["per_gpu_gib"]


@pytest.mark.ci
def test_json_is_identical_across_hash_seeds(capsys):
    """Two children under fixed hash seeds and this process under its own (random unless
    PYTHONHASHSEED is set, and warm: it has solved other plans): three seeds, one child
    fewer to start."""
    argv = ["--gpus", "8xA100", "--model", "qwen3-8b", "--top", "1", "--format", "json"]
    outputs = set()
    for seed in ("0", "12345"):
        done = run_kbsolve(argv,
                           # the test's cache dir (conftest), seeded with the shipped KB
                           env={**os.environ, "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    code, out, _ = run(capsys, *argv)
    assert code == 0
    outputs.add(out)
    assert len(outputs) == 1
