"""kb graph: neighbourhoods of options, rules and quantities in four formats."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kbsolve.cli.main import main


def run(capsys, *args) -> tuple[int, str]:
    code = main(["kb", "graph", *args])
    return code, capsys.readouterr().out


def test_option_text_pane_reads_like_menuconfig(capsys):
    code, out = run(capsys, "--option", "deepspeed", "-f", "llamafactory")
    assert code == 0
    assert out.startswith("option llamafactory.deepspeed: enum [")
    sections = [line.strip() for line in out.splitlines() if line.startswith("  ")
                and line.strip().endswith(":")]
    for needed in ("excluded by:", "affects memory term:", "touches options:"):
        assert needed in sections
    excluded = out.split("  excluded by:\n")[1].split("\n  required by")[0]
    assert "    rule:llamafactory.P13  (with pure_bf16)" in excluded.splitlines()


def test_a_let_between_rule_and_option_is_followed(capsys):
    """Memory terms read `zero_stage`, a let over deepspeed: they still count."""
    _, out = run(capsys, "--option", "deepspeed", "-f", "llamafactory", "--format", "json")
    data = json.loads(out)
    sections = data["sections"]["option:llamafactory.deepspeed"]
    assert "memory:llamafactory.zero_buffers" in sections["affects memory term"]


def test_rule_neighbourhood(capsys):
    code, out = run(capsys, "--rule", "P13", "--format", "json")
    data = json.loads(out)
    reads = data["sections"]["rule:llamafactory.P13"]["reads"]
    assert reads == ["option:llamafactory.deepspeed", "option:llamafactory.pure_bf16"]
    assert {"from": "rule:llamafactory.P13", "to": "option:llamafactory.pure_bf16",
            "label": "reads"} in data["edges"]


def test_quantity_neighbourhood(capsys):
    code, out = run(capsys, "--quantity", "zero_buffers", "-f", "llamafactory")
    assert code == 0 and "reads:" in out and "option:llamafactory.deepspeed" not in out.split(
        "reads:")[0]


def test_mermaid(capsys):
    code, out = run(capsys, "--option", "pure_bf16", "-f", "llamafactory", "--format", "mermaid")
    assert out.startswith("graph LR\n")
    assert "-->|excluded by|" in out


def test_unknown_name_suggests(capsys):
    assert main(["kb", "graph", "--option", "deepspeedx"]) == 2
    assert "did you mean 'deepspeed'" in capsys.readouterr().err


def test_exactly_one_subject(capsys):
    assert main(["kb", "graph"]) == 2


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz 'dot' is not installed (Debian package graphviz)")
def test_dot_output_renders_with_graphviz(capsys, tmp_path):
    code, out = run(capsys, "--option", "deepspeed", "--format", "dot")
    assert code == 0 and out.startswith("digraph kb {")
    done = subprocess.run(["dot", "-Tsvg"], input=out, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout and "llamafactory.deepspeed" in done.stdout
