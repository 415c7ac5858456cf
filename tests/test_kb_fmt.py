"""kb fmt: canonical, idempotent, comment-preserving, and it never writes a broken file."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbsolve.cli.main import main
from kbsolve.diagnostics import KbError
from kbsolve.dsl.fmt import _tree_parser, format_text
from kbsolve.dsl.load import shipped_root
from kbsolve.dsl import parse as parse_mod
from kbsolve.dsl.parse import parse_module

SHIPPED = sorted(shipped_root().rglob("*.kb"))


def comments(text: str) -> list[str]:
    return [t.value.rstrip() for t in _tree_parser().lex(text, dont_ignore=True)
            if t.type == "COMMENT"]


def without_spans(module) -> tuple:
    """The AST with every location dropped (nodes already compare without spans;
    the imports are (name, span) pairs)."""
    return (module.name, module.framework, [name for name, _ in module.imports], module.decls)


_FORMATTED: dict[tuple[str, str], str] = {}


def formatted_once(text: str, name: str = "<text>") -> str:
    """format_text, computed once per (text, file) in this module: the shipped files'
    test and `kb fmt --check` over the shipped KB lay out the same texts (a pure
    function; each result was computed by format_text itself)."""
    key = (text, name)
    if key not in _FORMATTED:
        _FORMATTED[key] = format_text(text, name)
    return _FORMATTED[key]


_PARSED: dict[tuple[str, str], object] = {}


def parsed_once(text: str, name: str) -> object:
    """parse_module, computed once per (text, file) in this module: format_text parses
    its input again for its diagnostics, and `kb fmt` parses every file for its
    migrations (a pure function; the AST is frozen; errors are not kept)."""
    key = (text, name)
    if key not in _PARSED:
        _PARSED[key] = parse_module(text, name)
    return _PARSED[key]


def assert_properties(text: str, name: str = "x.kb", format_text=format_text) -> str:
    with mock.patch.object(parse_mod, "parse_module", parsed_once):
        formatted = format_text(text, name)
        assert without_spans(parsed_once(formatted, name)) == without_spans(parsed_once(text, name))
        assert format_text(formatted, name) == formatted
    assert comments(formatted) == comments(text)
    return formatted


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_files_keep_their_meaning_and_comments(path):
    assert_properties(path.read_text(encoding="utf-8"), str(path), formatted_once)


def test_layout_is_canonical():
    messy = ('# head\nmodule   t.x   for llamafactory\nimport core.facts\n'
             'rule R1 :forbid( a  and -b )>=c{because "x" source "seed:002#A"}  # trailing\n'
             'option o : int   1 .. 4=2 {\n emit main "o"   map {1:omit,2 : 3}\n\n\n'
             '  # inside\n}\n'
             'let m : B = match  z { "a"|"b" => 1 B ,\n else=>-2 B }\n')
    assert format_text(messy) == (
        '# head\nmodule t.x for llamafactory\nimport core.facts\n'
        'rule R1: forbid (a and -b) >= c { because "x" source "seed:002#A" }  # trailing\n'
        'option o: int 1..4 = 2 {\n  emit main "o" map { 1: omit, 2: 3 }\n\n'
        '  # inside\n}\n'
        'let m: B = match z {\n  "a" | "b" => 1 B,\n  else => -2 B\n}\n')


# ---- generated programs --------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "lora_rank", "gpu.memory_gib", "`from`", "x_1"])
ATOMS = st.one_of(NAMES, st.sampled_from(["1", "0.5", "2 GiB", "1_000", "true", '"s"', "3e2"]))


def expressions(depth: int = 3):
    if depth == 0:
        return ATOMS
    sub = expressions(depth - 1)
    return st.one_of(
        ATOMS,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "%", "==", "<=", "and", "or",
                                        "implies"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        sub.map(lambda e: f"-({e})"),
        sub.map(lambda e: f"(not {e})"),
        st.tuples(sub, sub, sub).map(lambda t: f"(if {t[0]} then {t[1]} else {t[2]})"),
        st.lists(sub, min_size=1, max_size=3).map(lambda a: f"max({', '.join(a)})"),
        st.tuples(sub, sub).map(lambda t: f'(match {t[0]} {{ "p" | "q" => {t[1]},\nelse => 0 }})'),
        st.tuples(sub).map(lambda t: f'({t[0]} in ["a", "b"])'),
    )


# Built once: a strategy built inside `programs` for each declaration was validated and
# had its recursion analysed anew on every draw (a quarter of this test's CPU).
EXPRESSIONS = expressions()

SEPARATORS = st.sampled_from([" ", "  ", "\n", "\n\n\n", "\t", " # note\n", "\n# own line\n"])


@st.composite
def programs(draw):
    decls = []
    for index in range(draw(st.integers(1, 6))):
        expr = draw(EXPRESSIONS)
        kind = draw(st.sampled_from(["let", "rule", "warn", "memory"]))
        header = {"let": f"let v{index}: B = ", "rule": f"rule R{index}: require ",
                  "warn": f"warn W{index}: ", "memory": f"memory m{index} = "}[kind]
        body = draw(st.sampled_from(["", ' { because "b" source "seed:002#A" }',
                                     ' {\n because "b"\n  source "seed:002#A"\n}']))
        decls.append(header + expr + body)
    return "module gen.x for llamafactory\nimport core.facts\n" + "\n".join(decls) + "\n"


def respaced(text: str, seps: list[str]) -> str:
    """The same tokens with other whitespace (and extra comments) between them."""
    tokens = [t for t in _tree_parser().lex(text, dont_ignore=True) if t.type != "WS"]
    out = []
    for index, tok in enumerate(tokens):
        out.append(tok.value)
        out.append("\n" if tok.type == "COMMENT" else seps[index % len(seps)])
    return "".join(out)


@pytest.mark.ci  # ~3.2 s; by default every shipped file, whole and respaced
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.lists(SEPARATORS, min_size=1, max_size=8))
def test_generated_programs(program, seps):
    assert_properties(program)
    assert_properties(respaced(program, seps))


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(SHIPPED), st.lists(SEPARATORS, min_size=1, max_size=6))
def test_shipped_files_respaced(path, seps):
    text = respaced(path.read_text(encoding="utf-8"), seps)
    assert_properties(text, str(path))


# ---- the command ---------------------------------------------------------------

def test_fmt_check_reports_and_writes_nothing(tmp_path, capsys):
    messy = tmp_path / "messy.kb"
    messy.write_text("module p.m for llamafactory\nlet   x: count = 1+2\n", encoding="utf-8")
    assert main(["kb", "fmt", "--check", str(tmp_path)]) == 1
    assert "would reformat" in capsys.readouterr().out
    assert messy.read_text(encoding="utf-8").startswith("module p.m for llamafactory\nlet   x")
    assert main(["kb", "fmt", str(tmp_path)]) == 0
    assert messy.read_text(encoding="utf-8") == \
        "module p.m for llamafactory\nlet x: count = 1 + 2\n"
    assert main(["kb", "fmt", "--check", str(tmp_path)]) == 0


def test_fmt_refuses_a_file_it_cannot_parse(tmp_path, capsys):
    good = tmp_path / "a.kb"
    bad = tmp_path / "b.kb"
    good.write_text("module p.a for llamafactory\nlet   x: count = 1\n", encoding="utf-8")
    bad.write_text("module p.b for llamafactory\nlet x: count = \n", encoding="utf-8")
    before = (good.read_text(encoding="utf-8"), bad.read_text(encoding="utf-8"))
    assert main(["kb", "fmt", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "b.kb:2:15" in err and "Traceback" not in err
    assert (good.read_text(encoding="utf-8"), bad.read_text(encoding="utf-8")) == before


def test_format_text_raises_kb_error_with_location():
    with pytest.raises(KbError) as info:
        format_text("module p.c\nlet = 1\n", "c.kb")
    assert info.value.diagnostics[0].span.line == 2


def test_fmt_on_a_missing_path_is_a_usage_error(tmp_path):
    assert main(["kb", "fmt", str(tmp_path / "nope")]) == 2


def test_shipped_files_are_reported_by_name(capsys, monkeypatch):
    from kbsolve.lint import fmtfiles
    monkeypatch.setattr(fmtfiles, "format_text", formatted_once)  # the texts laid out above
    monkeypatch.setattr(parse_mod, "parse_module", parsed_once)  # and parsed there
    code = main(["kb", "fmt", "--check"])
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split(" ", 2)[2] for line in lines if line.startswith("would reformat ")]
    assert code == (1 if listed else 0)
    assert all(path.endswith(".kb") for path in listed)
    assert lines[-1] == (f"kb fmt: {len(listed)} file(s) would reformat" if listed
                         else "kb fmt: every file is canonical")
