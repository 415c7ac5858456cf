"""Plans from the API: explanations, cores, fixes that really work, estimates, emission."""

import json

import pytest
import yaml

from kbsolve import api
from kbsolve.lint import kbtest
from kbsolve.lint.kbtest import coverage
from plans import shipped_kb, solved


@pytest.fixture(scope="module")
def kb():
    return shipped_kb()


def test_plan_is_optimal_and_every_option_has_a_reason(kb):
    plan = solved({"gpus": "1x4090", "model": "qwen3-8b", "top": 0})
    assert plan.status == "optimal"
    assert plan.memory.fits and plan.memory.per_gpu_gib.device <= plan.memory.budget_gib
    options = {o.name for o in kb.options.values() if o.framework == "llamafactory"}
    assert {c.option for c in plan.explanation} == options
    assert all(c.reasons for c in plan.explanation)
    kinds = {c.option: c.kind for c in plan.explanation}
    assert kinds["stage"] == "default"  # the task defaults to the stage's default: not a pin
    stage = next(c for c in plan.explanation if c.option == "stage")
    assert "you set" not in stage.reasons[0].detail and "default task" in stage.reasons[0].detail
    assert kinds["cutoff_len"] == "fact"
    # Unsloth would be faster, but nobody asked for the library: the plan names the flag
    unsloth = next(c for c in plan.explanation if c.option == "use_unsloth")
    assert unsloth.kind == "default" and unsloth.value is False  # kept without consent
    assert any("--allow unsloth" in r.detail for r in unsloth.reasons)


def test_speed_reason_names_the_slower_alternative(kb):
    plan = solved({"gpus": "1x4090", "model": "qwen3-8b", "top": 0})
    choice = next(c for c in plan.explanation if c.option == "flash_attn")
    assert choice.value == "fa2" and choice.kind == "speed"
    assert "slower" in choice.reasons[0].detail
    assert any(r.rule == "llamafactory.attention_kernels" and r.source for r in choice.reasons)
    liger = next(c for c in plan.explanation if c.option == "enable_liger_kernel")
    # chosen for speed; or, where without it the rest of the plan overflows, the best plan
    # without it (other changes made) is slower
    assert liger.value is True and liger.kind in ("speed", "optimum")
    assert "slower" in liger.reasons[0].detail


def test_memory_breakdown_sums_to_the_levels(kb):
    plan = solved({"gpus": "8xA100", "model": "qwen3-8b", "top": 0})
    gpu_terms = [m for m in plan.memory.breakdown if m.location == "gpu"]
    total = sum(m.gib for m in gpu_terms)
    assert abs(total - plan.memory.per_gpu_gib.device) < 0.01
    allocated = sum(m.gib for m in gpu_terms if m.level == "allocated")
    assert abs(allocated - plan.memory.per_gpu_gib.allocated) < 0.01
    assert all(m.source for m in plan.memory.breakdown)


@pytest.mark.parametrize("gpus, pins, rule", [
    ("8xA100", ["use_unsloth=true", "deepspeed=z3"], "P18"),
    ("8xA100", ["flash_attn=fa3"], "HW_FA3"),
    ("8xH100", ["fp8=true", "quantization_bit=4"], "P16"),
])
def test_refused_pins_name_the_rule_and_its_reason(kb, gpus, pins, rule):
    plan = api.solve({"gpus": gpus, "model": "qwen3-8b", "set": pins}, kb)
    assert plan.status == "infeasible"
    rules = {r.rule: r for r in plan.core}
    assert f"llamafactory.{rule}" in rules
    assert rules[f"llamafactory.{rule}"].because
    assert rules[f"llamafactory.{rule}"].location.startswith("kb/") or "kb" in \
        rules[f"llamafactory.{rule}"].location
    assert {f"pin:{p.split('=')[0]}" for p in pins} <= set(rules)


def test_every_fix_really_makes_the_query_feasible(kb):
    query = {"gpus": "8xA100", "model": "qwen3-8b", "set": ["use_unsloth=true", "deepspeed=z3"],
             "top": 0}
    plan = api.solve(query, kb)
    assert plan.fixes
    for fix in plan.fixes:
        assert fix.kind == "drop_pins"
        kept = [p for p in query["set"] if p not in fix.drop]
        assert api.solve({**query, "set": kept}, kb).status == "optimal"


