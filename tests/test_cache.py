"""The cache of checked knowledge bases (kbsolve.dsl.cache.KbCache, load_kb)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kbsolve.catalog import knowledge as load
from kbsolve.codecache import checksum, framed
from kbsolve.dsl.cache import _MAGIC as MAGIC
from kbsolve.dsl.cache import CACHE_ENV, KbCache, _unpacked, cache_dir
from kbsolve.dsl.kb import KnowledgeBase

pytestmark = pytest.mark.empty_kb_cache  # these tests count builds and entries from nothing


@pytest.fixture
def cache(_private_kb_cache, monkeypatch, tmp_path) -> Path:
    """The (empty) cache directory, with the working directory outside the repo:
    file names, and so the cache key, depend on the working directory."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return _private_kb_cache


@pytest.fixture
def builds(monkeypatch) -> list:
    """Counts how often load_kb really builds the KB (a cache miss)."""
    calls = []
    real = load._build

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(load, "_build", counting)
    return calls


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("kb-*.pickle"))


def valid(path: Path) -> KnowledgeBase:
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    head, _, payload = data[len(MAGIC):].partition(b"\n")
    assert checksum(payload) == head
    stream, buffers = _unpacked(memoryview(payload))
    value = pickle.loads(stream, buffers=buffers)
    assert isinstance(value, KnowledgeBase)
    return value


# ---- hits and misses -------------------------------------------------------------


def test_cache_dir_follows_the_environment(cache):
    assert cache_dir() == cache
    assert KbCache().directory == cache


def test_second_load_comes_from_the_cache_and_is_equal(cache, builds):
    first = load.load_kb()
    assert len(builds) == 1
    (entry,) = entries(cache)
    assert valid(entry) == first
    second = load.load_kb()
    assert len(builds) == 1, "the second load rebuilt the KB instead of using the cache"
    assert second == first
    assert second is first, "the same cache bytes are unpickled once per process"
    assert second.options.keys() == first.options.keys() and first.options
    assert second.catalog.gpus.keys() == first.catalog.gpus.keys()
    assert load.load_kb(use_cache=False) == first
    assert len(builds) == 2


def test_a_changed_entry_is_not_served_from_memory(cache, builds):
    """The process keeps what it unpickled by the entry's checksum: other bytes
    on disk (another process's rebuild) are read again, never the old object."""
    first = load.load_kb()
    (entry,) = entries(cache)
    assert load.load_kb() is first
    entry.write_bytes(entry.read_bytes()[:-1] + b"\x00")
    again = load.load_kb()
    assert len(builds) == 2, "a damaged entry must be rebuilt, not served from memory"
    assert again == first


def test_use_cache_false_neither_reads_nor_writes(cache, builds):
    load.load_kb(use_cache=False)
    assert entries(cache) == []
    load.load_kb(use_cache=False)
    assert len(builds) == 2


def test_changed_pack_is_not_served_stale(cache, tmp_path, builds):
    pack = tmp_path / "pack"
    pack.mkdir()
    rule_file = pack / "extra.kb"
    rule_file.write_text("module pack.extra for llamafactory\n\n"
                         "option my_flag: bool = true { source \"seed:1\" }\n")
    first = load.load_kb([pack])
    assert "llamafactory.my_flag" in first.options
    rule_file.write_text("module pack.extra for llamafactory\n\n"
                         "option my_other: bool = false { source \"seed:1\" }\n")
    second = load.load_kb([pack])
    assert len(builds) == 2
    assert "llamafactory.my_other" in second.options
    assert "llamafactory.my_flag" not in second.options
    assert len(entries(cache)) == 2  # one entry per set of sources
    assert load.load_kb([pack]) == second and len(builds) == 2


def test_kbcache_round_trip_and_missing_entries(tmp_path):
    store = KbCache(tmp_path / "c")
    assert store.get("0" * 64) is None
    store.put("ab" * 32, {"x": [1, 2]})
    assert store.get("ab" * 32) == {"x": [1, 2]}
    assert store.get("cd" * 32) is None
    assert [p.name for p in (tmp_path / "c").iterdir()] == [f"kb-{'ab' * 16}.pickle"]


# ---- damaged entries are detected and rebuilt ----------------------------------


