"""--fix and fix --write keep every original: numbered backups (.bak, .bak.1, ...),
never an earlier backup overwritten; a file error is exit 2 with one line."""

from __future__ import annotations

import shutil

import pytest

from audit_helpers import PROJECTS, run_cli


@pytest.fixture()
def oom(tmp_path):
    target = tmp_path / "lf"
    shutil.copytree(PROJECTS / "lf_project", target)
    return target / "configs" / "oom.yaml"


def test_second_write_keeps_the_first_backup(oom, capsys):
    original = oom.read_text()
    code, out, _ = run_cli(capsys, "fix", str(oom), "--symptom", "oom", "--gpus", "1xH200",
                           "--write")
    assert code == 0 and "oom.yaml.bak;" in out
    once = oom.read_text()
    assert once != original
    oom.write_text(original)  # the user undoes it by hand, then fixes again
    code, out, _ = run_cli(capsys, "fix", str(oom), "--symptom", "oom", "--gpus", "1xH200",
                           "--write")
    assert code == 0 and "oom.yaml.bak.1;" in out
    assert (oom.parent / "oom.yaml.bak").read_text() == original
    assert (oom.parent / "oom.yaml.bak.1").read_text() == original
    (oom.parent / "oom.yaml.bak.1").unlink()
    oom.write_text("# edited by the user\n" + original)
    run_cli(capsys, "fix", str(oom), "--symptom", "oom", "--gpus", "1xH200", "--write")
    assert (oom.parent / "oom.yaml.bak").read_text() == original  # still the first one
    assert (oom.parent / "oom.yaml.bak.1").read_text().startswith("# edited by the user")


def test_a_backup_that_cannot_be_made_is_exit_2_in_one_line(oom, capsys):
    # a config name of 252 bytes is a valid file; its backup's name (256) is not
    long = oom.parent / ("x" * 247 + ".yaml")
    shutil.copy(oom, long)
    before = long.read_bytes()
    code, out, err = run_cli(capsys, "fix", str(long), "--symptom", "oom", "--gpus",
                             "1xH200", "--write")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "cannot write" in err and long.read_bytes() == before
    assert not list(oom.parent.glob(".*.tmp"))
