"""Text to syntax tree: the lark grammar, syntax errors, and the AST builder."""

from __future__ import annotations

import functools
from fractions import Fraction

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import (UnexpectedCharacters, UnexpectedEOF, UnexpectedInput,
                             UnexpectedToken, VisitError)

from kbsolve.diagnostics import DEEPEST, Diagnostic, KbError, Span, deep_recursion
from kbsolve.dsl import ast
from kbsolve.dsl.grammar import grammar_text

MAX_SOURCE_BYTES = 4 * 1024 * 1024


@functools.lru_cache(maxsize=1)
def parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer="basic", propagate_positions=True,
                maybe_placeholders=True)


@functools.lru_cache(maxsize=1)
def keywords() -> frozenset[str]:
    """Every reserved word of the language."""
    words = set()
    for term in parser().terminals:
        pattern = term.pattern
        if pattern.type == "str" and pattern.value.isidentifier():
            words.add(pattern.value)
    return frozenset(words)


def parse_module(text: str, file: str) -> ast.Module:
    """Parse one rule file; raise KbError with file:line:col on bad input."""
    if len(text) > MAX_SOURCE_BYTES:
        raise KbError(Diagnostic(
            f"rule file is too large ({len(text)} bytes; the limit is {MAX_SOURCE_BYTES})",
            Span(file, 1, 1), code="too-large"))
    try:
        tree = parser().parse(text)
    except UnexpectedInput as exc:
        raise KbError(_syntax_error(exc, text, file)) from None
    try:
        with deep_recursion():
            return _Builder(file).transform(tree)
    except RecursionError:
        raise KbError(Diagnostic(f"this file nests expressions more than about "
                                 f"{DEEPEST // 8} levels deep; split long chains into lets",
                                 Span(file, 1, 1), code="too-deep")) from None
    except VisitError as exc:
        inner = exc.orig_exc
        if isinstance(inner, KbError):
            raise inner from None
        raise KbError(Diagnostic(f"cannot read this construct: {inner}",
                                 _meta_span(file, getattr(exc.obj, "meta", None)),
                                 code="syntax")) from None


# ---- syntax errors ---------------------------------------------------------

_PUNCT = {
    "LBRACE": "{", "RBRACE": "}", "LSQB": "[", "RSQB": "]", "LPAR": "(", "RPAR": ")",
    "COLON": ":", "COMMA": ",", "DOT": ".", "EQUAL": "=", "MINUS": "-", "PLUS": "+",
    "STAR": "*", "SLASH": "/", "PERCENT": "%", "VBAR": "|", "COMP_OP": "a comparison",
    "NAME": "a name", "DOTTED": "a dotted name", "QNAME": "a `quoted name`", "STRING": "a string",
    "NUMBER": "a number", "$END": "end of file",
}


def _describe(term: str) -> str:
    if term in _PUNCT:
        return _PUNCT[term] if term in {"NAME", "DOTTED", "QNAME", "STRING", "NUMBER", "COMP_OP",
                                        "$END"} \
            else f"'{_PUNCT[term]}'"
    for t in parser().terminals:
        if t.name == term:
            return f"'{t.pattern.value}'" if t.pattern.type == "str" else term.lower()
    return term.lower()


def _expected_list(expected) -> str:
    """Names, values and punctuation first, then keywords; at most ten."""
    shown = {_describe(t) for t in expected if not t.startswith("__ANON")}
    names = sorted(shown, key=lambda s: (s.startswith("'") and s[1:-1].isidentifier(), s))
    if len(names) > 10:
        names = names[:10] + ["..."]
    return ", ".join(names)


def _really_expected(exc: UnexpectedInput) -> set[str]:
    """LALR default reductions widen `exc.expected`; ask the parser state instead."""
    interactive = getattr(exc, "interactive_parser", None)
    if interactive is not None:
        try:
            return set(interactive.accepts())
        except Exception:  # lark internals; fall back to the wide set
            pass
    return set(exc.expected or ())


def _end_span(text: str, file: str) -> Span:
    lines = text.split("\n")
    return Span(file, len(lines), len(lines[-1]) + 1)


