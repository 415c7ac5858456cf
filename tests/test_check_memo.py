"""The checker's per-process memos (a pack laid over the shipped KB checks only what the
pack can change): a remembered resolution or Meta is reused only where every symbol it
looked up answers the same; otherwise it is made afresh, and errors are reported every time."""

from __future__ import annotations

from fractions import Fraction

from kbsolve.diagnostics import DiagnosticSink, Span
from kbsolve.dsl import ast, clauses, ir
from kbsolve.dsl.parse import parse_module
from kbsolve.dsl.resolve import Context, Resolver, Symbols
from kbsolve.dsl.types import BOOL, INT, Type


def _ref(name: str) -> ast.Ref:  # a fresh AST node: each test its own memo entries
    return ast.Ref((name,), Span("pack.kb", 3, 7))


def _symbols(options=None, lets=None, defs=None, let_types=None, reads=None, imports=None):
    let_types = let_types or {}
    return Symbols(options or {}, lets or {}, defs or {}, {}, {}, imports or {},
                   let_type=lambda key: (reads.append(("type", key)) if reads is not None
                                         else None) or let_types[key],
                   on_let_ref=lambda key: reads.append(("ref", key)) if reads is not None
                   else None)


def _resolve(node, symbols, ctx=None):
    sink = DiagnosticSink()
    result = Resolver(symbols, sink).expr(node, ctx or Context("pack.a", "fw"))
    return result, sink


def test_a_clean_resolution_is_reused_with_its_let_reads_made_again():
    node = ast.Binary("+", _ref("width"), ast.Num(Fraction(2), None, Span("pack.kb", 3, 9)),
                      Span("pack.kb", 3, 7))
    first_reads, second_reads = [], []
    lets = {"fw.width": (None, "pack.a")}
    first, sink = _resolve(node, _symbols(lets=lets, let_types={"fw.width": INT},
                                          reads=first_reads))
    second, again = _resolve(node, _symbols(lets=dict(lets), let_types={"fw.width": INT},
                                            reads=second_reads))
    assert second is first and not sink.items and not again.items
    assert first_reads == second_reads == [("ref", "fw.width"), ("type", "fw.width")]


def test_an_option_of_another_type_is_resolved_again():
    node = _ref("depth")
    first, _ = _resolve(node, _symbols(options={"fw.depth": (None, INT)}))
    second, _ = _resolve(node, _symbols(options={"fw.depth": (None, BOOL)}))
    assert (first.type, second.type) == (INT, BOOL)


def test_a_framework_let_laid_over_a_core_one_is_seen():
    node = _ref("params")
    core = {"core.params": (None, "core.sizing")}
    imports = {"pack.a": {"core.sizing"}}
    first, _ = _resolve(node, _symbols(lets=core, let_types={"core.params": INT},
                                       imports=imports))
    laid = dict(core, **{"fw.params": (None, "pack.a")})
    second, _ = _resolve(node, _symbols(lets=laid, imports=imports,
                                        let_types={"core.params": INT, "fw.params": INT}))
    assert (first.let, second.let) == ("core.params", "fw.params")
    third, sink = _resolve(node, _symbols(lets=core, let_types={"core.params": INT}))
    assert isinstance(third, ir.Const) and [d.code for d in sink.items] == ["not-imported"]


def test_a_let_of_another_type_is_resolved_again():
    node = _ref("bytes_each")
    lets = {"fw.bytes_each": (None, "pack.a")}
    first, _ = _resolve(node, _symbols(lets=lets, let_types={"fw.bytes_each": INT}))
    gib = Type("num", (1, 0, 0), True)
    second, _ = _resolve(node, _symbols(lets=lets, let_types={"fw.bytes_each": gib}))
    assert (first.type, second.type) == (INT, gib)


def test_another_def_of_the_same_name_is_inlined_afresh():
    module = parse_module("module pack.a for fw\n"
                          "def twice(n) = n * 2 { because \"x\" source \"seed:1\" }\n"
                          "def twice(n) = n * 3 { because \"x\" source \"seed:1\" }\n", "pack.kb")
    doubled, tripled = (d for d in module.decls if d.kind == "def")
    node = ast.Call("twice", (ast.Num(Fraction(5), None, Span("pack.kb", 4, 1)),),
                    Span("pack.kb", 4, 1))
    first, _ = _resolve(node, _symbols(defs={"fw.twice": (doubled, "pack.a", "fw")}))
    second, _ = _resolve(node, _symbols(defs={"fw.twice": (tripled, "pack.a", "fw")}))
    assert first.args[1].value == 2 and second.args[1].value == 3


def test_an_error_is_reported_by_every_resolution():
    node = _ref("no_such_name")
    for _ in range(2):
        result, sink = _resolve(node, _symbols(options={"fw.no_such_nam": (None, INT)}))
        assert isinstance(result, ir.Const)
        assert [d.code for d in sink.items] == ["unknown-name"]


def test_a_meta_is_reused_only_for_the_same_frameworks():
    module = parse_module('module pack.a for fw9\nlet w = 3 {\n  because "why"\n'
                          '  source "fw9:docs#cli"\n}\n', "pack.kb")
    (decl,) = module.decls
    for frameworks, codes in ((("fw9",), []), ((), ["source-kind"]), (("fw9",), [])) * 2:
        sink = DiagnosticSink()
        meta = clauses.meta_of(decl, "pack.a", sink, has_numbers=False, frameworks=frameworks)
        assert [d.code for d in sink.items] == codes
        assert (meta.because, meta.source) == ("why", "fw9:docs#cli")
