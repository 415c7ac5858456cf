"""`kbsolve skill`: a SKILL.md for coding agents, generated from the KB; `--emit`
writes it only over a SKILL.md of its own."""

from __future__ import annotations

import re

import pytest

from cli_helpers import run_kbsolve
from kbsolve.cli.main import main

MARK = "<!-- written by `kbsolve skill`"
ERROR_LINE = re.compile(r"(^|: )error: ")


def front_matter(text: str) -> dict[str, str]:
    assert text.startswith("---\n"), text[:80]
    block = text.split("---\n", 2)[1]
    return dict(line.split(": ", 1) for line in block.splitlines())


def test_skill_prints_a_skill_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["skill"]) == 0
    text = capsys.readouterr().out
    meta = front_matter(text)
    assert meta["name"] == "kbsolve"
    assert 0 < len(meta["description"]) <= 1024  # the Agent Skills limit
    assert "llamafactory" in meta["description"] and MARK in text
    for tool in ("plan", "estimate", "check_config", "audit", "fix", "explain", "list"):
        assert f"`{tool}`" in text
    assert list(tmp_path.iterdir()) == []


def test_emit_writes_its_own_file_and_refuses_any_other(capsys, tmp_path):
    target = tmp_path / "skills" / "kbsolve"
    assert main(["skill", "--emit", str(target)]) == 0
    written = (target / "SKILL.md").read_text()
    assert MARK in written and str(target / "SKILL.md") in capsys.readouterr().err
    (target / "SKILL.md").write_text(written + "\nstale line\n")
    assert main(["skill", "--emit", str(target)]) == 0  # its own file: regenerated
    assert (target / "SKILL.md").read_text() == written
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "SKILL.md").write_text("---\nname: my-skill\n---\nmy own words\n")
    capsys.readouterr()
    assert main(["skill", "--emit", str(mine)]) == 2
    err = capsys.readouterr().err
    headlines = [line for line in err.splitlines() if ERROR_LINE.search(line)]
    assert len(headlines) == 1 and "was not written by `kbsolve skill`" in headlines[0]
    assert (mine / "SKILL.md").read_text() == "---\nname: my-skill\n---\nmy own words\n"
    assert sorted(p.name for p in mine.iterdir()) == ["SKILL.md"]  # no temporary left


def signs_by_framework(text: str) -> dict[str, dict[str, list[str]]]:
    """The 'When to use it' list: framework -> sign words -> the signs."""
    section = text.split("## When to use it", 1)[1].split("\n## ", 1)[0]
    found: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in section.splitlines():
        top = re.match(r"- \*\*(.+?)\*\*", line)
        if top:
            current = found.setdefault(top.group(1), {})
        elif line.startswith("  - ") and current is not None and ": `" in line:
            words, signs = line[4:].split(": ", 1)
            current[words] = re.findall(r"`([^`]+)`", signs)
    return found


def detect_pack(root) -> str:
    pack = root / "pack"
    pack.mkdir()
    (pack / "detect.kb").write_text(
        "module skillpack.detect for torchtitan\nimport core.facts\n\n"
        "detect torchtitan {\n  import \"torchtitan\"\n  cli \"my-titan-train\"\n"
        "  source \"docs:https://github.com/pytorch/torchtitan (a test pack)\"\n}\n")
    return str(pack)


@pytest.mark.slow
def test_skill_states_every_detection_sign_of_the_kb(tmp_path):
    """The skill a child process writes, read back against the KB's detect blocks
    (the shipped KB and a pack that adds signs): every sign, under its framework,
    and no other."""
    from kbsolve import api
    from kbsolve.render.skill_markdown import SIGN_WORDS
    pack = detect_pack(tmp_path)
    for packs in ([], [pack]):
        folder = tmp_path / f"skill{len(packs)}"
        flags = [arg for p in packs for arg in ("--kb", p)]
        done = run_kbsolve(["skill", "--emit", str(folder), *flags])
        assert done.returncode == 0, done.stderr
        stated = signs_by_framework((folder / "SKILL.md").read_text())
        kb = api.load_kb(packs)
        assert set(stated) == set(kb.frameworks)
        expected = {name: {} for name in kb.frameworks}
        for detector in kb.detectors.values():
            signs = expected[detector.framework]
            for kind, values in (("import", detector.imports), ("cli", detector.clis),
                                 ("yaml_key", [k if v is None else f"{k}: {v}"
                                               for k, v in detector.yaml_keys]),
                                 ("dependency", detector.dependencies),
                                 ("path", detector.paths), ("remote", detector.remotes)):
                if values:
                    signs.setdefault(SIGN_WORDS[kind], []).extend(values)
        assert stated == expected
    assert stated["torchtitan"]["Python imports"] == ["torchtitan"]  # the pack's
