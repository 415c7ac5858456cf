"""Canonical layout of a rule file, from its tokens and parse tree.

Whitespace between tokens is canonical; names, numbers and strings are kept
as written. Three layout choices follow the input, so that formatting is
idempotent without wrapping long lines: a `{ ... }` body, `match` or `map`
stays on one line when it was on one line, else it puts one clause, arm or
entry per line. Blank lines between lines are kept (at most one). Comments
stay where they were: on their own line, or at the end of a line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from lark import Lark, Token, Tree

from kbsolve.dsl.grammar import grammar_text

INDENT = "  "
CONTINUATION = 2  # extra levels for a line that continues an expression

_VALUE_END = {"NUMBER", "NAME", "DOTTED", "QNAME", "STRING", "RPAR", "RSQB", "RBRACE",
              "TRUE", "FALSE"}
_NO_SPACE_BEFORE = {")", "]", ",", ":"}
_NO_SPACE_AFTER = {"(", "["}


@functools.lru_cache(maxsize=1)
def _tree_parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer="basic", propagate_positions=True,
                maybe_placeholders=True, keep_all_tokens=True)


@dataclass
class _Layout:
    breaks: dict[int, int]  # token start_pos -> indent level of the line it starts
    tight: set[int]  # start_pos of `..` tokens written without spaces
    closers: set[int]  # start_pos of `}` that close a broken block


def format_text(text: str, file: str = "<text>") -> str:
    """The canonical form of one rule file; KbError when it does not parse."""
    from kbsolve.dsl.parse import parse_module
    parse_module(text, file)  # the real parser's diagnostics, with file:line:col
    tree = _tree_parser().parse(text)
    comments = [t for t in _tree_parser().lex(text, dont_ignore=True) if t.type == "COMMENT"]
    leaves = [t for t in tree.scan_values(lambda v: isinstance(v, Token))]
    layout = _Layout({}, set(), set())
    _mark(tree, 0, layout)
    tokens = sorted(leaves + comments, key=lambda t: t.start_pos)
    return _emit(tokens, layout)


def _first(tree: Tree) -> int:
    return tree.meta.start_pos


def _mark(tree: Tree, level: int, layout: _Layout) -> None:
    data = tree.data
    children = [c for c in tree.children if c is not None]
    if data == "start":
        for child in children:
            layout.breaks[_start(child)] = 0
            _mark_child(child, 0, layout)
        return
    if data == "t_int_range":
        layout.tight.update(c.start_pos for c in children if isinstance(c, Token) and c == "..")
    if data in ("body", "match", "emit_map") and _spans_lines(children):
        _mark_block(data, children, level, layout)
        return
    if data == "trait_decl":  # always one declaration per line, one level in
        _mark_trait(children, level, layout)
        return
    for child in children:
        _mark_child(child, level, layout)


def _mark_child(child, level: int, layout: _Layout) -> None:
    if isinstance(child, Tree):
        _mark(child, level, layout)


def _start(node) -> int:
    return node.start_pos if isinstance(node, Token) else _first(node)


def _spans_lines(children: list) -> bool:
    braces = [c for c in children if isinstance(c, Token) and c in ("{", "}")]
    return len(braces) == 2 and braces[0].line != braces[1].line


def _mark_block(data: str, children: list, level: int, layout: _Layout) -> None:
    """One clause, match arm or map entry per line, one level in."""
    inner = level + 1
    close = [c for c in children if isinstance(c, Token) and c == "}"][-1]
    for child in children:
        if isinstance(child, Token):
            continue
        if data == "match" and child.data == "match_arms":
            _mark_arms(child, inner, layout)
        elif data == "match":
            _mark(child, level, layout)  # the subject stays on the opening line
        else:
            layout.breaks[_first(child)] = inner
            _mark(child, inner, layout)
    layout.breaks[close.start_pos] = level
    layout.closers.add(close.start_pos)


def _mark_trait(children: list, level: int, layout: _Layout) -> None:
    opened = False
    for child in children:
        if isinstance(child, Token):
            if child == "{":
                opened = True
            elif child == "}":
                layout.breaks[child.start_pos] = level
                layout.closers.add(child.start_pos)
            continue
        if opened:
            layout.breaks[_first(child)] = level + 1
        _mark(child, level + 1 if opened else level, layout)


def _mark_arms(arms: Tree, level: int, layout: _Layout) -> None:
    for child in (c for c in arms.children if c is not None):
        if isinstance(child, Token):
            if child == "else":
                layout.breaks[child.start_pos] = level
            continue
        if child.data == "match_arm":
            layout.breaks[_first(child)] = level
        _mark(child, level, layout)


def _emit(tokens: list[Token], layout: _Layout) -> str:
    out: list[str] = []
    line_level = 0
    prev: Token | None = None  # the last token written, comments included
    code: list[Token] = []  # the code tokens written so far
    force_break = False
    for index, tok in enumerate(tokens):
        is_comment = tok.type == "COMMENT"
        if prev is None:
            level = layout.breaks.get(tok.start_pos, 0)
            out.append(INDENT * level + tok.value.rstrip() if is_comment else tok.value)
            line_level, force_break = level, is_comment
        elif is_comment and prev.end_line == tok.line:
            out.append("  " + tok.value.rstrip())
            force_break = True
        elif is_comment or force_break or tok.start_pos in layout.breaks:
            level = _level(tokens, index, layout, line_level)
            blank = "\n" if tok.line - prev.end_line >= 2 else ""
            text = tok.value.rstrip() if is_comment else tok.value
            out.append("\n" + blank + INDENT * level + text)
            force_break = is_comment
            if not is_comment:
                line_level = level
        else:
            out.append(_space(code[-2] if len(code) > 1 else None, prev, tok, layout)
                       + tok.value)
        prev = tok
        if not is_comment:
            code.append(tok)
    return "".join(out).rstrip("\n") + "\n" if out else ""


def _level(tokens: list[Token], index: int, layout: _Layout, line_level: int) -> int:
    """Indent of a new line at tokens[index]: its own break, else (for a comment)
    the next code token's, else a continuation of the current line."""
    tok = tokens[index]
    if tok.type != "COMMENT":
        return layout.breaks.get(tok.start_pos, line_level + CONTINUATION)
    for following in tokens[index + 1:]:
        if following.type == "COMMENT":
            continue
        if following.start_pos in layout.closers:
            return layout.breaks[following.start_pos] + 1
        return layout.breaks.get(following.start_pos, line_level + CONTINUATION)
    return 0


def _space(before_prev: Token | None, prev: Token, tok: Token, layout: _Layout) -> str:
    if tok.value in _NO_SPACE_BEFORE or prev.value in _NO_SPACE_AFTER:
        return ""
    if tok.value == "(" and prev.type in ("NAME", "QNAME"):
        return ""  # a call or a def's parameters
    if tok.start_pos in layout.tight or prev.start_pos in layout.tight:
        return ""
    if prev.value == "-" and \
            (before_prev is None or before_prev.type not in _VALUE_END):
        return ""  # unary minus
    return " "


def check_text(text: str, file: str = "<text>") -> bool:
    """True when the text is already canonical."""
    return format_text(text, file) == text
