"""kb check --deep: planted problems in a temporary pack are each reported with
their location; the shipped KB has no contradiction."""

from __future__ import annotations


import pytest

from kbsolve import api
from kbsolve.cli.main import main
from kbsolve.dsl import parse as parse_mod
from shared_data import needs_shared

PLANTED = """module planted.rules for llamafactory
import core.facts

rule PL_A: require use_unsloth {
  because "planted: half of a contradiction"
  source "seed:002#A"
}

rule PL_B: forbid use_unsloth {
  because "planted: the other half"
  source "seed:002#A"
}
"""

DEAD = """module planted.dead for llamafactory
import core.facts

rule PL_DEAD_VALUE: forbid stage == "kto" or (stage == "dpo" and use_unsloth) {
  because "planted: with PL_DEAD_VALUE_2, dpo becomes unreachable"
  source "seed:002#A"
}

rule PL_DEAD_RULE: forbid gpu.vendor == "nvidia" and gpu.vendor == "amd" and use_unsloth {
  because "planted: no GPU is made by two vendors"
  source "seed:002#A"
}

rule PL_REDUNDANT: forbid pure_bf16 and deepspeed == "z3" {
  because "planted: P13 already forbids this"
  source "seed:002#A"
}

warn PL_SILENT: use_unsloth and not use_unsloth {
  because "planted: never fires"
  source "seed:002#A"
}

let planted_unused: count = 3 {
  because "planted: nobody reads it"
  source "seed:002#A"
}

option planted_silent_option: bool = false {
  doc "planted: never written"
  source "seed:002#A"
}

rule PL_DEAD_VALUE_2: require stage == "dpo" implies use_unsloth {
  because "planted: the other half of the dead value"
  source "seed:002#A"
}

rule PL_BAD_SOURCE: forbid use_unsloth and fp8 {
  because "planted: points at a seed section that does not exist"
  source "seed:002#ZZ"
}

rule PL_TYPO: forbid quantization_method != "bnb" {
  because "planted: an over-broad condition (meant ==) kills every other method"
  source "seed:002#A"
}

check PL_CHECK in A "Planted" "种植" {
  points 1
  priority P2
  enabled stage == "dpo"
  recommend stage = "dpo"
  source "seed:002#A"
}
"""


def write_pack(tmp_path, name: str, text: str):
    pack = tmp_path / name
    pack.mkdir()
    (pack / "planted.kb").write_text(text, encoding="utf-8")
    return str(pack)


def by_code(report, code: str):
    return [d for d in report.diagnostics if d.code == code]


@pytest.fixture(scope="module", autouse=True)
def parsed_once():
    """parse_module, computed once per (text, file) in this module: each deep check's
    unused-definition pass parses every shipped file again (~1.5 s of CPU; a pure
    function, the AST is frozen; errors are not kept)."""
    real, memo = parse_mod.parse_module, {}

    def parse_module(text: str, file: str):
        if (text, file) not in memo:
            memo[text, file] = real(text, file)
        return memo[text, file]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parse_mod, "parse_module", parse_module)
        yield memo


# The planted packs are written for llamafactory: solving the other frameworks'
# spaces (checked whole by test_shipped_kb_deep_check_...) would find nothing of them.
@pytest.fixture(scope="module")
def dead_report(tmp_path_factory, parsed_once):
    return api.deep_check([write_pack(tmp_path_factory.mktemp("p"), "dead", DEAD)],
                          frameworks=["llamafactory"])


def test_contradiction_reports_the_minimal_core_with_locations(tmp_path):
    report = api.deep_check([write_pack(tmp_path, "contra", PLANTED)],
                            frameworks=["llamafactory"])
    assert set(report.situations) == {"llamafactory"}  # only the framework asked for
    found = by_code(report, "contradiction")
    assert len(found) == 1
    notes = found[0].notes
    assert sorted(n.message.split(" ")[1] for n in notes) == ["PL_A", "PL_B"]
    assert all(n.span.file.endswith("planted.kb") for n in notes)
    assert sorted(n.span.line for n in notes) == [4, 9]


def test_dead_value_names_the_option_and_the_rule(dead_report):
    found = [d for d in by_code(dead_report, "dead-value") if "'stage'" in d.message]
    assert [d.message.split(" ")[1] for d in found] == ["'dpo'"]
    assert sorted(n.message.split(" ")[1] for n in found[0].notes) == \
        ["PL_DEAD_VALUE", "PL_DEAD_VALUE_2"]


