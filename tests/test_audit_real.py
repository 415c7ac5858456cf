"""The real-project corpus (bench/data/real_projects) and its scorer (bench/audit_real).

Default tests are cheap: the corpus validates against the label schema, and the
scorer's matching is checked on a tiny synthetic set. The slow test rebuilds the
frameworks' side venvs and checks the stored parser verdicts."""

from __future__ import annotations

import pytest

from bench.audit_real.extract import findings_of
from bench.audit_real.labels import CORPUS, load, set_dirs, validate
from bench.audit_real.score import Finding, score, totals

SETS = set_dirs(CORPUS)


def test_the_corpus_is_large_and_varied_enough():
    kinds = [load(folder)[0]["kind"] for folder in SETS]
    assert len(SETS) >= 40
    assert kinds.count("third_party") >= 15 and kinds.count("issue") >= 10
    assert kinds.count("official") >= 5 and kinds.count("lookalike") >= 3


def test_every_set_has_a_source_and_labels_that_validate():
    problems = [line for folder in SETS for line in validate(folder)]
    assert problems == []


def test_validation_reports_a_missing_file_and_a_bad_kind(tmp_path):
    folder = tmp_path / "broken"
    (folder / "files").mkdir(parents=True)
    (folder / "source.yaml").write_text("repo: a/b\ncommit: c\npaths: [x.yaml]\nlicense: MIT\n"
                                        "url: u\nkind: official\n")
    (folder / "labels.yaml").write_text(
        "framework: llamafactory\nhardware: unknown\nconfigs:\n- {file: x.yaml, kind: lf_train}\n"
        "problems:\n- {file: x.yaml, kind: bogus, why: w, evidence: e}\n")
    found = "\n".join(validate(folder))
    assert "source path x.yaml is not in files/" in found
    assert "labelled file x.yaml does not exist" in found
    assert "kind not in" in found


LABELS = {
    "problems": [
        {"file": "a.yaml", "kind": "error", "keys": ["Lora_target"], "why": "w", "evidence": "e"},
        {"file": "a.yaml", "kind": "oom", "keys": [], "why": "w", "evidence": "e"},
        {"file": "v.yaml", "kind": "unsupported_kind", "keys": [], "why": "w", "evidence": "e"},
    ],
    "false": [
        {"file": "a.yaml", "kind": "change", "keys": ["deepspeed"], "why": "no such path",
         "evidence": "e", "harmful": True},
        {"file": "b.yaml", "kind": "fits", "keys": [], "why": "w", "evidence": "e"},
    ],
}


def test_the_scorer_sorts_findings_into_correct_wrong_noise_and_missed():
    findings = [
        Finding("a.yaml", "error", ["Lora_target"], "nokey Lora_target"),   # correct
        Finding("a.yaml", "silent", ["lora_target"], "read as lora_target"),  # a silent finding
        Finding("a.yaml", "change", ["deepspeed"], "deepspeed: ds.json"),   # wrong, harmful
        Finding("b.yaml", "fits", ["memory"], "30 of 80 GiB"),                # wrong
        Finding("b.yaml", "tip", ["G_LIGER"], "Liger"),                       # noise
        Finding("a.yaml", "tip", ["deepspeed"], "ZeRO-3"),  # wrong, not harmful: not written
        Finding("v.yaml", "change", ["model"], "x"),                          # on a look-alike
        Finding("a.yaml", "unknown_key", ["Lora_target", "ddp_timeout"], ""),  # wrong
        Finding("b.yaml", "unknown_key", ["ddp_timeout"], ""),               # not a finding
    ]
    result = score(findings, LABELS, audited={"a.yaml", "b.yaml", "v.yaml"})
    verdicts = [(f.file, f.kind, f.verdict) for f in findings]
    assert verdicts[:7] == [("a.yaml", "error", "correct"), ("a.yaml", "silent", "noise"),
                            ("a.yaml", "change", "wrong"), ("b.yaml", "fits", "wrong"),
                            ("b.yaml", "tip", "noise"), ("a.yaml", "tip", "wrong"),
                            ("v.yaml", "change", "wrong")]
    assert findings[5].harmful == ""
    assert findings[7].verdict == "wrong" and findings[8].verdict == "noise"
    assert findings[2].harmful == "no such path"
    found = {(label["file"], label["kind"]): hit for label, hit in result["problems"]}
    assert found == {("a.yaml", "error"): True, ("a.yaml", "oom"): False,
                     ("v.yaml", "unsupported_kind"): False}
    t = totals(findings, result["problems"])
    # the look-alike's unit counts as one more wrong finding ("audited"), the refused key
    # listed as unmodelled as one more; the plain unmodelled-keys line is not a finding
    assert (t["findings"], t["correct"], t["wrong"], t["noise"], t["harmful"]) == (9, 1, 6, 2, 1)
    assert (t["problems"], t["found"], t["missed"]) == (3, 1, 2)
    assert t["precision"] == round(1 / 9, 3) and t["recall"] == round(1 / 3, 3)


def test_a_look_alike_left_alone_is_found_and_adds_no_finding():
    findings: list[Finding] = []
    result = score(findings, LABELS, audited={"a.yaml"})
    assert dict(((l["file"], l["kind"]), hit) for l, hit in result["problems"])[
        ("v.yaml", "unsupported_kind")] is True
    assert totals(findings, result["problems"])["findings"] == 0


