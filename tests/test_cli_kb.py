"""`kbsolve kb check` and `kbsolve list`: exit codes, output, rule packs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from cli_helpers import run_kbsolve
from kbsolve.cli.main import main

LOCATED = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): error: ", re.M)
SUMMARY = re.compile(r"^kb check: ok — (\d+) frameworks, (\d+) options, (\d+) rules, "
                     r"(\d+) warnings, (\d+) checks, (\d+) tests, (\d+) GPUs, (\d+) models$")

GOOD_PACK = """\
module mypack.extra for llamafactory
import core.facts

option my_flag: bool = false {
  doc "An option added by a pack."
  source "seed:1"
}

rule MY_RULE: forbid my_flag and gpu.memory_gib < 16 GiB {
  because "a made-up rule for the test"
  source "seed:1"
}
"""

BROKEN_PACK = """\
module mypack.broken for llamafactory
import core.facts

rule MY_RULE: require stge == "sft" {
  because "a typo in an option name"
  source "seed:1"
}
"""


def run_cli(args: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    return run_kbsolve(args, cwd=cwd, env=dict(os.environ, **env))


@pytest.fixture
def good_pack(tmp_path) -> Path:
    pack = tmp_path / "good"
    pack.mkdir()
    (pack / "extra.kb").write_text(GOOD_PACK, encoding="utf-8")
    return pack


@pytest.fixture
def broken_pack(tmp_path) -> Path:
    pack = tmp_path / "broken"
    (pack / "sub").mkdir(parents=True)
    (pack / "sub" / "broken.kb").write_text(BROKEN_PACK, encoding="utf-8")
    return pack


def summary_numbers(text: str) -> list[int]:
    match = SUMMARY.match(text.strip())
    assert match, f"no summary line in {text!r}"
    return [int(n) for n in match.groups()]


# ---- in a subprocess (tests/cli_helpers.py: this interpreter, never PATH) ---------


@pytest.mark.ci  # a cold parse in a child (~3 s CPU); main() checks the same output below
def test_kb_check_exits_0_on_the_shipped_kb(tmp_path):
    proc = run_cli(["kb", "check"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    frameworks, options, rules, _w, checks, tests, gpus, models = summary_numbers(proc.stdout)
    assert frameworks >= 1 and options >= 10 and rules >= 5 and gpus >= 5 and models >= 3
    assert "error" not in proc.stderr


@pytest.mark.ci  # a cold parse with both packs in a child (~4 s); main() below by default
def test_broken_packs_exit_2_in_a_subprocess_from_the_flag_and_kbsolve_path(
        tmp_path, good_pack, broken_pack, capsys, monkeypatch):
    """One child reads a pack from --kb and one from KBSOLVE_PATH (the broken one: its
    error shows a fresh process reads the variable; the --kb pack's rule is then a
    duplicate of it, which shows the flag was read). Both are located relative to the
    working directory; nothing on stdout, no traceback, exit 2."""
    # the good pack's counts in this process (main() reads KBSOLVE_PATH as the child does)
    with monkeypatch.context() as patch:
        patch.chdir(tmp_path)
        capsys.readouterr()
        assert main(["kb", "check"]) == 0
        base = summary_numbers(capsys.readouterr().out)
        patch.setenv("KBSOLVE_PATH", str(good_pack))
        assert main(["kb", "check"]) == 0
        more = summary_numbers(capsys.readouterr().out)
    assert more[1] == base[1] + 1 and more[2] == base[2] + 1  # one option, one rule
    proc = run_cli(["kb", "check", "--kb", "good"], tmp_path, KBSOLVE_PATH=str(broken_pack))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    located = [(Path(m["file"]), int(m["line"]), int(m["col"]))
               for m in LOCATED.finditer(proc.stderr)]
    assert located == [(Path("broken/sub/broken.kb"), 4, 23), (Path("good/extra.kb"), 9, 6)]
    assert "unknown name 'stge'; did you mean 'stage'?" in proc.stderr
    assert '  rule MY_RULE: require stge == "sft" {' in proc.stderr
    assert "rule 'MY_RULE' is already defined" in proc.stderr


# ---- in process, through main() -------------------------------------------------


def test_main_kb_check_ok(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(["kb", "check"]) == 0
    out, err = capsys.readouterr()
    summary_numbers(out)
    assert err == ""


def test_main_kb_check_with_good_pack_flag(capsys, monkeypatch, tmp_path, good_pack):
    monkeypatch.chdir(tmp_path)
    assert main(["kb", "check"]) == 0
    base = summary_numbers(capsys.readouterr().out)
    assert main(["kb", "check", "--kb", str(good_pack)]) == 0
    assert summary_numbers(capsys.readouterr().out)[1] == base[1] + 1


def test_main_kb_check_broken_pack_reports_every_error(capsys, monkeypatch, tmp_path,
                                                      broken_pack):
    (broken_pack / "second.kb").write_text(
        "module mypack.second for llamafactory\n\noption lora_rank: bool = true\n",
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["kb", "check", "--kb", "broken"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    located = [(Path(m["file"]).as_posix(), int(m["line"]), int(m["col"]))
               for m in LOCATED.finditer(err)]
    assert located == [("broken/second.kb", 3, 8), ("broken/sub/broken.kb", 4, 23)]
    assert "option 'lora_rank' is already defined" in err
    assert "note: option 'lora_rank' first defined here" in err


def test_main_kbsolve_path_adds_a_pack(capsys, monkeypatch, tmp_path, good_pack):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBSOLVE_PATH", str(good_pack))
    assert main(["list", "options", "--framework", "llamafactory", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    mine = [r for r in rows if r["name"] == "my_flag"]
    assert len(mine) == 1 and mine[0]["default"] is False
    assert main(["list", "rules", "--format", "json"]) == 0
    assert "MY_RULE" in {r["id"] for r in json.loads(capsys.readouterr().out)}


def test_main_list_options_json(capsys):
    assert main(["list", "options", "--framework", "llamafactory", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert isinstance(rows, list) and rows and err == ""
    by_name = {r["name"]: r for r in rows}
    assert {"stage", "finetuning_type", "lora_rank", "deepspeed", "flash_attn"} <= set(by_name)
    assert all(r["framework"] == "llamafactory" for r in rows)
    assert by_name["stage"]["default"] == "sft"
    assert by_name["lora_rank"]["domain"] == [4, 8, 16, 32, 64, 128, 256]
    assert "main:stage" in by_name["stage"]["emit"]
    assert re.search(r"options\.kb:\d+:\d+$", by_name["stage"]["location"])


def test_main_list_gpus_table_and_json(capsys):
    assert main(["list", "gpus"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[0] == "name"
    assert set(table[1].replace(" ", "")) == {"-"}
    names = {line.split()[0] for line in table[2:]}
    assert {"A100-80G-SXM", "H100-SXM", "T4"} <= names
    assert main(["list", "gpus", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == names
    assert all(r["memory_gib"] > 0 for r in rows)


@pytest.mark.parametrize("what, key, expected", [
    ("models", "name", "qwen3-8b"), ("rules", "id", "P13"), ("checks", "id", "A_LORA")])
def test_main_list_other_tables(capsys, what, key, expected):
    assert main(["list", what, "--format", "json"]) == 0
    assert expected in {r[key] for r in json.loads(capsys.readouterr().out)}


def test_main_unknown_framework_exits_2_with_a_suggestion(capsys):
    assert main(["list", "options", "--framework", "llamafactroy"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "unknown framework 'llamafactroy'" in err
    assert "did you mean 'llamafactory'?" in err
    assert "Traceback" not in err


def test_main_nonexistent_kb_dir_exits_2(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(["kb", "check", "--kb", "no-such-dir"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "rule pack 'no-such-dir' does not exist" in err
    assert err.startswith("no-such-dir: error: ")


def test_main_kb_dir_that_is_a_file_exits_2(capsys, tmp_path):
    a_file = tmp_path / "file.kb"
    a_file.write_text(GOOD_PACK)
    assert main(["kb", "check", "--kb", str(a_file)]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_main_unknown_table_is_a_usage_error(capsys):
    assert main(["list", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