def test_hardware_fix_for_a_model_too_big_for_the_gpu(kb):
    query = {"gpus": "1x4090", "model": "qwen3-8b", "set": ["finetuning_type=full"], "top": 0,
             "host_ram": 64}  # offloading a full 8B fine-tune needs more CPU RAM than this
    plan = api.solve(query, kb)
    assert plan.status == "infeasible"
    # LoRA would fit: the pin of full fine-tuning is part of the clash
    assert {"memory:fit", "pin:finetuning_type"} <= {r.rule for r in plan.core}
    hardware = [f for f in plan.fixes if f.kind == "hardware"]
    assert hardware
    for fix in hardware:
        assert api.solve({**query, "gpus": fix.gpus}, kb).status == "optimal"


def test_alternatives_are_slower_or_bigger(kb):
    plan = api.solve({"gpus": "8xH100", "model": "llama3-8b", "top": 2}, kb)
    assert plan.alternatives
    for alt in plan.alternatives:
        assert alt.changes
        assert alt.speed_delta_pct >= 0


def test_json_is_deterministic(kb):
    query = {"gpus": "8xA100", "model": "qwen3-8b", "top": 1}
    first = api.solve(query, kb).model_dump_json()
    assert api.solve(query, kb).model_dump_json() == first
    data = json.loads(first)
    for key in ("status", "framework", "query", "config", "memory", "speed", "explanation",
                "core", "fixes", "alternatives"):
        assert key in data


def test_estimate_uses_defaults_and_reports_broken_rules(kb):
    estimate = api.estimate({"gpus": "8xA100", "model": "qwen3-8b"},
                            {"use_unsloth": "true", "deepspeed": "z3"}, kb)
    assert not estimate.feasible
    assert [r.rule for r in estimate.broken] == ["llamafactory.P18"]
    assert estimate.config["deepspeed"] == "z3"
    assert estimate.memory.breakdown and estimate.speed.step_time_s > 0


def test_estimate_of_defaults_matches_the_defaults(kb):
    estimate = api.estimate({"gpus": "1xH100", "model": "qwen3-8b"}, {}, kb)
    for option in kb.options.values():
        if option.framework == "llamafactory" and option.source_expr is None and \
                not option.passthrough:  # pass-through keys are written only when given
            key = option.emits[0].key if option.emits else option.name
            if key not in estimate.config:  # an estimate lists only options that apply
                assert option.when is not None, key
                continue
            value = estimate.config[key]
            assert value == (float(option.default) if hasattr(option.default, "denominator")
                             and option.default.denominator != 1 else
                             int(option.default) if hasattr(option.default, "denominator")
                             and not isinstance(option.default, bool) else option.default)


def test_emitted_yaml_has_only_real_keys(kb, tmp_path):
    plan = api.solve({"gpus": "8xH100", "model": "llama3-70b", "set": ["finetuning_type=full"],
                      "host_ram": 2048, "top": 0}, kb)  # a DGX H100: 2 TB
    written = api.emit(plan, str(tmp_path), kb)
    assert {p.rsplit("/", 1)[1] for p in written} == {"train.yaml", "ds_config.json", "run.sh",
                                                     "requirements.txt"}
    config = yaml.safe_load((tmp_path / "train.yaml").read_text())
    declared = {e.key for o in kb.options.values() if o.framework == "llamafactory"
                for e in o.emits if e.target == "main"}
    assert set(config) <= declared
    assert "lora_rank" not in config  # its `when` is false under full fine-tuning
    assert config["deepspeed"] == "ds_config.json"
    ds = json.loads((tmp_path / "ds_config.json").read_text())
    assert ds["zero_optimization"]["stage"] == 3
    assert "FORCE_TORCHRUN=1" in (tmp_path / "run.sh").read_text()


def _shipped_kb_test_names() -> list[str]:
    """The shipped KB's own tests, one pytest item each, so that a failing or slow one
    is named; none where the KB does not load (the `kb` fixture then fails the rest)."""
    try:
        return sorted(shipped_kb().tests)
    except Exception:  # noqa: BLE001
        return []


def _default_sample(kb) -> set[str]:
    """The shipped KB tests the default run runs: a cover, chosen greedily (the test that
    adds the most, ties by name), of every rule, warning and check a KB test names and of
    each kind of expectation (feasible, infeasible, holds, memory, warning, no_warning) in
    each framework. 176 of the 267 tests at the time of writing: each rule, warning and
    check is still tested and each kind of expectation still checked by the default run;
    the other tests, further cases of the same rules and kinds (distinct queries, ~0.1 s
    each), run under `-m slow`, and all of them in CI (.ci/run) and in `kbsolve kb test`."""
    wants = {name: _named(test) | {("kind", test.framework, e.kind) for e in test.expectations}
             for name, test in kb.tests.items()}
    chosen, covered = set(), set()
    while True:
        best = max(sorted(wants), key=lambda n: len(wants[n] - covered))
        if not wants[best] - covered:
            return chosen
        chosen.add(best)
        covered |= wants[best]