def _flip(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


def _bad_pickle(data: bytes) -> bytes:
    payload = b"\x80\x05this is no pickle"
    return framed(MAGIC, payload)


DAMAGE = {
    "flip_payload_byte": _flip,
    "flip_magic": lambda d: b"X" + d[1:],
    "flip_checksum": lambda d: d[:len(MAGIC)] + (b"0" if d[len(MAGIC)] != 48 else b"1")
    + d[len(MAGIC) + 1:],
    "truncate_half": lambda d: d[:len(d) // 2],
    "truncate_to_magic": lambda d: d[:len(MAGIC)],
    "empty": lambda d: b"",
    "garbage": lambda d: os.urandom(4096),
    "valid_checksum_bad_pickle": _bad_pickle,
}


# Each damage costs a cold KB build (about 1.8 s of CPU); three kinds run by default
# (a checksum that fails, a file cut to nothing, a valid checksum over a bad pickle),
# all of them under -m slow.
_DEFAULT_DAMAGE = {"flip_checksum", "empty", "valid_checksum_bad_pickle"}


@pytest.mark.parametrize("how", [h if h in _DEFAULT_DAMAGE else
                                 pytest.param(h, marks=pytest.mark.slow)
                                 for h in sorted(DAMAGE)])
def test_damaged_entry_is_detected_and_rebuilt(cache, builds, how):
    good = load.load_kb()
    (entry,) = entries(cache)
    entry.write_bytes(DAMAGE[how](entry.read_bytes()))
    again = load.load_kb()
    assert len(builds) == 2, "the damaged entry was not rebuilt"
    assert again == good
    (entry,) = entries(cache)
    assert valid(entry) == good  # the rebuilt entry replaced the damaged one
    load.load_kb()
    assert len(builds) == 2


def test_damaged_entry_is_removed_by_get(tmp_path):
    store = KbCache(tmp_path)
    store.put("ef" * 32, [1])
    (path,) = entries(tmp_path)
    path.write_bytes(_flip(path.read_bytes()))
    assert store.get("ef" * 32) is None
    assert not path.exists()


# ---- concurrency -----------------------------------------------------------------

WORKER = textwrap.dedent("""
    import glob, os, sys
    from kbsolve.catalog import load_kb
    if sys.argv[1] == "clear":  # force a rebuild and a write racing with the other process
        for path in glob.glob(os.path.join(os.environ["KBSOLVE_CACHE_DIR"], "kb-*")):
            try:
                os.remove(path)
            except OSError:
                pass
    kb = load_kb()
    assert kb.options and kb.rules, "empty KB"
    print("ok", len(kb.options))
""")

SHELL_LOOP = "for mode in {modes}; do {python} -c \"$WORKER\" $mode || exit 1; done"


@pytest.mark.ci
def test_concurrent_processes_never_fail_and_leave_a_valid_cache(cache, tmp_path,
                                                                 _shipped_kb_cache_entries):
    env = dict(os.environ, WORKER=WORKER, **{CACHE_ENV: str(cache)})
    env.pop("KBSOLVE_PATH", None)
    loops = []
    # each loop's build races the other loop's read, and its read the other's build
    for modes in ("clear keep", "keep clear"):
        script = SHELL_LOOP.format(modes=modes, python=sys.executable)
        loops.append(subprocess.Popen(["bash", "-c", script], env=env, cwd=Path.cwd(),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    for proc in loops:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        assert out.count("ok ") == 2, out + err
        assert "Traceback" not in err
    (entry,) = entries(cache)
    # the KB this run built once for every test (conftest), else a build of our own
    seeds = _shipped_kb_cache_entries
    assert valid(entry) == (valid(seeds[0]) if seeds else load.load_kb(use_cache=False))
    assert not list(cache.glob(".kb-*.tmp")), "a temporary file was left behind"


# ---- a cache that cannot be written --------------------------------------------


def test_unwritable_cache_location_still_works(monkeypatch, tmp_path, builds):
    """The cache dir sits below a regular file, so it can be neither made nor written
    (this holds even for root, unlike a chmod)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    first = load.load_kb()
    second = load.load_kb()
    assert first == second and first.options
    assert len(builds) == 2  # nothing could be cached
    assert blocker.read_text() == "x"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root ignores directory permissions")
def test_read_only_cache_dir_still_works(cache, builds):
    cache.chmod(0o555)
    try:
        kb = load.load_kb()
        assert kb.options
        assert entries(cache) == []
        assert load.load_kb() == kb
    finally:
        cache.chmod(0o755)


def test_read_only_cache_dir_with_an_entry_serves_it(cache, builds):
    first = load.load_kb()
    cache.chmod(0o555)
    try:
        assert load.load_kb() == first
        assert len(builds) == 1
    finally:
        cache.chmod(0o755)
