"""A catalog file read again in one process (packs, golden cases, a watch loop) is not
parsed again when its text is the same: the entries are copies, a changed file is read
afresh and a file with a problem reports it every time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbsolve.catalog import load_catalog
from kbsolve.diagnostics import KbError

FIX = Path(__file__).resolve().parent / "fixtures" / "catalog"


def test_a_catalog_file_changed_between_two_builds_is_read_again(tmp_path):
    shutil.copyfile(FIX / "base" / "gpus.yaml", tmp_path / "gpus.yaml")
    assert load_catalog([tmp_path]).gpu("A100").memory_gib == 80
    text = (tmp_path / "gpus.yaml").read_text()
    (tmp_path / "gpus.yaml").write_text(text.replace("memory_gib: 80", "memory_gib: 81", 1))
    changed = load_catalog([tmp_path])
    assert changed.gpu("A100").memory_gib == 81
    assert changed.gpu("A100").field_span("memory_gib").line == 8


def test_entries_read_again_are_the_caller_s_own(tmp_path):
    shutil.copyfile(FIX / "base" / "gpus.yaml", tmp_path / "gpus.yaml")
    first = load_catalog([tmp_path]).gpu("A100")
    first.aliases.append("mine")
    first._field_spans.clear()
    again = load_catalog([tmp_path]).gpu("A100")
    assert again is not first and again.aliases == ["A100", "A100-80G"]
    assert again.field_span("memory_gib").line == 8 and again.span.line == 2


def test_an_override_reason_stays_with_its_build():
    layered = load_catalog([FIX / "base", FIX / "override_reason"])
    assert layered.overrides and all(o.reason for o in layered.overrides)
    again = load_catalog([FIX / "base", FIX / "override_reason"])
    assert [(o.name, o.reason) for o in again.overrides] == \
        [(o.name, o.reason) for o in layered.overrides]
    base = load_catalog([FIX / "base"])
    assert all(not e.override_reason for table in (base.gpus, base.models, base.networks)
               for e in table.values())


def test_a_file_with_a_problem_reports_it_every_time():
    for _ in range(2):
        with pytest.raises(KbError) as info:
            load_catalog([FIX / "unknown_field"])
        assert any("unknown field" in d.message for d in info.value.diagnostics)
