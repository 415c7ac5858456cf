"""Code-pattern checks, matched on the Python AST.

A check whose `needs_code` starts with `code:` is judged on a script's code.
Three forms (docs/audit.md; read and checked by dsl/code_pattern.py):

  code: when A, B [require C | D]   a fault when every A, B is used and no C, D is
  code: rank-branch A | B            a fault when A or B is used under `if ...rank...`
  code: name-of CALL has W | X, Y    a fault when CALL's path argument lacks a word of
                                     every comma-separated group

A name matches a use when the use's dotted path (imports resolved) equals it
or ends with `.name`; keyword arguments count as uses of their name.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from kbsolve.dsl.code_pattern import PREFIX, Pattern, parse_pattern  # noqa: F401 (re-exported)
from kbsolve.dsl.kb import KnowledgeBase


@dataclass
class Verdict:
    applies: bool
    fault: bool
    evidence: list[str] = field(default_factory=list)


def has_code_checks(kb: KnowledgeBase, framework: str) -> bool:
    return any(parse_pattern(c.needs_code) for c in kb.of(kb.checks, framework))


@dataclass
class Use:
    path: str
    line: int
    under_rank: bool


class Uses(ast.NodeVisitor):
    """Every dotted name, import and keyword in a module, imports resolved."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.uses: list[Use] = []
        self.calls: list[tuple[str, ast.Call]] = []
        self.assigned: dict[str, ast.AST] = {}
        self.rank_depth = 0

    def add(self, path: str, node: ast.AST) -> None:
        self.uses.append(Use(path, getattr(node, "lineno", 0), self.rank_depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[alias.asname or alias.name.split(".")[0]] = \
                alias.name if alias.asname else alias.name.split(".")[0]
            self.add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            full = f"{node.module}.{alias.name}" if node.module else alias.name
            self.aliases[alias.asname or alias.name] = full
            self.add(full, node)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        ranked = bool(re.search(r"rank", ast.unparse(node.test), re.I))
        self.rank_depth += ranked
        for child in node.body + node.orelse:
            self.visit(child)
        self.rank_depth -= ranked

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        ranked = bool(re.search(r"rank", ast.unparse(node.test), re.I))
        self.rank_depth += ranked
        self.visit(node.body)
        self.visit(node.orelse)
        self.rank_depth -= ranked

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self.dotted(node)
        if path:
            self.add(path, node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self.add(self.aliases.get(node.id, node.id), node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg:
            ranked = isinstance(node.value, ast.IfExp) and \
                bool(re.search(r"rank", ast.unparse(node.value.test), re.I))
            self.rank_depth += ranked
            self.add(node.arg, node.value)
            self.rank_depth -= ranked
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        path = self.dotted(node.func)
        if path:
            self.calls.append((path, node))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.assigned[target.id] = node.value
        self.generic_visit(node)

    def dotted(self, node: ast.AST) -> str:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return ".".join(reversed(parts))
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))


def matches(path: str, name: str) -> bool:
    return path == name or path.endswith("." + name)


def judge_code(pattern: Pattern, uses: Uses, rel: str) -> Verdict:
    def found(name: str) -> list[Use]:
        return [u for u in uses.uses if matches(u.path, name)]

    if pattern.form == "when":
        hits = [found(n) for n in pattern.names]
        if not all(hits):
            return Verdict(False, False)
        if any(found(n) for n in pattern.required):
            return Verdict(True, False)
        return Verdict(True, True, [f"{rel}:{h[0].line}: {h[0].path}" for h in hits])
    if pattern.form == "rank-branch":
        hits = [u for n in pattern.names for u in found(n)]
        bad = [u for u in hits if u.under_rank]
        return Verdict(bool(hits), bool(bad),
                       [f"{rel}:{u.line}: {u.path} under a rank condition" for u in bad])
    calls = [call for path, call in uses.calls if matches(path, pattern.names[0])]
    evidence = []
    for call in calls:
        text = _path_text(call, uses).lower()
        missing = [g for g in pattern.groups if not any(w.lower() in text for w in g)]
        if missing:
            evidence.append(f"{rel}:{call.lineno}: {ast.unparse(call)[:80]} lacks "
                            + ", ".join("/".join(g) for g in missing))
    return Verdict(bool(calls), bool(evidence), evidence)


def _path_text(call: ast.Call, uses: Uses) -> str:
    """The text of a save call's path argument, following one plain assignment."""
    arg = call.args[1] if len(call.args) > 1 else next(
        (k.value for k in call.keywords if k.arg in ("f", "path", "file")), None)
    if arg is None:
        return ""
    if isinstance(arg, ast.Name) and arg.id in uses.assigned:
        arg = uses.assigned[arg.id]
    return ast.unparse(arg)


def scan(code: str, rel: str) -> tuple[Uses | None, str]:
    """The uses of one script, or None and why it cannot be read."""
    try:
        tree = ast.parse(code, filename=rel)
    except SyntaxError as error:
        return None, f"{rel}:{error.lineno}: not valid Python ({error.msg})"
    except (ValueError, RecursionError, MemoryError):
        return None, f"{rel}: cannot be parsed as Python"
    uses = Uses()
    try:
        uses.visit(tree)
    except RecursionError:
        return None, f"{rel}: nested too deeply to analyse"
    return uses, ""
