"""lint/duplicates.py: the duplication issue 25 counted (declarations of two frameworks
identical up to the framework's name; a fact beside its field), on written modules."""

from __future__ import annotations

from kbsolve.dsl.parse import parse_module
from kbsolve.lint.duplicates import fact_field_pairs, identical_pairs

EMIT = '''emit params "NNODES" = query.nodes {{
  when query.nodes > 1
  because "{fw}'s launcher reads it"
  source "{src}"
}}
'''


def _modules(texts: dict[str, str]):
    return [parse_module(text, name) for name, text in texts.items()]


def test_identical_up_to_the_framework_name_and_places():
    modules = _modules({
        "a.kb": "module a for alpha\n\n" + EMIT.format(fw="alpha", src="alpha:run.py#L3"),
        "b.kb": "module b for beta\n" + EMIT.format(fw="beta", src="beta:run.py#L3"),
        "c.kb": "module c for gamma\n" + EMIT.format(fw="gamma", src="gamma:run.py#L4"),
    })
    pairs = identical_pairs(modules)
    assert [(p.kind, p.name, p.first[0], p.second[0]) for p in pairs] == \
        [("emit", "params:NNODES", "alpha", "beta")]  # gamma cites another line
    assert (pairs[0].first[1].line, pairs[0].second[1].line) == (3, 2)


def test_a_trait_written_once_is_no_pair():
    trait = "module t\ntrait multi {\n" + EMIT.format(fw="the", src="kb:x") + "}\n"
    modules = _modules({"t.kb": trait, "a.kb": "module a for alpha\ninclude multi\n",
                        "b.kb": "module b for beta\ninclude multi\n"})
    assert identical_pairs(modules) == []


def test_a_fact_beside_its_field():
    modules = _modules({
        "v.kb": 'module v\nfield gpu.x: int = 1 { because "b" source "kb:x" }\n'
                'field gpu.y: int = 1 { fact because "b" source "kb:x" }\n',
        "f.kb": "module f\nfact gpu.x: int\nfact gpu.z: int\n"})
    assert [(p.name, p.first[1].file, p.second[1].file) for p in fact_field_pairs(modules)] \
        == [("gpu.x", "f.kb", "v.kb")]
