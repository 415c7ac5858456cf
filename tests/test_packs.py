"""Rule packs: the organisation's example pack in docs/examples, KBSOLVE_PATH,
overrides, and clashes between packs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbsolve import api
from kbsolve.cli.main import main
from kbsolve.diagnostics import KbError

ORG = str(Path(__file__).resolve().parent.parent / "docs" / "examples" / "org_pack")
RULE = 'rule {name}: forbid {cond} {{ because "b" source "seed:002#A" }}\n'


def pack(root: Path, name: str, files: dict[str, str]) -> str:
    folder = root / name
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text, encoding="utf-8")
    return str(folder)


def test_org_pack_tests_pass():
    results = api.run_kb_tests([ORG], "org_")
    assert sorted(r.test.name for r in results) == [
        "org_plans_on_h20", "org_refuses_fsdp_offload", "org_refuses_other_gpus",
        "org_refuses_zero3_offload"]
    assert all(r.passed for r in results), [r.failures for r in results]


@pytest.fixture(scope="module")
def org_kb():
    """The shipped KB with the org pack, built once for the tests that only read it."""
    return api.load_kb([ORG], use_cache=False)


def test_org_h20_rule_admits_exactly_the_h20(org_kb):
    """The rule names no GPU; it must still single the H20 out of the catalog."""
    from kbsolve.program.evaluate import Evaluator
    from kbsolve.program.facts import collect_facts
    kb = org_kb
    rule = kb.rules["llamafactory.ORG_H20_ONLY"]
    model = kb.catalog.model("qwen3-8b")
    admitted = [gpu.name for gpu in kb.catalog.gpus.values()
                if Evaluator(kb, "llamafactory", collect_facts(kb, gpu, model, {})).run(
                    rule.expr, {})]
    assert admitted == ["H20"]


def test_org_pack_rules_are_all_tested():
    rows = {row.kind: row for row in api.coverage_report([ORG])}
    assert not [k for k, _ in rows["hard rules"].untested if ".ORG_" in k]


def test_org_pack_override_replaces_the_h20_with_its_reason(org_kb):
    kb = org_kb
    assert kb.catalog.gpu("H20").memory_gib == pytest.approx(140.4)
    assert api.load_kb([]).catalog.gpu("H20").memory_gib < 100
    override = [o for o in kb.catalog.overrides if o.name == "H20"]
    assert len(override) == 1 and "141 GB" in override[0].reason
    assert override[0].span.file.endswith("org_pack/catalog/gpus.yaml")
    assert "org-eth-200g" in kb.catalog.networks


def test_org_pack_plans_h20_without_offload_and_disables_infiniband(tmp_path):
    plan = api.solve({"gpus": "8xH20", "model": "qwen3-8b"}, packs=[ORG])
    assert plan.status in ("optimal", "feasible")  # feasible: a busy machine hit the time-out
    assert not any("offload" in str(value) for value in plan.config.values())
    written = api.emit(plan, str(tmp_path), packs=[ORG])
    script = next(p for p in written if p.endswith("run.sh"))
    assert "NCCL_IB_DISABLE=1" in Path(script).read_text(encoding="utf-8")
    other = api.solve({"gpus": "8xA100", "model": "qwen3-8b"}, packs=[ORG])
    assert other.status == "infeasible"


def test_kbsolve_path_is_the_same_as_kb(monkeypatch, capsys):
    monkeypatch.setenv("KBSOLVE_PATH", ORG)
    kb = api.load_kb(use_cache=False)
    assert "llamafactory.ORG_H20_ONLY" in kb.rules
    assert main(["kb", "test", "-k", "org_refuses_other"]) == 0
    assert "PASS  llamafactory.org_refuses_other_gpus" in capsys.readouterr().out


@pytest.mark.ci  # a whole deep check of a docs example (~7 s); CI's own step runs it
def test_org_pack_deep_check_finds_no_error():
    # the pack's modules are all `for llamafactory`: the other spaces cannot hold its rules
    report = api.deep_check([ORG], frameworks=["llamafactory"])
    mine = [d for d in report.diagnostics if "org_pack" in str(d.span)]
    assert not mine, [d.render() for d in mine]


def test_rule_clash_between_packs_shows_both_locations(tmp_path):
    a = pack(tmp_path, "a", {"a.kb": "module a.m for llamafactory\n" +
                             RULE.format(name="DUP", cond="use_unsloth")})
    b = pack(tmp_path, "b", {"b.kb": "module b.m for llamafactory\n" +
                             RULE.format(name="DUP", cond="fp8")})
    with pytest.raises(KbError) as info:
        api.load_kb([a, b], use_cache=False)
    clash = [d for d in info.value.diagnostics if "already defined" in d.message]
    assert len(clash) == 1
    assert clash[0].span.file.endswith("b/b.kb") and clash[0].span.line == 2
    assert clash[0].notes[0].span.file.endswith("a/a.kb")


def test_catalog_clash_needs_an_override(tmp_path):
    gpu = Path(ORG, "catalog", "gpus.yaml").read_text(encoding="utf-8")
    entry = gpu.replace("name: H20", "name: ORGX").replace("aliases: [H20-141G]", "aliases: []")
    entry = "\n".join(line for line in entry.splitlines() if "override:" not in line) + "\n"
    a = pack(tmp_path, "a", {"catalog/gpus.yaml": entry})
    b = pack(tmp_path, "b", {"catalog/gpus.yaml": entry})
    with pytest.raises(KbError) as info:
        api.load_kb([a, b], use_cache=False)
    clash = info.value.diagnostics[0]
    assert "ORGX" in clash.message and clash.span.file.endswith("b/catalog/gpus.yaml")
    assert clash.notes[0].span.file.endswith("a/catalog/gpus.yaml")


def test_a_broken_pack_hides_no_other_error(tmp_path):
    broken = pack(tmp_path, "broken", {"x.kb": "module p.x for llamafactory\nrule R: forbid {\n"})
    typed = pack(tmp_path, "typed", {"y.kb": "module p.y for llamafactory\n" +
                                     RULE.format(name="TY", cond="use_unsloth == 3")})
    with pytest.raises(KbError) as info:
        api.load_kb([broken, typed], use_cache=False)
    where = sorted((Path(d.span.file).name, d.span.line) for d in info.value.diagnostics)
    assert where == [("x.kb", 2), ("y.kb", 2)]


def test_missing_pack_is_an_error(tmp_path, capsys):
    assert main(["kb", "check", "--kb", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ---- docs/authoring.md: the tutorial pack, command by command ----------------------

TUTORIAL = str(Path(ORG).parent / "tutorial_pack")


def test_tutorial_pack_checks_and_its_tests_pass(capsys):
    assert main(["kb", "check", "--kb", TUTORIAL]) == 0
    assert capsys.readouterr().out.startswith("kb check: ok")
    results = api.run_kb_tests([TUTORIAL], "tut_")
    assert len(results) == 4 and all(r.passed for r in results), [r.failures for r in results]
    assert main(["kb", "fmt", "--check", TUTORIAL]) == 0


def test_tutorial_gpu_plans():
    plan = api.solve({"gpus": "2xRTX-6000-Ada", "model": "qwen3-8b"},
                     packs=[TUTORIAL])
    assert plan.status in ("optimal", "feasible") and plan.gpu == "RTX-6000-Ada"


def test_tutorial_model_entry_matches_its_config_json():
    from kbsolve.catalog import model_from_hf_config
    read = model_from_hf_config(Path(TUTORIAL, "smollm2-1.7b", "config.json"))
    entry = api.load_kb([TUTORIAL], use_cache=False).catalog.model("smollm2-1.7b")
    assert round(read.params_b, 2) == entry.params_b == 1.71
    for field in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab",
                  "tied_embeddings", "max_positions", "model_type"):
        assert getattr(read, field) == getattr(entry, field), field


def test_tutorial_option_neighbourhood(capsys):
    assert main(["kb", "graph", "--option", "ddp_bucket_cap_mb", "--kb", TUTORIAL]) == 0
    out = capsys.readouterr().out
    assert out.startswith("option llamafactory.ddp_bucket_cap_mb: int [25, 100] = 25\n")
    assert "  affects memory term:\n    memory:llamafactory.ddp_bucket_in_flight\n" in out
    assert "  affects speed term:\n    speed:llamafactory.ddp_buckets" in out


def test_tutorial_crash_rule_is_in_the_core():
    plan = api.solve({"gpus": "8xA100-80G-SXM", "model": "qwen2.5-72b",
                      "set": ["finetuning_type=lora", "quantization_bit=4",
                              "deepspeed=z3_offload"]}, packs=[TUTORIAL])
    assert plan.status == "infeasible"
    assert any("TUT_QLORA_Z3_OFFLOAD" in str(reason) for reason in plan.core)