def _syntax_error(exc: UnexpectedInput, text: str, file: str) -> Diagnostic:
    line, col = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
        hint = "strings use double quotes" if char == "'" else ""
        return Diagnostic(f"unexpected character {char!r}", Span(file, line, col, line, col + 1),
                          code="syntax", hint=hint)
    if isinstance(exc, UnexpectedEOF):
        return Diagnostic(f"unexpected end of file; expected {_expected_list(exc.expected)}",
                          _end_span(text, file), code="syntax")
    assert isinstance(exc, UnexpectedToken)
    token = exc.token
    expected = _really_expected(exc)
    width = max(len(str(token)), 1)
    span = Span(file, line, col, line, col + width)
    if token.type == "$END":
        return Diagnostic(f"unexpected end of file; expected {_expected_list(expected)}",
                          _end_span(text.rstrip(), file), code="syntax")
    if str(token) in keywords() and ("NAME" in expected or "QNAME" in expected):
        return Diagnostic(f"'{token}' is a keyword and cannot be used as a name here",
                          span, code="keyword-as-name",
                          hint=f"write `{token}` in backticks to use it as a name")
    return Diagnostic(f"unexpected {_show_token(token)}; expected {_expected_list(expected)}",
                      span, code="syntax")


def _show_token(token: Token) -> str:
    if token.type == "STRING":
        return f"string {token}"
    if token.type == "NUMBER":
        return f"number {token}"
    if token.type == "NAME":
        return f"name '{token}'"
    return f"'{token}'"


# ---- tree to AST -----------------------------------------------------------


def _meta_span(file: str, meta) -> Span:
    if meta is None or getattr(meta, "empty", True):
        return Span(file)
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(file: str, tok: Token) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column or tok.column + len(str(tok)))


_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def _unquote(tok: Token) -> str:
    """A string literal's text; \\" \\\\ \\n \\t are escapes, any other backslash stays."""
    body = str(tok)[1:-1]
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _number(tok: Token) -> Fraction:
    return Fraction(str(tok).replace("_", ""))


class _Name(str):
    """A name with the span it was written at."""

    span: Span

    def __new__(cls, value: str, span: Span):
        obj = super().__new__(cls, value)
        obj.span = span
        return obj


