"""Fuzzing the front end: whatever the input, only KbError may come out.

(a) Programs generated from `grammar.lark` itself (hypothesis.extra.lark), with
    token strategies that favour real names, so that most programs parse and
    reach the checker.
(b) Mutations of the shipped KB files: deleted, duplicated, swapped tokens and
    characters, truncation, inserted text and raw bytes (the raw bytes go
    through `load_kb` and a pack directory, to reach the non-UTF-8 path).

Every diagnostic must carry a location with line >= 1 and col >= 1 (the
file-level ones, such as a missing pack, are not produced by these inputs).

`KBSOLVE_FUZZ_EXAMPLES` sets the examples per test (default 150); the
`slow` variants run 10,000 and are skipped unless `-m slow` or KBSOLVE_SLOW=1.
"""

from __future__ import annotations

import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark

from kbsolve.diagnostics import DiagnosticSink, KbError
from kbsolve.dsl import load_kb
from kbsolve.dsl.check import check
from kbsolve.dsl.load import shipped_root
from kbsolve.dsl.parse import grammar_text, keywords, parse_module

EXAMPLES = int(os.environ.get("KBSOLVE_FUZZ_EXAMPLES", "150"))
SLOW_EXAMPLES = 10_000

FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
LONG = settings(FAST, max_examples=SLOW_EXAMPLES)

SHIPPED = sorted(shipped_root().rglob("*.kb"))
SHIPPED_TEXT = {p.name: p.read_text(encoding="utf-8") for p in SHIPPED}


@lru_cache(maxsize=1)
def shipped_modules():
    return [parse_module(text, f"kb/{name}") for name, text in SHIPPED_TEXT.items()]


# ---- the oracle ---------------------------------------------------------------


def assert_located(error: KbError) -> None:
    assert error.diagnostics, "KbError without diagnostics"
    for d in error.diagnostics:
        assert d.span is not None, f"diagnostic without a location: {d.message}"
        assert d.span.file, f"diagnostic without a file: {d.message}"
        assert d.span.line >= 1 and d.span.col >= 1, f"{d.span}: {d.message}"
        assert d.message.strip()
        assert re.match(r"^.+:\d+:\d+: (error|warning): ", d.headline()), d.headline()
    error.render()  # rendering must not fail either


def front_end(text: str, *, with_shipped: bool) -> None:
    """Parse and check `text`; anything but KbError propagates and fails the test."""
    try:
        module = parse_module(text, "fuzz.kb")
    except KbError as error:
        assert_located(error)
        return
    sink = DiagnosticSink()
    modules = (shipped_modules() + [module]) if with_shipped else [module]
    try:
        check(modules, sink)
        sink.raise_if_errors()
    except KbError as error:
        for d in error.diagnostics:  # errors in the shipped files carry their own names
            if d.span is not None and d.span.file == "fuzz.kb":
                assert d.span.line >= 1 and d.span.col >= 1, f"{d.span}: {d.message}"
        assert_located(error)


# ---- (a) programs from the grammar --------------------------------------------

KEYWORDS = keywords()
REAL_NAMES = ["stage", "finetuning_type", "lora_rank", "quantization_bit", "bf16", "fp16",
              "pure_bf16", "deepspeed", "flash_attn", "use_unsloth", "params", "world",
              "zero_stage", "sharded", "min", "max", "ceil", "divisible", "at_most_one",
              "llamafactory", "main", "A", "B", "P13", "x", "y", "GiB", "MiB", "B", "s",
              "count", "TFLOPS", "allocated", "reserved", "device", "gpu", "host", "P1"]
REAL_DOTTED = ["core.facts", "core.sizing", "gpu.memory_gib", "gpu.bf16", "gpu.arch",
               "model.layers", "model.kind", "query.num_gpus", "query.seq_len",
               "memory.allocated", "memory.reserved", "llamafactory.options", "a.b.c"]
REAL_STRINGS = ["sft", "lora", "fa2", "none", "z3", "seed:1", "paper:x", "kb:y", ">=0.9.5",
                "0.9.x", "8xA100", "qwen3-8b", "main", "stage", "", "ignore", "x y"]

_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
NAME = st.one_of(st.sampled_from(REAL_NAMES), _ident).filter(lambda s: s not in KEYWORDS)
DOTTED = st.one_of(st.sampled_from(REAL_DOTTED),
                   st.lists(_ident, min_size=2, max_size=3).map(".".join))
QNAME = st.one_of(st.sampled_from(REAL_NAMES + sorted(KEYWORDS)), _ident).map(
    lambda s: f"`{s}`")