def test_findings_are_read_from_every_part_of_a_report():
    report = {"units": [{
        "path": "c.yaml", "framework": "llamafactory",
        "errors": [{"id": "nokey", "message": "Lora_target is not a key", "fix": {}}],
        "silent": [{"id": "no_op", "message": "quantization_method without quantization_bit",
                    "fix": {"quantization_bit": 4}}],
        "fit": {"status": "oom", "device_gib": 90.0, "budget_gib": 80.0},
        "changes": [{"key": "enable_liger_kernel", "old": None, "new": True}],
        "recommendations": {"P2": [{"id": "H_TOKENIZED_PATH", "title_en": "t", "changes": {}}]},
        "unknown_keys": ["save_only_model", "ddp_timeout"]}]}
    findings, audited = findings_of(report)
    assert audited == {"c.yaml"}
    assert [(f.kind, f.keys[0]) for f in findings] == [
        ("error", "nokey"), ("silent", "quantization_bit"), ("oom", "memory"),
        ("change", "enable_liger_kernel"), ("tip", "H_TOKENIZED_PATH"),
        ("unknown_key", "save_only_model")]
    assert findings[-1].keys == ["save_only_model", "ddp_timeout"]


@pytest.mark.slow
def test_the_frameworks_parsers_give_the_stored_verdicts():
    from bench.parsers import venvs
    from bench.parsers.run import verdicts_many
    for name in venvs.PARSERS:
        built, message = venvs.build(name)
        if not built:
            pytest.skip(f"cannot build the {name} parser venv: {message}")
    loaded = [(folder, load(folder)[1], None) for folder in SETS]
    stored = {(folder.name, c["file"]): c["parser"] for folder, labels, _ in loaded
              for c in labels.get("configs") or [] if c.get("parser")}
    found = verdicts_many(loaded)  # one parser process per framework
    assert set(found) == set(stored)
    for where, verdict in found.items():
        assert verdict["verdict"] == stored[where]["verdict"], (where, verdict)
        if verdict["verdict"] == "refused":
            assert verdict["message"] == stored[where]["message"], where
    assert len(found) >= 40


def test_a_finding_is_scored_on_the_file_it_points_at():
    """A launch finding points at the script, a TOML setting at the TOML; the path
    itself is no text a label's keys may match (`fsdp` in `fsdp_qlora/`)."""
    report = {"units": [{"path": "c.yaml", "framework": "llamafactory",
                         "errors": [{"id": "CUDA_VISIBLE_DEVICES", "location": "run.sh, b.sh",
                                     "message": "4 processes, 2 GPUs"}],
                         "silent": [{"id": "W", "location": "fsdp_qlora/c.yaml:3:1",
                                     "message": "upcast"}]}]}
    found, audited = findings_of(report)
    assert [f.file for f in found] == ["run.sh", "fsdp_qlora/c.yaml"]
    assert "fsdp" not in found[1].text and audited == {"c.yaml"}


def test_a_path_the_fix_creates_is_no_harm(tmp_path):
    from bench.audit_real.harm import change_harm
    written = {"key": "deepspeed", "new": "ds_z3_offload_config.json"}
    assert "does not exist" in change_harm(written, "llamafactory", tmp_path, ".", {})
    created = {**written, "new_file": "ds_z3_offload_config.json"}
    assert change_harm(created, "llamafactory", tmp_path, ".", {}) == ""


def _scored_set(name: str, holdout: bool, verdicts: list[str], found: list[bool]) -> dict:
    """A set as run.scored() returns it, with findings already judged."""
    findings = [vars(Finding("c.yaml", "error", ["k"], "t", "llamafactory", verdict=v))
                for v in verdicts]
    return {"set": name, "framework": "llamafactory", "judged": ["c.yaml"], "tracebacks": [],
            "holdout": holdout, "findings": findings,
            "problems": [{"file": "c.yaml", "kind": "error", "keys": [], "found": hit}
                         for hit in found]}


def test_the_scorer_reports_the_held_out_sets_apart_from_the_tuned_ones():
    from bench.audit_real.report import tables
    from bench.audit_real.run import parts, summary
    sets = [_scored_set("tuned-a", False, ["correct", "correct", "correct", "noise"], [True]),
            _scored_set("held-b", True, ["correct", "wrong"], [True, False]),
            _scored_set("held-c", True, ["noise"], [])]
    split = parts(sets)
    assert split["tuned"]["set_names"] == ["tuned-a"]
    assert split["holdout"]["set_names"] == ["held-b", "held-c"]
    held = split["holdout"]["totals"]
    assert (held["findings"], held["correct"], held["wrong"], held["noise"]) == (3, 1, 1, 1)
    assert (held["problems"], held["found"]) == (2, 1)
    assert held["precision"] == round(1 / 3, 3) and held["recall"] == 0.5
    assert split["tuned"]["totals"]["precision"] == 0.75
    whole = summary(sets)["totals"]
    assert (whole["findings"], whole["correct"], whole["problems"]) == (7, 4, 3)
    text = tables({"sets": sets, **summary(sets), "parts": split, "refused_sets": {}})
    assert "held-out sets" in text
    assert "holdout sets 2, precision 33.3 %, recall 50.0 %" in text
    assert "tuned sets 1, precision 75.0 %, recall 100.0 %" in text


def test_holdout_is_a_boolean_in_labels(tmp_path):
    folder = tmp_path / "s"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "x.yaml").write_text("stage: sft\n")
    (folder / "source.yaml").write_text("repo: a/b\ncommit: c\npaths: [x.yaml]\nlicense: MIT\n"
                                        "url: u\nkind: third_party\n")
    (folder / "labels.yaml").write_text("framework: llamafactory\nhardware: unknown\n"
                                        "holdout: 'yes'\nconfigs:\n- {file: x.yaml, kind: lf_train}\n")
    assert validate(folder) == ["s: holdout is true or false"]
