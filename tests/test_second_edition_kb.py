"""The shipped KB in the language's second edition (issue 25, item 7): every fact is
its field (no `fact` declaration left, `kb fmt` migrated them), and torchrun's
multi-node parameters are one trait that plain PyTorch and torchtitan include."""

from __future__ import annotations

from pathlib import Path

from kbsolve.dsl.load import kb_roots, parsed_module, rule_files, shipped_root
from kbsolve.lint.deep import split_facts
from plans import shipped_kb


def test_the_shipped_kb_declares_each_fact_once():
    """Every shipped fact is its field (no `fact` declaration is left in kb/), and
    kb check --deep's split-fact warning finds nothing to join."""
    kb = shipped_kb()  # the run's one uncached load (tests/plans.py)
    spans = {p: f.meta.span for p, f in kb.facts.items()}
    assert len(spans) >= 66
    for path, span in spans.items():
        group, _, name = path.partition(".")
        assert kb.vocabulary.field(group, name).meta.span == span, path
    assert not split_facts(kb, kb_roots())
    files, _ = rule_files([shipped_root()])
    assert len(files) == len(list(shipped_root().rglob("*.kb")))
    for name, text in files:  # the loader's parse, done once a process (~2 s)
        module = parsed_module(text, name)
        assert not [d for d in module.decls if d.kind == "fact"], name


def test_shipped_torchrun_params_come_from_one_trait():
    kb = shipped_kb()  # the run's one uncached load (tests/plans.py)
    spans = {(e.framework, e.key): e.meta.span for e in kb.emits
             if e.key in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")}
    for framework in ("pytorch", "torchtitan"):
        for key in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"):
            span = spans[(framework, key)]
            assert span.file == "kb/core/traits.kb"
            assert span.via[0].file == f"kb/{framework}/framework.kb"
    for framework in ("llamafactory", "flow-factory", "diffusers"):
        assert spans[(framework, "NNODES")].file == \
            f"kb/{framework.replace('-', '')}/framework.kb"  # their launchers' own reasons


def test_the_reference_shows_the_shipped_trait():
    import re
    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "dsl.md").read_text(encoding="utf-8")
    section = text[text.index("### 5.21"):text.index("## 6. Expressions")]
    blocks = re.findall(r"```kb shipped\n(.*?)```", section, re.S)
    shipped = (root / "kb" / "core" / "traits.kb").read_text(encoding="utf-8")
    assert blocks and all(body.strip() in shipped for body in blocks)


def test_the_trait_keeps_run_sh_parameters_in_their_order():
    """run.sh's parameters follow the declarations' order: the include sits where the
    copies were, so the scripts are written as before."""
    kb = shipped_kb()  # the run's one uncached load (tests/plans.py)
    keys = {fw: [e.key for e in kb.emits if e.framework == fw and e.target == "params"]
            for fw in ("pytorch", "torchtitan")}
    assert keys["pytorch"] == ["NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
                               "NPROC_PER_NODE"]
    assert keys["torchtitan"] == ["NPROC_PER_NODE", "NNODES", "NODE_RANK", "MASTER_ADDR",
                                  "MASTER_PORT", "DATA_DIR", "AUTOENCODER", "DATA_VERSION"]