STRING = st.one_of(st.sampled_from(REAL_STRINGS),
                   st.text(st.characters(blacklist_characters='"\\\n\r',
                                         blacklist_categories=("Cs",)), max_size=8),
                   st.sampled_from(["\\x", "\\u4e2d", "\\777", "\\N{BULLET}", "a\\\\b",
                                    "\\\"", "\\n\\t", "\\"]).map(lambda s: s + "z"),
                   ).map(lambda s: f'"{s}"')
NUMBER = st.one_of(st.sampled_from(["0", "1", "2", "3", "4", "8", "16", "0.5", "1_000",
                                    "2.5", "1e3", "100"]),
                   st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,2})?", fullmatch=True))
SEP = st.sampled_from([" ", " ", " ", "\n", "\n  "])


@lru_cache(maxsize=None)
def grammar_strategy(start: str):
    lark = Lark(grammar_text(), parser="lalr", lexer="basic", start=["start", "decl"])
    explicit = {"NAME": NAME, "DOTTED": DOTTED, "QNAME": QNAME, "STRING": STRING,
                "NUMBER": NUMBER, "COMMENT": st.just("# a comment\n"), "WS": SEP,
                "COMP_OP": st.sampled_from(["==", "!=", "<=", ">=", "<", ">"])}
    for term in lark.terminals:
        if term.pattern.type == "str" and term.name not in explicit:
            explicit[term.name] = st.just(term.pattern.value)
    _terms, rules, ignored = lark.grammar.compile([start], ())
    used = {sym.name for rule in rules for sym in rule.expansion if sym.is_term} | set(ignored)
    # Every token is followed by a separator, so keywords never glue to names.
    explicit = {name: st.tuples(s, SEP).map("".join) for name, s in explicit.items()
                if name in used}
    return from_lark(lark, start=start, explicit=explicit)


HEADER = "module fuzz.m for llamafactory\nimport core.facts\nimport core.sizing\n"


@st.composite
def programs(draw):
    """Whole generated modules, or a llamafactory header over 1-5 generated declarations
    (so that names resolve against the shipped options and the checker goes deep)."""
    if draw(st.booleans()):
        return draw(grammar_strategy("start"))
    decls = draw(st.lists(grammar_strategy("decl"), min_size=1, max_size=5))
    return HEADER + "\n".join(decls)


def test_generated_programs_are_mostly_parseable():
    """The generator itself must work: a good share of its programs must parse."""
    parsed = []

    @settings(FAST, max_examples=60)
    @given(programs())
    def probe(text):
        try:
            parse_module(text, "fuzz.kb")
            parsed.append(True)
        except KbError:
            parsed.append(False)

    probe()
    assert sum(parsed) >= len(parsed) // 2, f"only {sum(parsed)}/{len(parsed)} parsed"


@FAST
@given(programs())
def test_generated_programs_raise_only_kb_error(text):
    front_end(text, with_shipped=False)


@FAST
@given(programs())
def test_generated_programs_over_the_shipped_kb_raise_only_kb_error(text):
    front_end(text, with_shipped=True)


@pytest.mark.slow
@LONG
@given(programs())
def test_generated_programs_long(text):
    front_end(text, with_shipped=True)


# ---- (b) mutations of the shipped files ---------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|`[^`\n]+`|[A-Za-z_][A-Za-z0-9_.]*|[0-9][0-9_.]*'
                    r'|==|!=|<=|>=|=>|->|\.\.|\S')
INSERTS = st.one_of(
    st.sampled_from(["{", "}", "(", ")", "[", "]", '"', "'", "`", ",", ":", "=", "=>", "..",
                     "->", "|", "#", "\n", " ", "then", "else", "match", "module", "rule",
                     "option", "memory.allocated", "1 GiB", "0", "/ 0", "% 2", "\t", "\r",
                     "\x00", "\ufeff", "é", "中", "\u2028"]),
    st.sampled_from(["\\", "\\x", "\\u4e2d", "\\777", '\\"', "\\\\"]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
)


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(sorted(SHIPPED_TEXT)))
    text = SHIPPED_TEXT[name]
    for _ in range(draw(st.integers(1, 4))):
        text = draw(_mutation(text))
    return name, text


