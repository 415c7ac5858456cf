"""The vocabulary in the KB: fields and enums declared in the rule language, the
catalog's pydantic models built from them, and a pack that adds a GPU the
shipped vocabulary does not know (docs/examples/gaudi_pack, an Intel Gaudi 3)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from kbsolve import api
from kbsolve.catalog import load_catalog
from kbsolve.catalog.schema import model_class, query_facts
from kbsolve.diagnostics import DiagnosticSink, KbError
from kbsolve.catalog import load_kb
from kbsolve.dsl.cache import CACHE_ENV
from kbsolve.dsl.parse import parse_module
from kbsolve.dsl.vocab import build

ROOT = Path(__file__).resolve().parents[1]
GAUDI = ROOT / "docs" / "examples" / "gaudi_pack"


@pytest.fixture(scope="module")
def gaudi_kb():
    return api.load_kb([str(GAUDI)], use_cache=False)


# ---- the Gaudi 3 pack: declarations only -----------------------------------------


def test_gaudi_pack_is_accepted_and_its_gpu_validated(gaudi_kb):
    gpu = gaudi_kb.catalog.gpu("gaudi3")
    assert (gpu.name, gpu.vendor, gpu.arch, gpu.link) == ("Gaudi3", "intel", "gaudi3", "roce")
    assert gpu.sram_mb == 96 and gpu.bf16_tflops == 1835
    assert gaudi_kb.catalog.gpu("H100").sram_mb is None  # an optional field the shipped GPUs lack
    vocab = gaudi_kb.vocabulary
    assert vocab.enums["gpu_vendor"].values == ("nvidia", "amd", "huawei", "intel")
    assert [meta.module for _, meta in vocab.enums["gpu_arch"].extensions] == ["gaudi.vocabulary"]
    assert gaudi_kb.facts["gpu.vendor"].type.values[-1] == "intel"  # facts name the enum


def test_without_the_vocabulary_the_gaudi_is_refused():
    with pytest.raises(KbError) as info:
        load_catalog([ROOT / "kb" / "catalog", GAUDI / "catalog"])
    messages = [d.message for d in info.value.diagnostics]
    assert "GPU 'Gaudi3': vendor: Input should be 'nvidia', 'amd' or 'huawei' (got 'intel')" \
        in messages
    assert "GPU 'Gaudi3': unknown field 'sram_mb'" in messages


def test_gaudi_is_listed(capsys):
    from kbsolve.cli.main import main
    assert main(["list", "gpus", "--format", "json", "--kb", str(GAUDI)]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["Gaudi3"]["vendor"] == "intel" and rows["Gaudi3"]["link"] == "roce"
    assert rows["Gaudi3"]["sram_mb"] == 96 and "sram_mb" not in rows["H100-SXM"]


def test_gaudi_plans(gaudi_kb):
    plan = api.solve({"gpus": "8xGaudi3", "model": "qwen3-8b"}, gaudi_kb)
    assert plan.status in ("optimal", "feasible")
    assert plan.memory.fits and plan.memory.headroom == pytest.approx(0.10)


def test_gaudi_pack_tests_pass():
    results = api.run_kb_tests([str(GAUDI)], select="gaudi")
    assert results and all(r.passed for r in results), [r.failures for r in results]


def test_cached_kb_keeps_the_pack_vocabulary(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    pack = tmp_path / "pack"
    (pack / "catalog").mkdir(parents=True)
    for name in ("vocabulary.kb", "catalog/gpus.yaml"):
        (pack / name).write_text((GAUDI / name).read_text(encoding="utf-8"), encoding="utf-8")
    first = load_kb([pack])
    again = load_kb([pack])  # from the cache: the entries' classes are rebuilt from the vocabulary
    assert again.catalog.gpu("gaudi3") == first.catalog.gpu("gaudi3")
    assert again.vocabulary.enums["gpu_link"].values[-1] == "roce"
    assert pickle.loads(pickle.dumps(again.catalog)) == again.catalog
    # the vocabulary is part of the key: a changed declaration is not served stale
    text = (pack / "vocabulary.kb").read_text(encoding="utf-8")
    (pack / "vocabulary.kb").write_text(text.replace('["roce"]', '["roce", "ualink"]'),
                                        encoding="utf-8")
    assert load_kb([pack]).vocabulary.enums["gpu_link"].values[-2:] == ("roce", "ualink")


# ---- declarations to models ------------------------------------------------------

HEAD = "module t.vocab\n"


def vocabulary(text: str):
    sink = DiagnosticSink()
    found = build([parse_module(HEAD + text, "v.kb")], sink)
    return found, [(d.span.line, d.code, d.message) for d in sink.errors]


R = '{ because "b" source "kb:x" }\n'


def test_a_vocabulary_builds_models():
    vocab, errors = vocabulary(
        'enum kind ["a", "b"] ' + R +
        'field gpu.kind: kind ' + R +
        'field gpu.size: GiB { bound > 0 because "b" source "kb:x" }\n'
        'field gpu.extra: int = 2 { when gpu.kind == "a" because "b" source "kb:x" }\n'
        'field gpu.only_b: str { when gpu.kind != "a" because "b" source "kb:x" }\n'
        'field query.pct: int 0..99 = 10 ' + R)
    assert errors == []
    gpu = model_class("gpu", vocab)
    base = dict(name="x", source="s", kind="a", size=1.5)
    entry = gpu.model_validate(base)
    assert (entry.extra, entry.only_b) == (2, None)
    with pytest.raises(Exception, match="is missing required field 'only_b'"):
        gpu.model_validate({**base, "kind": "b"})
    with pytest.raises(Exception, match="field 'only_b' does not apply to kind 'a'"):
        gpu.model_validate({**base, "only_b": "y"})
    with pytest.raises(Exception, match="greater than 0"):
        gpu.model_validate({**base, "size": 0})
    assert query_facts({}, vocab) == {"pct": 10}
    with pytest.raises(Exception):
        query_facts({"pct": 100}, vocab)
    assert model_class("gpu", vocab) is gpu  # one class per signature
    assert pickle.loads(pickle.dumps(entry)) == entry


@pytest.mark.parametrize("text, expected", [
    ('extend enum gpu_vendr ["x"] ' + R,
     (2, "unknown-enum", "unknown enum 'gpu_vendr'")),
    ('enum v ["a", "a"] ' + R, (2, "duplicate", "enum value 'a' is listed twice")),
    ('enum v ["a"] ' + R + 'extend enum v ["a"] ' + R,
     (3, "duplicate", "enum 'v' already has the value 'a'")),
    ('enum memory_level ["x"] ' + R + 'extend enum memory_level ["y"] ' + R,
     (3, "domain", "enum 'memory_level' cannot be extended: the solver sums exactly these levels")),
    ('field gpus.x: int ' + R, (2, "unknown-fact", "unknown fact group 'gpus'; did you mean 'gpu'?")),
    ('field gpu.x: GiBs ' + R, (2, "unknown-enum", "unknown enum or unit 'GiBs'; did you mean 'GiB'?")),
    ('field gpu.x: int ' + R + 'field gpu.x: num ' + R,
     (3, "duplicate", "field 'gpu.x' is already defined")),
    ('field gpu.name: str ' + R,
     (2, "duplicate", "'name' is bookkeeping of every catalog entry, not a field")),
    ('field query.x: int ' + R, (2, "no-default", "query field 'query.x' needs a default")),
    ('field gpu.x: int = 0 { bound > 0 because "b" source "kb:x" }\n',
     (2, "default-domain", "default 0 is outside the bounds of field 'gpu.x'")),
    ('field gpu.x: bool = 1 ' + R,
     (2, "type", "default 1 does not fit field 'gpu.x', which is bool")),
    ('field gpu.x: str { bound > 0 because "b" source "kb:x" }\n',
     (2, "type", "'bound' needs a number field; field 'gpu.x' is str")),
    ('field gpu.x: int { when gpu.kind == "a" because "b" source "kb:x" }\n',
     (2, "unknown-fact", "'gpu.kind' is not a field declared before this one")),
    ('enum k ["a"] ' + R + 'field gpu.kind: k ' + R +
     'field gpu.x: int { when gpu.kind == "b" because "b" source "kb:x" }\n',
     (4, "enum-value", "'b' is not a value of gpu.kind")),
])
def test_bad_declarations(text, expected):
    _, errors = vocabulary(text)
    assert errors and errors[0][:2] == expected[:2] and errors[0][2].startswith(expected[2]), errors


def _pack_errors(tmp_path, monkeypatch, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KbError) as info:
        load_kb([Path(".")], use_cache=False)
    return [(d.span.file, d.span.line, d.code, d.message) for d in info.value.diagnostics]


def test_vocabulary_must_be_core_and_facts_must_match(tmp_path, monkeypatch):
    errors = _pack_errors(tmp_path, monkeypatch, {
        "a.kb": "module p.a for llamafactory\nfield gpu.x: int = 1 " + R,
        "b.kb": "module p.b\nfact gpu.fp32_tflops: GFLOPS\nfact model.text_encoders: str\n"
                "fact network.kind: gpu_arch\n",
    })
    assert errors == [
        ("a.kb", 2, "needs-core", "a field must be declared in a core module (no 'for')"),
        ("b.kb", 2, "fact-type", "fact gpu.fp32_tflops is declared in GFLOPS but the catalog "
                                 "attribute is in TFLOPS"),
        ("b.kb", 3, "unknown-attribute", "the model attribute 'text_encoders' is a list, which "
                                         "rules cannot read"),
        ("b.kb", 4, "fact-type", "fact network.kind is declared gpu_arch but the catalog "
                                 "attribute is network_kind"),
    ]


def test_a_framework_trains_declared_model_kinds(tmp_path, monkeypatch):
    errors = _pack_errors(tmp_path, monkeypatch, {"a.kb": (
        'module p.demo for demo\nframework demo {\n  models "lmm"\n'
        '  source "docs:https://example.org"\n}\n')})
    assert [e[2:] for e in errors] == [("enum-value", "'lmm' is not a model kind; did you mean "
                                                      "'llm'?")]


# ---- docs/dsl.md §5.18 -----------------------------------------------------------


def test_the_vocabulary_section_of_the_reference_checks(tmp_path):
    import re
    from kbsolve.catalog import check_paths
    text = (ROOT / "docs" / "dsl.md").read_text(encoding="utf-8")
    section = text[text.index("### 5.18"):text.index("### 5.19")]
    shipped = (ROOT / "kb" / "core" / "vocabulary.kb").read_text(encoding="utf-8")
    blocks = re.findall(r"```kb( shipped)?\n(.*?)```", section, re.S)
    assert len(blocks) >= 4
    for n, (is_shipped, body) in enumerate(blocks):
        if is_shipped:
            assert body.strip() in shipped, body
            continue
        pack = tmp_path / f"b{n}"
        pack.mkdir()
        (pack / "block.kb").write_text(body, encoding="utf-8")
        _, error = check_paths([pack])
        assert error is None, error.render()
