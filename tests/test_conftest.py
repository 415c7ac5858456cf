"""tests/conftest.py under pytest-xdist (the README's command) and in any folder: `slow`
and `ci` tests are skipped by their markers, never by keywords (a folder named `ci` or
`slow`, a clone's, is a keyword of every test below it), and `--cpu-durations` lists the
workers' tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CASES = '''
import pytest

pytestmark = pytest.mark.empty_kb_cache  # no KB needed


def test_plain():
    pass


@pytest.mark.ci
def test_ci():
    pass


@pytest.mark.slow
def test_slow():
    pass
'''


def test_a_folder_named_ci_or_slow_skips_only_the_marked_tests_and_workers_report_cpu(
        tmp_path):
    (tmp_path / "ci" / "slow").mkdir(parents=True)
    shutil.copyfile(TESTS / "conftest.py", tmp_path / "ci" / "conftest.py")
    (tmp_path / "ci" / "slow" / "test_cases.py").write_text(CASES, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "KBSOLVE_SLOW"}
    base = tmp_path / "base"  # one worker: its reports reach the controller as two would
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-n", "1", "--cpu-durations=0", f"--basetemp={base}", "ci"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in done.stdout, done.stdout
    assert "CPU time per test:" in done.stdout and " over 3 tests" in done.stdout, done.stdout
    assert "ci/slow/test_cases.py::test_plain" in done.stdout, done.stdout
    # every test there is `empty_kb_cache`: no worker made the shipped KB's entry
    assert list(base.glob("popen-gw*")) and not list(base.rglob("kbsolve-cache-seed*"))


def test_the_session_entry_holds_the_run_s_one_shipped_kb(_shipped_kb_cache_entries):
    import pickle

    from conftest import _shipped_build
    from kbsolve.dsl.cache import _unpacked, _unwrap
    from plans import shipped_kb
    entry, *stamps = _shipped_kb_cache_entries
    assert entry.suffix == ".pickle" and all(s.name.startswith("kb-sources-") for s in stamps)
    stream, buffers = _unpacked(_unwrap(entry.read_bytes())[1])
    assert pickle.loads(stream, buffers=buffers) == shipped_kb()
    # other roots (a pack's) go to the real build
    built = []
    build = _shipped_build(lambda *args: built.append(args) or "built", ["shipped"], "kb")
    assert build("files", ["shipped", "pack"], "sink") == "built"
    assert built == [("files", ["shipped", "pack"], "sink")]
    assert build("files", ["shipped"], "sink") == "kb"


def test_the_run_keeps_its_plans_in_one_folder_that_every_worker_reads():
    from plans import PLANS_DIR
    folder = Path(os.environ[PLANS_DIR])
    assert folder.is_dir() and folder.name.startswith("kbsolve-test-plans-")


def test_a_plan_solved_by_one_worker_is_read_by_the_others(tmp_path, monkeypatch):
    import json

    import plans
    from kbsolve import api
    key = json.dumps({"gpus": "1xA100", "model": "sd3.5-medium", "top": 0}, sort_keys=True)
    first = plans.shared_solve(tmp_path, key)  # the first worker to ask solves it
    assert first.status == "optimal" and len(list(tmp_path.glob("*.json"))) == 1

    def no_second_solve(*args, **kwargs):
        raise AssertionError("solved again")
    monkeypatch.setattr(api, "solve", no_second_solve)
    again = plans.shared_solve(tmp_path, key)  # another worker reads its JSON
    assert again == first and again is not first
    assert again.model_dump_json() == first.model_dump_json()


def test_a_test_file_rewritten_once_is_what_pytest_reads_in_a_worker(tmp_path, request):
    from _pytest.assertion import rewrite

    from conftest import _pytest_internals_as_known, read_rewritten_from, rewrite_into
    assert _pytest_internals_as_known()  # else each worker rewrites as pytest always does
    this = Path(__file__).resolve()
    (pyc,) = rewrite_into(tmp_path, [this], request.config)
    code = rewrite._read_pyc(this, pyc)  # pytest's own check of the file's hash
    assert code is not None and "@pytest_ar" in code.co_names  # its asserts rewritten
    elsewhere = tmp_path / "other" / "test_x.py"
    before = rewrite.get_cache_dir(elsewhere)
    undo = read_rewritten_from(str(tmp_path))
    try:
        assert rewrite.get_cache_dir(this) == tmp_path  # where a worker looks for it
        assert rewrite.get_cache_dir(elsewhere) == before  # other folders' files as before
    finally:
        undo()
    assert rewrite.get_cache_dir(this) != tmp_path


def test_each_test_s_kb_cache_is_a_fresh_directory_in_one_folder_of_the_run(
        _kb_cache_folders, _private_kb_cache):
    first, second = _kb_cache_folders(), _kb_cache_folders()
    assert first != second and first.parent == second.parent == _private_kb_cache.parent
    assert list(first.iterdir()) == list(second.iterdir()) == []
    assert os.environ["KBSOLVE_CACHE_DIR"] == str(_private_kb_cache)
    assert _private_kb_cache not in (first, second)


def test_a_test_s_kb_load_takes_the_key_from_the_seeded_stamp(monkeypatch):
    """Each test's cache holds the session entry and its stamp: the shipped KB loads from
    it without reading a rule file's text (the stamp gives the key) and without a build."""
    from kbsolve.catalog import knowledge
    from plans import shipped_kb

    def unexpected(*args, **kwargs):
        raise AssertionError("read or built instead of taking the stamped entry")
    for name in ("rule_files", "_build"):
        monkeypatch.setattr(knowledge, name, unexpected)
    assert list(Path(os.environ["KBSOLVE_CACHE_DIR"]).glob("kb-sources-*.marshal"))
    assert knowledge.load_kb() == shipped_kb()


def test_a_seeded_cache_is_passed_on_only_as_it_was_seeded(tmp_path):
    """The next test gets a seeded cache directory only where nothing changed it: a write
    of the same size at once (within the clock's tick), a new file, a chmod all show."""
    from conftest import SEEDED_NS, _as_seeded
    entry = tmp_path / "kb-entry.pickle"
    entry.write_bytes(b"seeded")
    os.utime(entry, ns=(SEEDED_NS, SEEDED_NS))
    state = _as_seeded(tmp_path)
    entry.read_bytes()
    assert _as_seeded(tmp_path) == state  # read only: passed on
    entry.write_bytes(b"damage")
    assert _as_seeded(tmp_path) != state
    os.utime(entry, ns=(SEEDED_NS, SEEDED_NS))
    state = _as_seeded(tmp_path)
    (tmp_path / "code-new").write_bytes(b"x")
    assert _as_seeded(tmp_path) != state
    (tmp_path / "code-new").unlink()
    state = _as_seeded(tmp_path)
    entry.chmod(0o400)
    assert _as_seeded(tmp_path) != state
    assert _as_seeded(tmp_path / "gone") is None
