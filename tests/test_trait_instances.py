"""A trait's instances are made once per declaration and include chain in a process:
a KB built again (packs, golden cases) gets the same frozen objects, so the resolver's
per-node memo answers them again; another include or another trait text makes its own."""

from __future__ import annotations

from kbsolve.diagnostics import DiagnosticSink
from kbsolve.dsl import traits
from kbsolve.dsl.load import parsed_module

TRAIT = 'module core.t\ntrait shared {\n  let x: count = {n}\n}\n'
FRAMEWORK = "module fw.a for {fw}\n{pad}include shared\n"


def _expanded(trait_text: str, framework: str = "pytorch", pad: str = ""):
    modules = [parsed_module(trait_text, "core/t.kb"),
               parsed_module(FRAMEWORK.format(fw=framework, pad=pad), f"{framework}/a.kb")]
    sink = DiagnosticSink()
    out = traits.expand(modules, sink)
    assert not sink.errors
    (instance,) = out[1].decls
    return instance


def test_a_kb_built_again_gets_the_same_instance():
    first = _expanded(TRAIT.replace("{n}", "1"))
    assert first.span.via and first.span.via[0].line == 2
    assert _expanded(TRAIT.replace("{n}", "1")) is first


def test_another_include_place_or_trait_text_makes_its_own_instance():
    first = _expanded(TRAIT.replace("{n}", "1"))
    moved = _expanded(TRAIT.replace("{n}", "1"), pad="\n")
    assert moved is not first and moved.span.via[0].line == 3 and moved.span.line == 3
    other = _expanded(TRAIT.replace("{n}", "1"), framework="deepspeed")
    assert other is not first and other.span.via[0].file == "deepspeed/a.kb"
    changed = _expanded(TRAIT.replace("{n}", "2"))
    assert changed is not first and changed.span.via[0].line == 2


def test_a_place_differing_only_in_its_via_is_another_key():
    span = _expanded(TRAIT.replace("{n}", "1")).span
    assert traits._place(span) != traits._place(span.__class__(span.file, span.line,
                                                               span.col, span.end_line,
                                                               span.end_col))
