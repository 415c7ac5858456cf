"""The KB cache's stamps (dsl/cache.py KbCache.stamped): a load whose sources stat as they
did takes the cache key without reading them; any change to a source still rebuilds."""

from __future__ import annotations

import os
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from kbsolve.catalog import knowledge as load
from kbsolve.dsl import cache as kb_cache
from kbsolve.dsl.kb import KnowledgeBase

pytestmark = pytest.mark.empty_kb_cache  # counts builds from nothing

OLD_NS = 1_600_000_000 * 10**9  # 2020: an mtime no write in this test gives
RULE = 'module pack.extra for llamafactory\n\noption {name}: bool = true {{ source "seed:1" }}\n'


@pytest.fixture
def pack(_private_kb_cache, tmp_path, monkeypatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    folder = tmp_path / "pack"
    (folder / "sub").mkdir(parents=True)
    (folder / "extra.kb").write_text(RULE.format(name="flag_aa"))
    (folder / "sub" / "more.kb").write_text(RULE.format(name="more_1").replace("extra", "more"))
    for path in (folder / "extra.kb", folder / "sub" / "more.kb"):
        os.utime(path, ns=(OLD_NS, OLD_NS))
    return folder


@pytest.fixture
def settled(monkeypatch):
    """Every source counts as written long ago (their ctimes are this test's)."""
    monkeypatch.setattr(kb_cache, "RACY_NS", -3600 * 10**9)


@pytest.fixture
def reads(monkeypatch) -> dict:
    """How often load_kb read the sources' texts and built the KB; the build is a small KB
    that holds the texts it was built from (the checker has its own tests: here the key
    decides whether a build happens, and what it is given)."""
    counts = {"read": 0, "build": 0}
    real = load.rule_files

    def reading(*args, **kwargs):
        counts["read"] += 1
        return real(*args, **kwargs)

    def building(files, roots, sink):
        counts["build"] += 1
        empty = {f.name: {} if str(f.type).startswith("dict") else ()
                 for f in fields(KnowledgeBase)
                 if f.default is MISSING and f.default_factory is MISSING}
        return KnowledgeBase(**empty, files=tuple(files))
    monkeypatch.setattr(load, "rule_files", reading)
    monkeypatch.setattr(load, "_build", building)
    return counts


def _options(kb) -> set[str]:
    """The pack's options that the texts the KB was built from declare."""
    return {name for _, text in kb.files for name in
            ("flag_aa", "flag_bb", "flag_cc", "more_1", "new_1") if f"option {name}:" in text}


def test_unchanged_sources_are_not_read_again(pack, settled, reads):
    first = load.load_kb([pack])
    assert reads == {"read": 1, "build": 1}
    assert load.load_kb([pack]) is first
    assert reads == {"read": 1, "build": 1}  # the stamp gave the key
    assert _options(first) == {"flag_aa", "more_1"}


def _edit_same_size(pack):
    (pack / "extra.kb").write_text(RULE.format(name="flag_bb"))


def _edit_same_size_same_mtime_other_inode(pack):
    fresh = pack / "fresh.tmp"
    fresh.write_text(RULE.format(name="flag_cc"))
    os.utime(fresh, ns=(OLD_NS, OLD_NS))
    os.replace(fresh, pack / "extra.kb")


def _add(pack):
    (pack / "sub" / "deeper").mkdir()
    (pack / "sub" / "deeper" / "new.kb").write_text(RULE.format(name="new_1")
                                                     .replace("extra", "new"))


def _remove(pack):
    (pack / "sub" / "more.kb").unlink()


CHANGES = {
    "edit_in_place_same_size": (_edit_same_size, {"flag_bb", "more_1"}),
    "replace_same_size_same_mtime": (_edit_same_size_same_mtime_other_inode, {"flag_cc", "more_1"}),
    "add_in_a_new_subfolder": (_add, {"flag_aa", "more_1", "new_1"}),
    "remove": (_remove, {"flag_aa"}),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_source_always_rebuilds(pack, settled, reads, change):
    load.load_kb([pack])
    edit, expected = CHANGES[change]
    edit(pack)
    again = load.load_kb([pack])
    assert reads == {"read": 2, "build": 2}
    assert _options(again) == expected
    assert load.load_kb([pack]) is again and reads["read"] == 2  # stamped anew


def test_a_touched_source_is_read_and_hashed_not_rebuilt(pack, settled, reads):
    first = load.load_kb([pack])
    os.utime(pack / "extra.kb", ns=(OLD_NS + 10**9, OLD_NS + 10**9))
    assert load.load_kb([pack]) is first
    assert reads == {"read": 2, "build": 1}  # other stat: the texts decide, the same key
    assert load.load_kb([pack]) is first and reads["read"] == 2


def test_a_source_written_just_before_the_load_is_never_stamped(pack, reads):
    """A write within RACY_NS of a load may share the clock tick of the next write, which
    could then leave size, mtime and ctime as they were: such a source gives no stamp."""
    target = pack / "extra.kb"
    target.write_text(RULE.format(name="flag_aa"))
    before = target.stat()
    load.load_kb([pack])
    assert not list(load.KbCache().directory.glob("kb-sources-*"))
    target.write_text(RULE.format(name="flag_bb"))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = load.load_kb([pack])
    assert reads == {"read": 2, "build": 2}
    assert _options(again) == {"flag_bb", "more_1"}


def test_another_working_folder_or_pack_list_has_its_own_stamp(pack, settled, reads, tmp_path,
                                                               monkeypatch):
    """A pack's rule files are named relative to the working folder (dsl/load.py _display),
    which the key holds: another folder reads the texts again."""
    load.load_kb([pack])
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    load.load_kb([pack])
    assert reads["read"] == 2
    load.load_kb()
    assert reads["read"] == 3
    assert len(list(load.KbCache().directory.glob("kb-sources-*"))) == 3


@pytest.mark.parametrize("damage", [b"", b"kbsolve-kb-stamp-v1\ngarbage", b"other"])
def test_a_damaged_stamp_is_ignored(pack, settled, reads, damage):
    first = load.load_kb([pack])
    (stamp,) = load.KbCache().directory.glob("kb-sources-*")
    stamp.write_bytes(damage)
    assert load.load_kb([pack]) == first
    assert reads == {"read": 2, "build": 1}


def test_the_stamp_holds_the_front_end_code_and_the_grammar(pack):
    """The key covers the checker's code and the grammar (catalog/knowledge.py _code,
    _digest): their files' stats are part of what a stamp holds, so an edit of one reads
    the texts and hashes them again."""
    seen = load._sources_seen([pack])
    code = {entry[0] for entry in load._code_seen()}
    assert str(Path(load.__file__).resolve()) in code
    assert str(Path(load.__file__).resolve().parent.parent / "grammar.lark") in code
    assert set(seen[-len(code):]) == set(load._code_seen())
