"""The grammar and the parser: strict loading, the keyword trap, the shipped
files, and what the AST records (1-based spans, dotted names, units)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from lark import Lark

from kbsolve.diagnostics import KbError
from kbsolve.dsl import ast
from kbsolve.dsl.load import parsed_module, shipped_root
from kbsolve.dsl.parse import grammar_text, keywords, parse_module

SHIPPED = sorted(shipped_root().rglob("*.kb"))


def parse_error(text: str, file: str = "t.kb"):
    with pytest.raises(KbError) as info:
        parse_module(text, file)
    (diag,) = info.value.diagnostics
    return diag


# ---- the grammar itself ----------------------------------------------------------


def test_grammar_loads_in_strict_mode():
    """Strict mode rejects shift/reduce conflicts and colliding terminals."""
    pytest.importorskip("interegular")
    parser = Lark(grammar_text(), parser="lalr", lexer="basic", strict=True)
    assert parser.parse("module a.b for x\n")


def test_keywords_are_reserved_words_only():
    words = keywords()
    for word in ("module", "import", "rule", "require", "forbid", "then", "else", "if",
                 "match", "in", "not", "and", "or", "implies", "true", "false", "because"):
        assert word in words
    for word in ("stage", "bf16", "lora_rank", "GiB", "gpu", "llamafactory"):
        assert word not in words
    assert all(w.isidentifier() for w in words)


# ---- the keyword trap ------------------------------------------------------------


def test_keyword_trap_message_and_column():
    text = 'module m for llamafactory\nrule r: require a == then {\n  because "x"\n}\n'
    diag = parse_error(text)
    assert diag.message == "'then' is a keyword and cannot be used as a name here"
    assert diag.code == "keyword-as-name"
    col = text.splitlines()[1].index("then") + 1
    assert (diag.span.file, diag.span.line, diag.span.col) == ("t.kb", 2, col)
    assert diag.span.end_col == col + len("then")
    rendered = KbError(diag).render()
    assert rendered.startswith(f"t.kb:2:{col}: error: 'then' is a keyword")


@pytest.mark.parametrize("text, word", [
    ("module m for f\noption match: bool = true\n", "match"),
    ("module m for f\nlet if = 1\n", "if"),
    ("module m for f\ndef f(x, in) = x\n", "in"),
    ("module m for f\nwarn W: a and not or {}\n", "or"),
])
def test_keyword_trap_in_other_places(text, word):
    diag = parse_error(text)
    assert diag.message == f"'{word}' is a keyword and cannot be used as a name here"
    line = text.splitlines()[diag.span.line - 1]
    assert line[diag.span.col - 1:].startswith(word)


def test_backticks_make_a_keyword_a_declared_name():
    module = parse_module("module m for f\noption `then`: bool = true\n", "t.kb")
    (decl,) = module.decls
    assert decl.name == "then"


def test_syntax_error_lists_what_was_expected():
    diag = parse_error('module m for f\noption x: enum ["a" "b"] = "a"\n')
    assert diag.message == "unexpected string \"b\"; expected ',', ']'"
    assert (diag.span.line, diag.span.col) == (2, 21)


def test_single_quote_gets_a_hint():
    diag = parse_error("module m for f\nrule r: require stage == 'sft'\n")
    assert diag.message == "unexpected character \"'\""
    assert diag.hint == "strings use double quotes"
    assert (diag.span.line, diag.span.col) == (2, 26)


# ---- parser messages that were once wrong ----


def test_missing_colon_is_not_reported_as_keyword_misuse():
    diag = parse_error("module m for f\nrule r1 require bf16 {}\n")
    assert diag.code == "syntax"
    assert diag.message == "unexpected 'require'; expected ':'"


def test_keyword_help_in_an_expression_can_be_followed():
    text = "module m for f\nrule r: require a == then {}\n"
    diag = parse_error(text)
    assert "backticks" in diag.hint
    parse_module(text.replace("then", "`then`"), "t.kb")


def test_end_of_file_is_reported_at_the_end():
    text = "module m for f\nlet x ="
    diag = parse_error(text)
    assert diag.message.startswith("unexpected end of file")
    assert (diag.span.line, diag.span.col) == (2, 8)


# ---- the shipped files ---------------------------------------------------------


def test_there_are_shipped_files():
    names = {p.relative_to(shipped_root()).as_posix() for p in SHIPPED}
    assert {"core/facts.kb", "core/sizing.kb", "llamafactory/options.kb",
            "llamafactory/rules.kb"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(shipped_root()).as_posix())
def test_every_shipped_file_parses(path: Path):
    text = path.read_text(encoding="utf-8")
    name = f"kb/{path.relative_to(shipped_root()).as_posix()}"  # as the loader names it
    module = parsed_module(text, name)  # parse_module, once a process (the KB's load)
    assert module.file == name
    # core.facts declares nothing since facts are fields that say `fact` (the second
    # edition); it stays so that the modules and packs that import it keep working.
    assert module.decls or module.name == "core.facts", "a shipped file without declarations"
    lines = text.splitlines()
    for decl in module.decls:
        _check_span(decl.span, lines)
        _check_span(decl.name_span, lines)
        if decl.kind not in ("emit", "nokey"):
            # the name's span covers exactly the name as written (maybe in backticks)
            written = lines[decl.name_span.line - 1][decl.name_span.col - 1:
                                                     decl.name_span.end_col - 1]
            assert written.strip("`") == decl.name
        for clause in decl.clauses:
            _check_span(clause.span, lines)
            assert _within(clause.span, decl.span)


def _check_span(span, lines):
    assert span.line >= 1 and span.col >= 1
    assert span.end_line >= span.line
    assert span.line <= len(lines)


def _within(inner, outer) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and \
        (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


# ---- what the AST records ------------------------------------------------------

SAMPLE = """\
# a comment line
module pack.sample for llamafactory
import core.facts
import core.sizing