@v_args(meta=True)
class _Builder(Transformer):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _span(self, meta) -> Span:
        return _meta_span(self.file, meta)

    # -- names
    def name(self, meta, children):
        tok = children[0]
        text = str(tok)[1:-1] if tok.type == "QNAME" else str(tok)
        return _Name(text, _tok_span(self.file, tok))

    def dotted(self, meta, children):
        tok = children[0]
        if tok.type == "QNAME":
            return (_Name(str(tok)[1:-1], _tok_span(self.file, tok)),)
        return tuple(_Name(part, _tok_span(self.file, tok)) for part in str(tok).split("."))

    # -- module
    def start(self, meta, children):
        header = children[0]
        imports = tuple(c for c in children[1:] if isinstance(c, tuple))
        decls = tuple(c for c in children[1:] if isinstance(c, ast.Decl))
        name, framework, span = header
        return ast.Module(name, framework, imports, decls, self.file, span)

    def module_header(self, meta, children):
        parts, framework = children
        return (".".join(parts), str(framework) if framework is not None else None,
                self._span(meta))

    def import_stmt(self, meta, children):
        parts = children[0]
        return (".".join(parts), self._span(meta))

    # -- literals and expressions
    def number(self, meta, children):
        tok, unit = children
        return ast.Num(_number(tok), str(unit) if unit is not None else None, self._span(meta),
                       unit.span if unit is not None else None)

    def neg_literal(self, meta, children):
        tok, unit = children
        return ast.Num(-_number(tok), str(unit) if unit is not None else None, self._span(meta),
                       unit.span if unit is not None else None)

    def unit_suffix(self, meta, children):
        return children[0]

    def string(self, meta, children):
        return ast.Str(_unquote(children[0]), self._span(meta))

    def true(self, meta, children):
        return ast.Bool(True, self._span(meta))

    def false(self, meta, children):
        return ast.Bool(False, self._span(meta))

    def ref(self, meta, children):
        return ast.Ref(tuple(str(p) for p in children[0]), self._span(meta))

    def call(self, meta, children):
        name, args = children
        return ast.Call(str(name), tuple(args or ()), self._span(meta))

    def args(self, meta, children):
        return tuple(children)

    def _binary(op):  # noqa: N805 - a factory for the methods below
        def build(self, meta, children):
            return ast.Binary(op, children[0], children[-1], self._span(meta))
        return build

    add, sub, mul, div, mod = _binary("+"), _binary("-"), _binary("*"), _binary("/"), _binary("%")
    and_, or_, implies = _binary("and"), _binary("or"), _binary("implies")

    def compare(self, meta, children):
        left, op, right = children
        return ast.Binary(str(op), left, right, self._span(meta))

    def neg(self, meta, children):
        return ast.Unary("-", children[0], self._span(meta))

    def not_(self, meta, children):
        return ast.Unary("not", children[0], self._span(meta))

    def set_literal(self, meta, children):
        return tuple(children)

    def in_set(self, meta, children):
        return ast.InSet(children[0], children[1], False, self._span(meta))

    def not_in_set(self, meta, children):
        return ast.InSet(children[0], children[1], True, self._span(meta))

    def if_then_else(self, meta, children):
        return ast.IfElse(*children, self._span(meta))

    def match(self, meta, children):
        subject, (arms, default) = children
        return ast.Match(subject, arms, default, self._span(meta))

    def match_arms(self, meta, children):
        arms = tuple(c for c in children if isinstance(c, ast.MatchArm))
        rest = [c for c in children if not isinstance(c, ast.MatchArm)]
        return arms, (rest[0] if rest else None)

    def match_arm(self, meta, children):
        return ast.MatchArm(tuple(children[:-1]), children[-1], self._span(meta))

    # -- types
    def signed(self, meta, children):
        return _number(children[0])

    def neg_number(self, meta, children):
        return -_number(children[0])

    def unit(self, meta, children):
        return children[0]

    def type(self, meta, children):  # pragma: no cover - every alternative is aliased
        raise AssertionError

    def t_bool(self, meta, children):
        return ast.TypeExpr("bool", span=self._span(meta))

    def t_enum(self, meta, children):
        return ast.TypeExpr("enum", tuple(_unquote(c) for c in children), span=self._span(meta))

    def t_int_set(self, meta, children):
        return ast.TypeExpr("int", tuple(children), span=self._span(meta))

    def t_int_range(self, meta, children):
        return ast.TypeExpr("int", (), children[0], children[1], span=self._span(meta))

    def t_int(self, meta, children):
        return ast.TypeExpr("int", span=self._span(meta))

    def t_num_set(self, meta, children):
        return ast.TypeExpr("num", tuple(children), span=self._span(meta))

    def t_num(self, meta, children):
        return ast.TypeExpr("num", span=self._span(meta))

    def t_str(self, meta, children):
        return ast.TypeExpr("str", span=self._span(meta))

    def t_unit(self, meta, children):
        return ast.TypeExpr("unit", unit=str(children[0]), span=children[0].span)

    def t_list(self, meta, children):
        return ast.TypeExpr("list", (children[0],), span=self._span(meta))

    # -- clauses
    def body(self, meta, children):
        return tuple(children)

    def pin(self, meta, children):
        return ast.Pin(str(children[0]), children[1], self._span(meta))

    def map_entry(self, meta, children):
        key, value = children
        return (key, value)

    def omit(self, meta, children):
        return None

    def list_value(self, meta, children):
        return tuple(children)  # a map value written as a YAML list

    def emit_map(self, meta, children):
        return tuple(children)

    def names(self, meta, children):
        return tuple(children)

    def __default__(self, data, children, meta):
        if isinstance(data, str) and data.startswith("c_"):
            values = tuple(_clause_value(c) for c in children)
            return ast.Clause(data[2:], values, self._span(meta))
        if isinstance(data, str) and data.startswith("x_"):
            return self._expectation(data[2:], children, meta)
        return Tree(data, children, meta)

    def _expectation(self, kind, children, meta):
        span = self._span(meta)
        if kind == "infeasible":
            names = children[0] or ()
            return ast.Expectation(kind, tuple(str(c) for c in names), span=span)
        if kind in ("warning", "no_warning"):
            return ast.Expectation(kind, (str(children[0]),), span=span)
        if kind == "memory":
            level, low, high = children
            return ast.Expectation(kind, (str(level),) if level is not None else (),
                                   low=low, high=high, span=span)
        if kind == "holds":
            return ast.Expectation(kind, expr=children[0], span=span)
        return ast.Expectation(kind, span=span)

    def expectation(self, meta, children):  # pragma: no cover - aliased
        return children[0]

    # -- declarations
    def _decl(self, meta, kind, name, body, **fields):
        return ast.Decl(kind, str(name), self._span(meta), name.span, tuple(body or ()), **fields)

    def framework_decl(self, meta, c):
        return self._decl(meta, "framework", c[0], c[1])

    def option_decl(self, meta, c):
        return self._decl(meta, "option", c[0], c[3], type=c[1], default=c[2])

    def nokey_decl(self, meta, c):
        tok = c[0]
        return self._decl(meta, "nokey", _Name(_unquote(tok), _tok_span(self.file, tok)), c[1])

    def silence_decl(self, meta, c):
        tok = c[0]
        return self._decl(meta, "silence", _Name(_unquote(tok), _tok_span(self.file, tok)),
                          c[1])

    def fact_decl(self, meta, c):
        tok, type_, body = c
        prefix, _, field_ = str(tok).partition(".")
        name = _Name(str(tok), _tok_span(self.file, tok))
        return self._decl(meta, "fact", name, body, type=type_, target=prefix, key=field_)

    def field_decl(self, meta, c):
        tok, type_, default, body = c
        group, _, field_ = str(tok).partition(".")
        name = _Name(str(tok), _tok_span(self.file, tok))
        return self._decl(meta, "field", name, body, type=type_, default=default,
                          target=group, key=field_)

    def enum_values(self, meta, c):
        return ast.TypeExpr("enum", tuple(_unquote(t) for t in c), span=self._span(meta))

    def enum_decl(self, meta, c):
        name, values, body = c
        return self._decl(meta, "enum", name, body, type=values)

    def extend_decl(self, meta, c):
        name, values, body = c
        return self._decl(meta, "extend", name, body, type=values, target=str(name),
                          target_span=name.span)

    def let_decl(self, meta, c):
        name, unit, expr, body = c
        return self._decl(meta, "let", name, body, expr=expr,
                          unit=str(unit) if unit is not None else None)

    def def_decl(self, meta, c):
        name, params, expr, body = c
        return self._decl(meta, "def", name, body, expr=expr,
                          params=tuple(str(p) for p in (params or ())))

    def params(self, meta, c):
        return tuple(c)

    def rule_kind(self, meta, c):
        return str(c[0])

    def rule_decl(self, meta, c):
        name, kind, expr, body = c
        return self._decl(meta, "rule", name, body, expr=expr, rule_kind=kind)

    def warn_decl(self, meta, c):
        return self._decl(meta, "warn", c[0], c[2], expr=c[1])

    def optin_decl(self, meta, c):
        return self._decl(meta, "optin", c[0], c[2], expr=c[1])

    def prefer_decl(self, meta, c):
        return self._decl(meta, "prefer", c[0], c[2], expr=c[1])

    def memory_decl(self, meta, c):
        return self._decl(meta, "memory", c[0], c[2], expr=c[1])

    def speed_decl(self, meta, c):
        return self._decl(meta, "speed", c[0], c[2], expr=c[1])

    def work_decl(self, meta, c):
        return self._decl(meta, "work", c[0], c[2], expr=c[1])

    def emit_decl(self, meta, c):
        target, key, expr, body = c
        name = _Name(f"{target}:{_unquote(key)}", target.span)
        return self._decl(meta, "emit", name, body, expr=expr, target=str(target),
                          target_span=target.span, key=_unquote(key))

    def category_decl(self, meta, c):
        name, en, zh, body = c
        return self._decl(meta, "category", name, body, titles=(_unquote(en), _unquote(zh)))

    def check_decl(self, meta, c):
        name, category, en, zh, body = c
        return self._decl(meta, "check", name, body, target=str(category),
                          target_span=category.span, titles=(_unquote(en), _unquote(zh)))

    def role_kind(self, meta, c):
        return _Name(str(c[0]), _tok_span(self.file, c[0]))

    def role_entity(self, meta, c):
        kind, parts = c
        return (str(kind), ".".join(parts), Span(self.file, parts[0].span.line,
                                                 parts[0].span.col, parts[-1].span.end_line,
                                                 parts[-1].span.end_col))

    def role_values(self, meta, c):
        return ("values", "", tuple(c))

    def role_decl(self, meta, c):
        name, (kind, target, third), body = c
        if kind == "values":
            return self._decl(meta, "role", name, body, target="values", values=third)
        return self._decl(meta, "role", name, body, target=kind, key=target, target_span=third)

    def trait_decl(self, meta, c):
        name, *decls = c
        return self._decl(meta, "trait", name, (), decls=tuple(decls))

    def include_decl(self, meta, c):
        return self._decl(meta, "include", c[0], ())

    def detect_decl(self, meta, c):
        return self._decl(meta, "detect", c[0], c[1])

    def test_decl(self, meta, c):
        return self._decl(meta, "test", c[0], c[1])


def _clause_value(child):
    if isinstance(child, Token):
        if child.type == "STRING":
            return _unquote(child)
        if child.type == "NUMBER":
            return _number(child)
        return str(child)
    if isinstance(child, _Name):
        return child
    return child
