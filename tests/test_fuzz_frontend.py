"""Fuzzing the front end: whatever the input, only KbError may come out.

(a) Programs generated from `grammar.lark` itself (hypothesis.extra.lark), with
    token strategies that favour real names, so that most programs parse and
    reach the checker.
(b) Mutations of the shipped KB files: deleted, duplicated, swapped tokens and
    characters, truncation, inserted text and raw bytes (the raw bytes go
    through `load_kb` and a pack directory, to reach the non-UTF-8 path).

Every diagnostic must carry a location with line >= 1 and col >= 1 (the
file-level ones, such as a missing pack, are not produced by these inputs).

(c) Big inputs: 10 MB files through every reader, in a child process under a
    memory limit and a clock; files just under the 4 MiB cap (slow).

`KBSOLVE_FUZZ_EXAMPLES` sets the examples per test (default 60, so that CI
runs about 500 fuzz cases over this file and tests/test_fuzz_inputs.py); the
`slow` variants run 10,000 and are skipped unless `-m slow` or KBSOLVE_SLOW=1.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark

from cli_helpers import run_kbsolve
from kbsolve.diagnostics import DiagnosticSink, KbError
from kbsolve.catalog import load_kb
from kbsolve.dsl.check import check
from kbsolve.dsl.load import parsed_module, shipped_root
from kbsolve.dsl.parse import grammar_text, keywords, parse_module

EXAMPLES = int(os.environ.get("KBSOLVE_FUZZ_EXAMPLES", "40"))
SLOW_EXAMPLES = 10_000

FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
LONG = settings(FAST, max_examples=SLOW_EXAMPLES)

SHIPPED = sorted(shipped_root().rglob("*.kb"))
SHIPPED_TEXT = {p.relative_to(shipped_root()).as_posix(): p.read_text(encoding="utf-8")
                for p in SHIPPED}
# The modules a generated llamafactory program needs around it: the vocabulary
# and the facts, the shared formulas, the framework and its options (checking
# the whole KB per example would cost the CI run far more than it finds).
CONTEXT = ("core.vocabulary", "core.facts", "core.sizing", "llamafactory.framework",
           "llamafactory.options")


@lru_cache(maxsize=1)
def shipped_modules():
    """The shipped files' ASTs through the loader's per-process parse (dsl/load.py
    `parsed_module`, the same `parse_module` on the same text and name): the worker
    parsed them when it loaded the KB, so this parses nothing again (~2 s)."""
    return [parsed_module(text, f"kb/{name}") for name, text in SHIPPED_TEXT.items()]


@lru_cache(maxsize=1)
def context_modules():
    return [m for m in shipped_modules() if m.name.startswith(CONTEXT)]


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
    modules = (context_modules() + [module]) if with_shipped else [module]
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


@pytest.mark.ci  # ~3.5 s: the generator's own check; its programs still run by default
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


@pytest.mark.ci  # ~3.6 s; by default the same programs alone and mutated files over the KB
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


@settings(FAST, max_examples=max(EXAMPLES // 2, 10))
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


@pytest.mark.ci  # ~2.7 s; by default the bytes decoded in memory and a planted pack file
@settings(FAST, max_examples=max(EXAMPLES // 6, 10))  # each example checks the whole KB
@given(mutated_bytes())
def test_random_bytes_through_a_pack_dir_raise_only_kb_error(case):
    """Raw bytes in a pack file: load_kb must report (not crash on) bad UTF-8."""
    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pack" / Path(name).name
        path.parent.mkdir()
        # The pack file gets its own module name so that an intact header is not
        # just a duplicate module of the shipped one.
        data = re.sub(rb"module (\w+)\.", rb"module fuzz_\1.", data, count=1)
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


DECLS = {  # what the slow fuzz met (a let under a dotted header: KeyError) and its kin
    "let": 'let y: count = 2 {\n  because "b"\n  source "seed:x"\n}\n',
    "option": 'option z: int [1, 2] = 1 {\n  because "b"\n  source "seed:x"\n}\n',
    "framework": 'framework `a.b` {\n  because "b"\n  source "seed:x"\n}\n',
}


@pytest.mark.parametrize("framework", ["`memory.allocatedflow-factory`", "`llamafactory.x`",
                                       "`a.b`"])
@pytest.mark.parametrize("decl", sorted(DECLS))
def test_a_dotted_framework_name_is_a_located_error(framework, decl):
    """A framework's name is the first part of every key (framework.name): a dotted one
    in a header (or declared) was split at its dot and crashed the checker."""
    module = parse_module(f"module fuzz.m for {framework}\n{DECLS[decl]}", "fuzz.kb")
    sink = DiagnosticSink()
    check(context_modules() + [module], sink)
    with pytest.raises(KbError) as info:
        sink.raise_if_errors()
    assert_located(info.value)
    dotted = [d for d in info.value.diagnostics if d.code == "dotted-framework"]
    assert [(d.span.file, d.span.line, d.span.col) for d in dotted] == [("fuzz.kb", 1, 1)]


def test_a_declared_dotted_framework_is_a_located_error():
    module = parse_module(f"module fuzz.m for llamafactory\n{DECLS['framework']}", "fuzz.kb")
    sink = DiagnosticSink()
    check(context_modules() + [module], sink)
    (d,) = [d for d in sink.items if d.code == "dotted-framework"]
    assert (d.span.line, d.span.col) == (2, 11) and "'a.b'" in d.message


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


# ---- (c) big inputs ------------------------------------------------------------

TEN_MB = 10 * 1024 * 1024
CHILD_MEMORY = 2 * 1024 ** 3
CHILD_CPU_SECONDS = 60  # RLIMIT_CPU: counted on the child, not the wall
HANG_GUARD_S = 600  # wall, only against a hang


def _ten_mb(kind: str) -> bytes:
    if kind == "repeated_kb":
        one = "\n".join(SHIPPED_TEXT.values()).encode()
        return (one * (TEN_MB // len(one) + 1))[:TEN_MB]
    if kind == "random_bytes":
        return os.urandom(TEN_MB)
    if kind == "one_long_line":
        return b"bf16 and " * (TEN_MB // 9)
    return b"\xe9" * TEN_MB  # non-UTF-8, no NUL


BIG_KINDS = ["random_bytes", "one_long_line"]
AUDITED_CONFIG = b"""model_name_or_path: Qwen/Qwen3-8B
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
dataset: identity
template: qwen3
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
bf16: true
output_dir: saves/qwen3-8b/lora/sft
"""


@pytest.mark.parametrize("kind", BIG_KINDS)
def test_ten_megabyte_rule_file_is_refused_at_its_first_byte(tmp_path, kind):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "big.kb").write_bytes(_ten_mb(kind))
    with pytest.raises(KbError) as info:
        load_kb([pack], use_cache=False)
    (d,) = [d for d in info.value.diagnostics if d.span and d.span.file.endswith("big.kb")]
    assert d.code == "too-large" and (d.span.line, d.span.col) == (1, 1)


def _limit_child():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_SECONDS, CHILD_CPU_SECONDS))


def _children_cpu() -> float:
    import resource
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _kbsolve_limited(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_kbsolve(argv, cwd=cwd, timeout=HANG_GUARD_S, preexec_fn=_limit_child)


def _big_case(tmp_path: Path, kind: str) -> list[str]:
    """Lay out one 10 MB input; return the command that reads it."""
    if kind == "rule_file":
        (tmp_path / "pack").mkdir()
        (tmp_path / "pack" / "big.kb").write_bytes(_ten_mb("repeated_kb"))
        return ["kb", "check", "--kb", "pack"]
    if kind == "catalog_yaml":
        (tmp_path / "pack" / "catalog").mkdir(parents=True)
        (tmp_path / "pack" / "catalog" / "gpus.yaml").write_bytes(
            b"gpus:\n" + b"  - name: X\n" * (TEN_MB // 12))
        return ["kb", "check", "--kb", "pack"]
    if kind == "config_json":
        (tmp_path / "config.json").write_bytes(b'{"a": [' + b"1, " * (TEN_MB // 3) + b"1]}")
        return ["estimate", "--gpus", "8xA100", "--model", "config.json"]
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "train.yaml").write_bytes(AUDITED_CONFIG)
    (tmp_path / "project" / "big.yaml").write_bytes(b"stage: sft\n" * (TEN_MB // 11))
    return ["audit", "project", "--gpus", "8xA100", "--format", "json"]


# The two kb checks parse the shipped KB in the child (~2.5 s each): CI's step (.ci/run).
@pytest.mark.parametrize("kind", [pytest.param("rule_file", marks=pytest.mark.ci),
                                  pytest.param("catalog_yaml", marks=pytest.mark.ci),
                                  "config_json", "audit_yaml"])
def test_ten_megabyte_inputs_in_a_limited_child(tmp_path, kind):
    """2 GiB of address space and a minute of CPU: the command answers with its own error
    (or, for the audit, a report that says the file was skipped)."""
    argv = _big_case(tmp_path, kind)
    start = _children_cpu()  # the child's CPU, not wall: the same under any load
    done = _kbsolve_limited(argv, tmp_path)
    took = _children_cpu() - start
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert took < 30, f"{took:.1f} s"
    if kind == "audit_yaml":
        assert done.returncode in (0, 1), done.stderr
        assert "big.yaml" in done.stdout and "skipped" in done.stdout
    else:
        assert done.returncode == 2, done.stdout + done.stderr
        assert re.search(r":\d+:\d+: error: |: error: .*too large", done.stderr), done.stderr


def _and_chain(terms: int) -> str:
    return (HEADER + "rule R_CHAIN: require " + " and ".join(["bf16"] * terms)
            + ' {\n  because "a long chain"\n  source "seed:002#A"\n}\n')


def test_a_long_and_chain_is_checked_or_a_located_error():
    front_end(_and_chain(1000), with_shipped=True)


UNDER_CAP = int(3.9 * 1024 * 1024)
NEAR_CAP = {
    "deep_parentheses": HEADER + "rule R: require " + "(" * (UNDER_CAP - 200) + "\n",
    "long_string": HEADER + 'rule R: require bf16 {\n  because "' + "x" * (UNDER_CAP - 200)
                   + '"\n  source "seed:1"\n}\n',
    "long_comment": HEADER + "#" + "x" * (UNDER_CAP - 200) + "\n",
    "blank_lines": HEADER + "\n" * (UNDER_CAP - 200),
    "and_chain": _and_chain((UNDER_CAP - 200) // 9),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(NEAR_CAP))
def test_files_just_under_the_cap_in_a_limited_child(tmp_path, kind):
    if kind == "and_chain":
        pytest.xfail("the RecursionError above, reported without a location after ~80 s")
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "big.kb").write_text(NEAR_CAP[kind])
    done = _kbsolve_limited(["kb", "check", "--kb", "pack"], tmp_path)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert done.returncode in (0, 2)
    if done.returncode == 2:
        assert re.search(r"big\.kb:\d+:\d+: error: ", done.stderr), done.stderr[:500]
