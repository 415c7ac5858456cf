"""`silence "CODE" { because ... source ... }`: a rule pack hides a warning of
`kb check --deep` by its code, in its own files only; an error's code, or a code
that does not exist, is an error at the declaration."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbsolve import api
from kbsolve.diagnostics import KbError
from kbsolve.dsl.load import kb_roots, pack_of, shipped_root
from kbsolve.lint import static
from kbsolve.lint.deep import silence

UNUSED = """module {name}.lets for llamafactory
import core.facts

let {name}_spare: count = 3 {{
  because "kept for a rule that comes later"
  source "seed:002#A"
}}
"""

SILENCE = """module {name}.quiet for llamafactory

silence "{code}" {{
  because "this pack keeps lets for rules that come later"
  source "kb:docs/dsl.md"
}}
"""


def _pack(tmp_path: Path, name: str, code: str | None) -> Path:
    pack = tmp_path / name
    pack.mkdir()
    (pack / "lets.kb").write_text(UNUSED.format(name=name), encoding="utf-8")
    if code:
        (pack / "quiet.kb").write_text(SILENCE.format(name=name, code=code), encoding="utf-8")
    return pack


def _unused(found) -> list[str]:
    return sorted(d.message.split("'")[1] for d in found if d.code == "unused"
                  and d.message.split("'")[1].endswith("_spare"))


def test_a_pack_silences_its_own_warnings_only(tmp_path):
    quiet, loud = _pack(tmp_path, "quiet", "unused"), _pack(tmp_path, "loud", None)
    packs = [str(quiet), str(loud)]
    kb = api.load_kb(packs, use_cache=False)
    assert [s.code for s in kb.silences] == ["unused"]
    found = static.unused_lets(kb)
    assert _unused(found) == ["loud_spare", "quiet_spare"]
    kept, count = silence(kb, kb_roots(packs), found)
    assert _unused(kept) == ["loud_spare"]
    assert count == 1
    assert [d for d in found if "_spare" not in d.message] == \
        [d for d in kept if "_spare" not in d.message]  # the shipped KB's stay


def test_errors_are_never_silenced(tmp_path):
    """A silenced code hides warnings; a diagnostic of that code raised as an error
    (none today, but the filter must not rely on that) stays."""
    quiet = _pack(tmp_path, "quiet", "unused")
    kb = api.load_kb([str(quiet)], use_cache=False)
    found = static.unused_lets(kb)
    as_errors = [d.__class__(d.message, d.span, "error", d.code) for d in found]
    kept, count = silence(kb, kb_roots([str(quiet)]), as_errors)
    assert (len(kept), count) == (len(as_errors), 0)


@pytest.mark.parametrize("code, message", [
    ("unusd", "unknown diagnostic code 'unusd'; did you mean 'unused'?"),
    ("cycle", "'cycle' is an error; only warnings can be silenced"),
])
def test_a_bad_code_is_an_error_at_the_declaration(tmp_path, code, message):
    pack = _pack(tmp_path, "bad", code)
    with pytest.raises(KbError) as info:
        api.load_kb([str(pack)], use_cache=False)
    [d] = info.value.diagnostics
    assert d.message == message
    assert (Path(d.span.file).name, d.span.line, d.span.col) == ("quiet.kb", 3, 9)
    assert d.code == ("unknown-code" if code == "unusd" else "not-silenceable")


def test_a_silence_needs_a_reason(tmp_path):
    pack = tmp_path / "p"
    pack.mkdir()
    (pack / "q.kb").write_text('module p.q for llamafactory\n\nsilence "unused"\n',
                               encoding="utf-8")
    with pytest.raises(KbError) as info:
        api.load_kb([str(pack)], use_cache=False)
    assert sorted(d.code for d in info.value.diagnostics) == ["no-because", "no-source"]


def test_the_pack_of_a_file_as_spans_name_it(tmp_path, monkeypatch):
    inside = tmp_path / "work" / "mypack"
    inside.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    roots = [shipped_root(), inside, tmp_path / "elsewhere"]
    assert pack_of("kb/llamafactory/rules.kb", roots) == shipped_root()
    assert pack_of("mypack/a/b.kb", roots) == inside
    assert pack_of(str(tmp_path / "elsewhere" / "x.kb"), roots) == tmp_path / "elsewhere"
    assert pack_of(str(tmp_path / "nowhere" / "x.kb"), roots) is None


@pytest.mark.ci  # a whole KB build for a docs snippet (~6 s); CI's own step runs it
def test_the_reference_example_checks(tmp_path):
    """docs/dsl.md's `silence` example passes `kb check` as the page's snippets do."""
    import re
    text = (Path(__file__).resolve().parents[1] / "docs" / "dsl.md").read_text(encoding="utf-8")
    section = text[text.index("**Silencing a warning.**"):]
    body = re.search(r"```kb\n(.*?)```", section, re.S).group(1)
    assert body.startswith('silence "unused"')
    pack = tmp_path / "snippet"
    pack.mkdir()
    (pack / "block.kb").write_text("module mypack.snippet for llamafactory\nimport core.facts\n"
                                   "import core.sizing\n\n" + body, encoding="utf-8")
    kb = api.load_kb([str(pack)], use_cache=False)
    assert [(s.code, s.meta.because) for s in kb.silences] == \
        [("unused", "this pack keeps lets for the rules of its next version")]
