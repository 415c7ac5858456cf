"""The language's second edition (issue 25, item 7): one declaration for a fact and
its field (`fact` in the field's body; `kb fmt` migrates the first edition's pair),
and traits (`trait NAME { ... }` in a core module, `include NAME` in a framework),
whose instances report both the trait's file:line and each include's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbsolve import api
from kbsolve.catalog import load_kb
from kbsolve.diagnostics import KbError
from kbsolve.dsl.load import kb_roots
from kbsolve.dsl.types import INT, NUM
from kbsolve.lint.deep import split_facts
from kbsolve.lint.fmtfiles import format_files

GOLDEN = Path(__file__).parent / "golden" / "fmt_migrate"
WHY = 'because "b" source "kb:catalog/gpus.yaml" }\n'  # the end of a body
R = "{ " + WHY

TRAIT = """module pk.traits

trait multi {
  emit params "NODES_X" = query.nodes {
    when query.nodes > 1
    doc "nodes in the job"
    because "the launcher needs it"
    source "pytorch:torch/distributed/run.py (--nnodes)"
  }
  emit params "PORT_X" = 29501 {
    when query.nodes > 1
    doc "a port"
    because "the launcher needs it"
    source "pytorch:torch/distributed/run.py (--master_port)"
  }
}
"""


def _errors(tmp_path, monkeypatch, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KbError) as info:
        load_kb([Path(".")], use_cache=False)
    return info.value


def _where(error: KbError):
    return [(d.span.file, d.span.line, d.span.col, d.code, d.message)
            for d in error.diagnostics]


# ---- one declaration for a fact and its field ------------------------------------


def test_a_field_that_says_fact_is_a_fact_of_its_type(tmp_path):
    pack = tmp_path / "pk"
    pack.mkdir()
    (pack / "v.kb").write_text(
        'module pk.vocab\nfield gpu.sram_mb: MB {\n  optional\n  fact\n'
        '  because "on-die SRAM"\n  source "kb:catalog/gpus.yaml"\n}\n'
        'field model.rope_theta: num { when model.kind == "llm" optional fact ' + WHY +
        'field gpu.dies: int 1..4 = 1 { fact ' + WHY, encoding="utf-8")
    kb = api.load_kb([str(pack)], use_cache=False)
    sram, theta, dies = (kb.facts[p] for p in ("gpu.sram_mb", "model.rope_theta", "gpu.dies"))
    assert (sram.type.dim, sram.scale) == (kb.facts["gpu.memory_gib"].type.dim, 10 ** 6)
    assert (theta.type, dies.type, dies.scale) == (NUM, INT, 1)
    assert sram.meta.because == "on-die SRAM" and sram.meta.span.line == 2
    assert "gpu.fp32_tflops" not in kb.facts  # a field without `fact` stays out of rules


def test_a_fact_and_a_field_that_says_fact_clash(tmp_path, monkeypatch):
    error = _errors(tmp_path, monkeypatch, {
        "a.kb": "module p.a\nfield gpu.x: int = 1 { fact " + WHY + "fact gpu.x: int\n"})
    assert _where(error) == [("a.kb", 3, 6, "duplicate",
                              "fact 'gpu.x' clashes with field 'gpu.x'")]
    assert error.diagnostics[0].notes[0].span.line == 2


def test_a_list_field_cannot_be_a_fact(tmp_path, monkeypatch):
    error = _errors(tmp_path, monkeypatch, {
        "a.kb": "module p.a\nfield model.tags: [str] { optional fact " + WHY})
    assert _where(error) == [("a.kb", 2, 7, "unknown-attribute",
                              "the model attribute 'tags' is a list, which rules cannot read")]


def test_split_fact_warns_in_the_same_pack_only(tmp_path):
    pack = tmp_path / "pk"
    pack.mkdir()
    (pack / "v.kb").write_text("module pk.vocab\nfield gpu.sram_mb: MB { optional " + WHY +
                               "fact gpu.sram_mb: MB\nfact gpu.fp32_tflops: TFLOPS\n",
                               encoding="utf-8")
    kb = api.load_kb([str(pack)], use_cache=False)
    found = split_facts(kb, kb_roots([str(pack)]))
    assert [(d.code, d.severity, d.span.line, d.message) for d in found] == [
        ("split-fact", "warning", 3, "fact gpu.sram_mb repeats field gpu.sram_mb of the same "
                                     "pack; write 'fact' in the field's body")]
    assert "gpu.fp32_tflops" in kb.facts  # a shipped field a pack lets rules read: no warning


def test_kb_fmt_migrates_facts_into_their_fields(tmp_path):
    """The golden before/after: mergeable facts move into their fields (the field's doc
    kept, the fact's taken when the field has none); a fact of another type, with
    clauses other than doc, sharing a line, or of a field elsewhere stays."""
    work = tmp_path / "pack"
    shutil.copytree(GOLDEN / "before", work)
    changed = format_files([work], write=True)
    assert sorted(Path(p).name for p in changed) == ["facts.kb", "vocabulary.kb"]
    for path in sorted((GOLDEN / "after").iterdir()):
        assert (work / path.name).read_text(encoding="utf-8") == \
            path.read_text(encoding="utf-8"), path.name
    assert format_files([work], write=False) == []  # idempotent
    before = api.load_kb([str(GOLDEN / "before")], use_cache=False)
    after = api.load_kb([str(work)], use_cache=False)
    for path in ("gpu.sram_mb", "gpu.dies", "model.rope_theta", "model.tags_count"):
        assert (after.facts[path].type, after.facts[path].scale) == \
            (before.facts[path].type, before.facts[path].scale), path


def test_kb_fmt_check_reports_a_migration(tmp_path):
    work = tmp_path / "pack"
    shutil.copytree(GOLDEN / "before", work)
    assert len(format_files([work], write=False)) == 2
    assert (work / "facts.kb").read_text(encoding="utf-8") == \
        (GOLDEN / "before" / "facts.kb").read_text(encoding="utf-8")  # --check writes nothing


# ---- traits ----------------------------------------------------------------------


def test_an_included_trait_is_the_frameworks_own(tmp_path):
    pack = tmp_path / "pk"
    pack.mkdir()
    (pack / "traits.kb").write_text(TRAIT, encoding="utf-8")
    (pack / "pt.kb").write_text("module pk.pt for pytorch\ninclude multi\n", encoding="utf-8")
    (pack / "tt.kb").write_text("module pk.tt for torchtitan\ninclude multi\n",
                                encoding="utf-8")
    kb = api.load_kb([str(pack)], use_cache=False)
    mine = [(e.framework, e.key, e.meta.span.line, e.meta.module) for e in kb.emits
            if e.key in ("NODES_X", "PORT_X")]
    assert mine == [("pytorch", "NODES_X", 4, "pk.pt"), ("pytorch", "PORT_X", 10, "pk.pt"),
                    ("torchtitan", "NODES_X", 4, "pk.tt"), ("torchtitan", "PORT_X", 10, "pk.tt")]
    spans = [e.meta.span for e in kb.emits if e.key == "NODES_X"]
    assert [s.via[0].file for s in spans] == [str(pack / "pt.kb"), str(pack / "tt.kb")]


def test_an_unknown_trait_at_the_include_with_did_you_mean(tmp_path, monkeypatch):
    error = _errors(tmp_path, monkeypatch, {
        "traits.kb": TRAIT, "pt.kb": "module pk.pt for pytorch\n\ninclude mutli\n"})
    assert _where(error) == [("pt.kb", 3, 9, "unknown-trait",
                              "unknown trait 'mutli'; did you mean 'multi'?")]


def test_a_trait_clashing_with_the_frameworks_own_shows_both_places(tmp_path, monkeypatch):
    own = ('module pk.pt for pytorch\n\nemit params "PORT_X" = 1 {\n  when query.nodes > 1\n'
           '  because "mine"\n  source "pytorch:torch/distributed/run.py"\n}\n\n'
           'include multi\n')
    error = _errors(tmp_path, monkeypatch, {"traits.kb": TRAIT, "pt.kb": own})
    assert _where(error) == [("traits.kb", 10, 8, "duplicate",
                              "emit 'params:PORT_X' is already defined")]
    shown = error.render()
    assert "traits.kb:10:8: error: emit 'params:PORT_X' is already defined" in shown
    assert "pt.kb:9:1: note: included from here" in shown
    assert "pt.kb:3:6: note: emit 'params:PORT_X' first defined here" in shown


def test_an_error_inside_a_trait_names_the_include(tmp_path, monkeypatch):
    bad = TRAIT.replace("when query.nodes > 1\n    doc \"a port\"",
                        "when query.nodez > 1\n    doc \"a port\"")
    error = _errors(tmp_path, monkeypatch, {
        "traits.kb": bad, "pt.kb": "module pk.pt for pytorch\ninclude multi\n"})
    assert [(f, line, col, code) for f, line, col, code, _ in _where(error)] == \
        [("traits.kb", 11, 10, "unknown-fact")]
    assert "pt.kb:2:1: note: included from here" in error.render()


def test_a_cycle_of_includes(tmp_path, monkeypatch):
    cyclic = ("module pk.traits\n\ntrait a {\n  include b\n}\n\ntrait b {\n  include a\n}\n")
    error = _errors(tmp_path, monkeypatch, {
        "traits.kb": cyclic, "pt.kb": "module pk.pt for pytorch\ninclude a\n"})
    assert _where(error) == [("traits.kb", 8, 11, "include-cycle",
                              "traits include each other in a circle: a -> b -> a")]
    shown = error.render()
    assert shown.index("traits.kb:4:3: note: included from here") < \
        shown.index("pt.kb:2:1: note: included from here")


def test_traits_and_includes_sit_where_they_belong(tmp_path, monkeypatch):
    error = _errors(tmp_path, monkeypatch, {
        "a.kb": "module pk.a for pytorch\ntrait t {\n  field gpu.y: int = 1 " + R + "}\n",
        "b.kb": "module pk.b\ninclude t\ntrait u {\n  field gpu.z: int = 1 " + R + "}\n"})
    assert [(f, line, code) for f, line, _, code, _ in _where(error)] == [
        ("a.kb", 2, "needs-core"), ("b.kb", 2, "needs-framework"), ("b.kb", 4, "in-trait")]


def test_an_include_checks_to_the_same_kb_as_the_text_written_in_place(tmp_path):
    """The instance is the declaration written at the include: same emits, in the same
    order among the framework's own, as the copy-pasted first edition."""
    own = ('emit params "AFTER_X" = 1 {\n  because "mine"\n'
           '  source "pytorch:torch/distributed/run.py"\n}\n')
    body = TRAIT[TRAIT.index("trait multi {") + len("trait multi {"):TRAIT.rindex("}")]
    variants = {"included": (TRAIT, "include multi\n"), "inline": ("module pk.traits\n", body)}
    found = {}
    for name, (traits, middle) in variants.items():
        pack = tmp_path / name
        pack.mkdir()
        (pack / "traits.kb").write_text(traits, encoding="utf-8")
        (pack / "pt.kb").write_text("module pk.pt for pytorch\n" + middle + own,
                                    encoding="utf-8")
        kb = api.load_kb([str(pack)], use_cache=False)
        found[name] = [(e.framework, e.target, e.key, e.value, e.when, e.meta.doc,
                        e.meta.because, e.meta.source, e.meta.module) for e in kb.emits]
    assert found["included"] == found["inline"]
    assert [row[2] for row in found["included"] if row[0] == "pytorch"][-3:] == \
        ["NODES_X", "PORT_X", "AFTER_X"]