def _named(test) -> set[str]:
    """The rules, warnings and checks a KB test names (framework.name)."""
    return {f"{test.framework}.{n}" for e in test.expectations if e.kind != "memory"
            for n in e.names}


def _shipped_kb_test_params() -> list:
    names = _shipped_kb_test_names()
    sample = _default_sample(shipped_kb()) if names else set()
    return [pytest.param(n, marks=() if n in sample else pytest.mark.slow) for n in names]


@pytest.mark.parametrize("name", _shipped_kb_test_params())
def test_shipped_kb_test_passes(kb, name):
    # this test alone: run_tests' selection is a substring (`rule_p1` ran rule_p10..p19
    # too, eight KB tests solved twice a run)
    result = kbtest._run(kb, kb.tests[name])
    assert result.name == name
    assert result.passed, result.failures


def test_shipped_kb_tests_cover_every_rule(kb):
    assert kb.tests and sorted(kb.tests) == _shipped_kb_test_names()  # each one is above
    # the default run's sample names every rule, warning and check that the tests name
    named = set().union(*(_named(kb.tests[name]) for name in _default_sample(kb)))
    assert named == set().union(*(_named(t) for t in kb.tests.values()))
    missing = coverage(kb)
    assert missing["rules"] == []  # every hard rule has a DSL test (issue 8)


def test_model_from_a_hugging_face_config(kb, tmp_path):
    config = {"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
              "vocab_size": 128256, "max_position_embeddings": 131072,
              "tie_word_embeddings": True, "_name_or_path": "meta-llama/Llama-3.2-1B"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    plan = api.solve({"gpus": "1x4090", "model": str(path), "top": 0}, kb)
    assert plan.status == "optimal"
    assert plan.config["model_name_or_path"] == "meta-llama/Llama-3.2-1B"


def test_top_level_api():
    import kbsolve
    plan = kbsolve.solve({"gpus": "1xH100", "model": "qwen3-8b", "top": 0})
    assert plan.status == "optimal"
    estimate = kbsolve.estimate({"gpus": "1xH100", "model": "qwen3-8b"}, {"lora_rank": "16"})
    assert estimate.memory.fits and estimate.config["lora_rank"] == 16


def test_an_infeasible_plan_emits_nothing(kb, tmp_path):
    plan = api.solve({"gpus": "8xH100", "model": "llama3-70b", "set": ["finetuning_type=full"],
                      "host_ram": 1024, "top": 0}, kb)  # offloading needs more than 1 TiB
    assert plan.status == "infeasible"
    assert any(f.kind == "host_ram" and f.host_ram_gib > 1024 for f in plan.fixes)
    with pytest.raises(api.KbError, match="nothing to write"):
        api.emit(plan, str(tmp_path / "out"), kb)
    assert not (tmp_path / "out").exists()


def test_an_h100_node_is_assumed_to_have_2_tb(kb):
    """DGX H100 datasheet: 2 TB per 8-GPU node; a 70B full ZeRO-3 offload run fits it."""
    plan = api.solve({"gpus": "8xH100", "model": "llama3-70b", "top": 0,
                      "set": ["finetuning_type=full", "deepspeed=z3_offload"]}, kb)
    assert plan.status == "optimal" and plan.memory.host_fits
    assert "2048 GiB" in plan.memory.host_budget_source


def test_host_ram_bounds_offloading_plans(kb):
    query = {"gpus": "8xA100", "model": "qwen3-8b", "top": 0,
             "set": ["finetuning_type=full", "deepspeed=z3_offload"]}
    roomy = api.solve(query, kb)
    assert roomy.status == "optimal" and roomy.memory.host_gib > 1
    # without --host-ram the GPU's usual node is assumed, and said so
    assert roomy.memory.host_budget_gib is not None and roomy.memory.host_fits
    assert "assumed node" in roomy.memory.host_budget_source
    assert any("assumed host RAM" in note for note in roomy.notes)
    tight = api.solve({**query, "host_ram": 1}, kb)
    assert tight.status == "infeasible"
    assert "memory:host_fit" in [r.rule for r in tight.core]
    per_node = roomy.memory.host_node_gib
    assert per_node == pytest.approx(8 * roomy.memory.host_gib, abs=0.1)
    enough = api.solve({**query, "host_ram": (per_node + 1) / 0.8}, kb)  # 20% stays free
    assert enough.status == "optimal" and enough.memory.host_fits