def _mutation(text: str):
    tokens = [m.span() for m in _TOKEN.finditer(text)] or [(0, 0)]
    n = len(text)

    @st.composite
    def one(draw):
        kind = draw(st.sampled_from(["del_tok", "dup_tok", "swap_tok", "del_char", "dup_char",
                                     "swap_char", "truncate", "insert", "replace_tok"]))
        if kind.endswith("_tok"):
            i = draw(st.integers(0, len(tokens) - 1))
            a, b = tokens[i]
            if kind == "del_tok":
                return text[:a] + text[b:]
            if kind == "dup_tok":
                return text[:b] + " " + text[a:b] + text[b:]
            if kind == "replace_tok":
                return text[:a] + draw(INSERTS) + text[b:]
            j = draw(st.integers(0, len(tokens) - 1))
            (a, b), (c, d) = sorted([tokens[i], tokens[j]])
            if c < b:
                return text
            return text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
        if n == 0:
            return draw(INSERTS)
        i = draw(st.integers(0, n - 1))
        if kind == "del_char":
            return text[:i] + text[i + 1:]
        if kind == "dup_char":
            return text[:i] + text[i] + text[i:]
        if kind == "swap_char":
            j = draw(st.integers(0, n - 1))
            i, j = sorted((i, j))
            return text[:i] + text[j] + text[i + 1:j] + text[i] + text[j + 1:] if i < j \
                else text
        if kind == "truncate":
            return text[:i]
        return text[:i] + draw(INSERTS) + text[i:]

    return one()


@FAST
@given(mutated())
def test_mutated_shipped_files_raise_only_kb_error(case):
    _name, text = case
    front_end(text, with_shipped=False)


@FAST
@given(mutated())
def test_mutated_file_over_the_rest_of_the_kb_raises_only_kb_error(case):
    """The mutated file replaces its original among the shipped modules."""
    name, text = case
    try:
        module = parse_module(text, "fuzz.kb")
    except KbError as error:
        assert_located(error)
        return
    others = [m for m, (n, _) in zip(shipped_modules(), SHIPPED_TEXT.items()) if n != name]
    sink = DiagnosticSink()
    try:
        check(others + [module], sink)
        sink.raise_if_errors()
    except KbError as error:
        assert_located(error)


_BYTES = st.one_of(st.binary(min_size=1, max_size=6),
                   st.sampled_from([b"\\x", b"\\u4e2d", b"\xe9", b"\xff\xfe", b"\xc3"]))


@st.composite
def mutated_bytes(draw):
    name = draw(st.sampled_from(sorted(SHIPPED_TEXT)))
    data = SHIPPED_TEXT[name].encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["insert", "overwrite", "truncate"]))
        if how == "truncate":
            data = data[:i]
        elif how == "insert":
            data = data[:i] + draw(_BYTES) + data[i:]
        else:
            chunk = draw(_BYTES)
            data = data[:i] + chunk + data[i + len(chunk):]
    return name, data


@FAST
@given(mutated_bytes())
def test_random_bytes_decoded_with_replacement_raise_only_kb_error(case):
    _name, data = case
    front_end(data.decode("utf-8", errors="replace"), with_shipped=False)


@settings(FAST, max_examples=max(EXAMPLES // 3, 10))
@given(mutated_bytes())
def test_random_bytes_through_a_pack_dir_raise_only_kb_error(case):
    """Raw bytes in a pack file: load_kb must report (not crash on) bad UTF-8."""
    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pack" / name
        path.parent.mkdir()
        # The pack file gets its own module name so that an intact header is not
        # just a duplicate module of the shipped one.
        data = data.replace(b"module llamafactory.", b"module fuzzpack.", 1) \
            .replace(b"module core.", b"module fuzzcore.", 1)
        path.write_bytes(data)
        try:
            load_kb([path.parent], use_cache=False)
        except KbError as error:
            assert_located(error)
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                assert any(d.code == "encoding" for d in error.diagnostics), error.render()


@pytest.mark.slow
@LONG
@given(mutated())
def test_mutated_shipped_files_long(case):
    front_end(case[1], with_shipped=True)


@pytest.mark.slow
@LONG
@given(mutated_bytes())
def test_random_bytes_long(case):
    front_end(case[1].decode("utf-8", errors="replace"), with_shipped=True)


# ---- targeted properties ------------------------------------------------------


def test_non_utf8_pack_file_is_reported_at_the_byte(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "bad.kb").write_bytes(b"module p.bad for llamafactory\n# caf\xe9\n")
    with pytest.raises(KbError) as info:
        load_kb([pack], use_cache=False)
    (d,) = info.value.diagnostics
    assert d.code == "encoding"
    assert (d.span.line, d.span.col) == (2, 6)
    assert "0xe9" in d.message


@pytest.mark.parametrize("escape", ["\\x", "\\x4", "\\u4e2d", "\\U0001F600",
                                    "\\N{BULLET}", "\\777"])
def test_string_escapes_never_crash(escape):
    text = f'module m for llamafactory\nnokey "k" {{\n  because "[{escape}]"\n}}\n'
    try:
        parse_module(text, "esc.kb")
    except KbError as error:
        assert_located(error)


def test_valid_escapes_are_decoded():
    text = 'module m for llamafactory\nnokey "k" {\n  because "a\\tb \\"q\\" \u00e9"\n}\n'
    decl = parse_module(text, "esc.kb").decls[0]
    assert decl.clause("because").args[0] == 'a\tb "q" \u00e9'