def test_an_over_broad_forbid_kills_values_it_does_not_name(dead_report):
    found = [d for d in by_code(dead_report, "dead-value") if "'quantization_method'" in d.message]
    assert len(found) >= 2 and "'bnb'" not in str([d.message for d in found])
    assert all([n.message.split(" ")[1] for n in d.notes] == ["PL_TYPO"] for d in found)


def test_forbidding_a_value_by_name_is_not_a_dead_value(dead_report):
    assert not [d for d in by_code(dead_report, "dead-value") if "'kto'" in d.message]


def test_dead_rule_and_silent_warning(dead_report):
    dead = by_code(dead_report, "dead-rule")
    assert [d.message.split(" ")[1] for d in dead if "PL_" in d.message] == ["PL_DEAD_RULE"]
    assert dead[0].span.file.endswith("planted.kb")
    silent = [d for d in by_code(dead_report, "silent-warning") if "PL_" in d.message]
    assert [(d.message.split(" ")[1], d.span.line) for d in silent] == [("PL_SILENT", 19)]


def test_checklist_item_recommending_a_dead_value(dead_report):
    found = [d for d in by_code(dead_report, "dead-recommendation") if "PL_CHECK" in d.message]
    assert [d.span.line for d in found] == [49]
    assert sorted(n.message.split(" ")[1] for n in found[0].notes) == \
        ["PL_DEAD_VALUE", "PL_DEAD_VALUE_2"]


def test_redundant_rule_names_the_rule_that_implies_it(dead_report):
    found = [d for d in by_code(dead_report, "redundant") if "PL_REDUNDANT" in d.message]
    assert len(found) == 1
    assert [n.message.split(" ")[1] for n in found[0].notes] == ["P13"]


def test_unused_let_and_unwritten_option(dead_report):
    assert [d.span.line for d in by_code(dead_report, "unused")
            if "planted_unused" in d.message] == [24]
    assert [d.span.line for d in by_code(dead_report, "no-emit")
            if "planted_silent_option" in d.message] == [29]


@needs_shared  # the seed sections a source names are read from ../shared/seeds
def test_bad_source_names_its_location(dead_report):
    bad = [d for d in by_code(dead_report, "bad-source") if "seed:002#ZZ" in d.message]
    assert [d.span.line for d in bad] == [39]


def test_deep_check_of_an_unknown_framework_is_a_usage_error(tmp_path, capsys):
    pack = write_pack(tmp_path, "contra", PLANTED)
    assert main(["kb", "check", "--deep", "--kb", pack, "--framework", "lamafactory"]) == 2
    err = capsys.readouterr().err
    assert "unknown framework 'lamafactory'" in err and "did you mean 'llamafactory'" in err


def test_unsourced_rule_is_an_error_with_its_location(tmp_path, capsys):
    pack = write_pack(tmp_path, "nosource", "module planted.ns for llamafactory\n"
                      "rule PL_NS: forbid use_unsloth {\n  because \"no source\"\n}\n")
    assert main(["kb", "check", "--deep", "--kb", pack]) == 2
    err = capsys.readouterr().err
    assert "planted.kb:2:" in err and "has no 'source'" in err


def test_missing_shared_folder_skips_the_source_check_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("KBSOLVE_SHARED_DIR", str(tmp_path / "none"))
    from kbsolve.lint.sources import broken_sources
    kb = api.load_kb()
    found, note = broken_sources(kb, [])
    assert all(not d.message.startswith("source 'seed:") for d in found)
    assert "KBSOLVE_SHARED_DIR" in note


@pytest.mark.slow  # ~11 s of CPU; CI's wheel check runs `kbsolve kb check --deep`, which
# exits 2 on a contradiction or a dead value (both errors), and the planted packs below
# check the deep check itself on one framework's space
def test_shipped_kb_deep_check_has_no_contradiction():
    # its CPU time is a bench figure (README: kb check --deep), never a test's assertion
    report = api.deep_check()
    assert not by_code(report, "contradiction")
    assert not by_code(report, "dead-value")
    assert all(n > 0 for n in report.situations.values())