option `then`: int 1..4 = -1 {
  emit main "k" map { 1: omit, 2: "two" }
}
let mem: GiB = 40 GiB + 1_000 MiB  # trailing comment
fact gpu.memory_gib: GiB
rule R1: forbid gpu.memory_gib < 24 GiB and stage in ["pt", "sft"] {
  because "a \\"quoted\\" reason"
  source "seed:1"
}
warn W1: match stage { "sft" | "pt" => 1, else => 2 } > 1e3 { because "b" }
test t1 {
  given gpus = "8xA100"
  pin lora_rank = 16
  expect memory reserved 1 GiB .. 2 GiB
  expect no warning W1
  expect infeasible R1, R2
  expect mem > 1 GiB
}
"""


@pytest.fixture(scope="module")
def sample() -> ast.Module:
    return parse_module(SAMPLE, "sample.kb")


def test_module_header_and_imports(sample):
    assert sample.name == "pack.sample"
    assert sample.framework == "llamafactory"
    assert [name for name, _ in sample.imports] == ["core.facts", "core.sizing"]
    # spans are 1-based: the header is on line 2 (after a comment), column 1
    assert (sample.span.line, sample.span.col) == (2, 1)
    assert [(s.line, s.col) for _, s in sample.imports] == [(3, 1), (4, 1)]
    assert [d.kind for d in sample.decls] == ["option", "let", "fact", "rule", "warn", "test"]


def test_option_with_backticked_keyword_range_and_negative_default(sample):
    opt = sample.decls[0]
    assert opt.name == "then"
    assert (opt.span.line, opt.span.col) == (6, 1)
    assert (opt.name_span.line, opt.name_span.col, opt.name_span.end_col) == (6, 8, 14)
    assert (opt.type.kind, opt.type.low, opt.type.high) == ("int", 1, 4)
    assert opt.default == ast.Num(Fraction(-1), None, opt.default.span)
    (emit,) = opt.clauses
    target, key, mapping = emit.args
    assert (target, key) == ("main", "k")
    assert [(k.value, v if v is None else v.value) for k, v in mapping] == [(1, None), (2, "two")]


def test_units_and_number_literals(sample):
    let = sample.decls[1]
    assert let.unit == "GiB"
    left, right = let.expr.left, let.expr.right
    assert (left.value, left.unit) == (40, "GiB")
    assert (right.value, right.unit) == (1000, "MiB")  # underscores are digit separators
    assert (left.unit_span.line, left.unit_span.col) == (9, 19)
    fact = sample.decls[2]
    assert (fact.name, fact.target, fact.key) == ("gpu.memory_gib", "gpu", "memory_gib")
    assert (fact.type.kind, fact.type.unit) == ("unit", "GiB")
    warn = sample.decls[4]
    assert warn.expr.right.value == 1000  # 1e3


def test_dotted_names_and_sets(sample):
    rule = sample.decls[3]
    assert rule.rule_kind == "forbid"
    cond = rule.expr
    assert cond.op == "and"
    ref = cond.left.left
    assert isinstance(ref, ast.Ref) and ref.parts == ("gpu", "memory_gib")
    assert ref.dotted == "gpu.memory_gib"
    assert (ref.span.line, ref.span.col, ref.span.end_col) == (11, 17, 31)
    inset = cond.right
    assert isinstance(inset, ast.InSet) and not inset.negated
    assert [v.value for v in inset.values] == ["pt", "sft"]
    assert rule.clause("because").args == ('a "quoted" reason',)
    assert rule.clause("source").args == ("seed:1",)


def test_match_arms_and_default(sample):
    match = sample.decls[4].expr.left
    assert isinstance(match, ast.Match)
    assert [[v.value for v in arm.values] for arm in match.arms] == [["sft", "pt"]]
    assert match.default.value == 2


def test_test_clauses(sample):
    test = sample.decls[5]
    assert [c.kind for c in test.clauses] == ["t_given", "t_pin"] + ["t_expect"] * 4
    (given,) = test.clause("t_given").args
    assert (given.name, given.value.value) == ("gpus", "8xA100")
    kinds = [c.args[0] for c in test.clauses_of("t_expect")]
    assert [k.kind for k in kinds] == ["memory", "no_warning", "infeasible", "holds"]
    assert kinds[0].names == ("reserved",)
    assert (kinds[0].low.value, kinds[0].high.unit) == (1, "GiB")
    assert kinds[2].names == ("R1", "R2")
    assert isinstance(kinds[3].expr, ast.Binary)


def test_equal_programs_give_equal_ast_whatever_the_layout():
    """Spans are not part of equality, so layout and comments do not matter."""
    a = parse_module("module m for f\nlet x = 1 + 2 * y\n", "a.kb")
    b = parse_module("module   m   for f   # c\n\n\nlet x =\n  1 +\n  2 * y\n", "b.kb")
    assert a.decls[0].expr == b.decls[0].expr
    assert a.decls[0].expr.right.op == "*"  # precedence
    assert a.decls[0].expr.span != b.decls[0].expr.span


def test_positions_on_later_lines_count_from_one():
    text = "module m for f\n\n\n   let   x = zz\n"
    decl = parse_module(text, "t.kb").decls[0]
    assert (decl.span.line, decl.span.col) == (4, 4)
    assert (decl.name_span.line, decl.name_span.col) == (4, 10)
    assert (decl.expr.span.line, decl.expr.span.col) == (4, 14)
