"""`kb check` reads a framework's side YAML files (audit.yaml, file_kinds.yaml,
versions.yaml, accepted_keys.yaml) as the audit and --set will, so that a broken
entry is an error at its file:line:col now, not later at --set or never.

Each case directory of tests/golden/side_files holds the broken files of a small
framework (`_framework/`, copied beside them) and `expected.txt`, the exact
rendered output. KBSOLVE_REGOLD=1 rewrites the expected files; read each one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kbsolve import api
from kbsolve.cli.main import main
from kbsolve.diagnostics import KbError
from kbsolve.program.repo_files import audit_data

GOLDEN = Path(__file__).resolve().parent / "golden" / "side_files"
FRAMEWORK = GOLDEN / "_framework"
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and p != FRAMEWORK)
REGOLD = os.environ.get("KBSOLVE_REGOLD") == "1"


def _pack(case: str | None, into: Path) -> Path:
    pack = into / "pack"
    shutil.copytree(FRAMEWORK, pack)
    if case:
        for path in (GOLDEN / case).iterdir():
            if path.name != "expected.txt":
                shutil.copy(path, pack / path.name)
    return pack


@pytest.mark.parametrize("case", CASES)
def test_a_broken_side_file_is_an_error_at_its_place(case, tmp_path, monkeypatch):
    monkeypatch.chdir(_pack(case, tmp_path))
    kb = api.load_kb(["."], use_cache=False)  # the rule files themselves are fine
    with pytest.raises(KbError) as info:
        api.check_side_files(kb)
    actual = info.value.render().rstrip("\n") + "\n"
    expected_file = GOLDEN / case / "expected.txt"
    if REGOLD:
        expected_file.write_text(actual, encoding="utf-8")
    assert actual == expected_file.read_text(encoding="utf-8"), actual
    for d in info.value.diagnostics:
        assert d.span is not None and d.span.line >= 1 and d.span.col >= 1, d.headline()
        assert Path(d.span.file).name in {p.name for p in (GOLDEN / case).iterdir()}


def test_every_case_has_its_expected_output():
    assert len(CASES) >= 10
    for case in CASES:
        assert (GOLDEN / case / "expected.txt").is_file() or REGOLD, case


def test_side_files_of_the_shipped_kb_pass():
    kb = api.load_kb()
    api.check_side_files(kb)
    assert audit_data(kb, "llamafactory").repository_files  # read, not skipped


def test_a_well_formed_side_file_is_read(tmp_path, monkeypatch):
    pack = _pack(None, tmp_path)
    (pack / "audit.yaml").write_text(
        "framework: sidefw\nrepository_files:\n  - path: examples/ds_z3.json\n"
        "    options: {zero_stage: 3}\n    because: \"the example sets ZeRO-3\"\n"
        "    source: \"kb:tests\"\n", encoding="utf-8")
    monkeypatch.chdir(pack)
    kb = api.load_kb(["."], use_cache=False)
    api.check_side_files(kb)
    [entry] = audit_data(kb, "sidefw").repository_files
    assert (entry.path, entry.options) == ("examples/ds_z3.json", {"sidefw.zero_stage": 3})


def test_kb_check_exits_2_on_a_broken_side_file(tmp_path, capsys):
    pack = _pack("audit_option_misspelt", tmp_path)
    assert main(["kb", "check", "--kb", str(pack)]) == 2
    err = capsys.readouterr().err
    assert "audit.yaml:4:" in err and "did you mean 'zero_stage'?" in err
    assert "Traceback" not in err
