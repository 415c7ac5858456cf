"""Expressions to checked IR: bind names, check types and units, inline defs.

Errors go to the sink and yield an `ERROR`-typed node so that one mistake
does not cascade into many reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from kbsolve.diagnostics import DiagnosticSink, Note, Span, did_you_mean
from kbsolve.dsl import ast, ir
from kbsolve.dsl.memo import ByIdentity
from kbsolve.dsl.operators import CALLS, CONNECTIVES
from kbsolve.dsl.types import BOOL, NONE, STR, UNITS, Type, dim_div, dim_mul, dim_name

ERROR = Type("error")
_BOOL_OPS = CONNECTIVES
_ORDER_OPS = {"<", "<=", ">", ">="}


@dataclass
class Context:
    """Where an expression sits: its module, framework and local parameters."""

    module: str
    framework: str | None
    params: dict[str, ir.Node] = field(default_factory=dict)
    memory_level: str | None = None  # set inside memory terms
    calls: tuple[str, ...] = ()


@dataclass
class Symbols:
    """What names can mean; filled by the checker before resolution."""

    options: dict[str, tuple[ast.Decl, Type]]  # "fw.name"
    lets: dict[str, tuple[ast.Decl, str]]  # "scope.name" -> (decl, module)
    defs: dict[str, tuple[ast.Decl, str, str | None]]  # -> (decl, module, framework)
    facts: dict[str, Type]  # "gpu.x"
    fact_spans: dict[str, Span]
    imports: dict[str, set[str]]  # module -> imported modules
    let_type: Callable[[str], Type]  # resolves a let lazily, returns its type
    on_let_ref: Callable[[str], None] = lambda key: None
    fact_groups: tuple[str, ...] = ()  # the vocabulary's groups: gpu, model, network, query
    memory_levels: tuple[str, ...] = ()  # the vocabulary's memory levels, lowest first


class Resolver:
    def __init__(self, symbols: Symbols, sink: DiagnosticSink):
        self.s = symbols
        self.sink = sink
        self._answers: dict[tuple[str, str | None], object] = {}  # the symbols are fixed
        self._recording: list[_Reads] = []  # one per expression being remembered
        self._view = (tuple(symbols.fact_groups), tuple(symbols.memory_levels))

    # ---- entry points
    def expr(self, node: ast.Expr, ctx: Context) -> ir.Node:
        """A declaration's expression: remembered per process (see _remembered)."""
        if ctx.params or ctx.calls:
            return self._resolve(node, ctx)
        return self._remembered(node, ctx)

    def expect(self, node: ast.Expr, ctx: Context, kind: str, what: str) -> ir.Node:
        """Resolve and require a bool or num result."""
        return self._expect(node, ctx, kind, what, self.expr(node, ctx))

    def _remembered(self, node: ast.Expr, ctx: Context) -> ir.Node:
        """The IR of a parameterless expression, reused from an earlier resolution in this
        process (another check of the same parsed module: the shipped KB under another
        pack) when every symbol it looked up answers the same now and each let it read
        has the same type; its let reads are made again, in order, for the checker's let
        graph. Resolved afresh otherwise; remembered only if it reported nothing."""
        key = (ctx.module, ctx.framework, ctx.memory_level, self._view)
        found = _MEMO.get(node)
        if found is not None and found[0] == key and \
                all(_same(self._answer(*asked), answer) for asked, answer in found[1]):
            for let, ltype in found[2]:  # the checker's let graph and lazy lets, as before
                self.s.on_let_ref(let)
                if not _same(self.s.let_type(let), ltype):
                    break  # resolved afresh below: these calls are idempotent
            else:
                return found[3]
        before = len(self.sink.items)
        reads = _Reads()
        self._recording.append(reads)
        try:
            result = self._resolve(node, ctx)
        finally:
            self._recording.pop()
        if len(self.sink.items) == before:
            _MEMO.keep(node, (key, tuple(reads.asked.items()), tuple(reads.lets), result))
        return result

    def _looked(self, kind: str, key: str | None):
        """What the symbols say of `key` (see _answer), recorded for _remembered."""
        answer = self._answer(kind, key)
        if self._recording:
            self._recording[-1].asked[(kind, key)] = answer
        return answer

    def _answer(self, kind: str, key: str | None):
        asked = (kind, key)
        found = self._answers.get(asked, _MISSING)
        if found is _MISSING:
            found = self._answers[asked] = self._ask(kind, key)
        return found

    def _ask(self, kind: str, key):
        s = self.s
        if kind == "option":  # its type, or None
            return s.options[key][1] if key in s.options else None
        if kind == "let":  # the module that defines it, or None
            return s.lets[key][1] if key in s.lets else None
        if kind == "fact":  # its type, or None
            return s.facts.get(key)
        if kind == "imports":  # the modules `key` imports
            return frozenset(s.imports.get(key, ()))
        if kind == "def":  # (decl, module, framework)
            return s.defs[key]
        return self._defs_of(key)  # "defs": the defs visible in framework `key`

    def _resolve(self, node: ast.Expr, ctx: Context) -> ir.Node:
        method = getattr(self, "_" + type(node).__name__.lower())
        return method(node, ctx)

    def _expect(self, node: ast.Expr, ctx: Context, kind: str, what: str,
                result: ir.Node | None = None) -> ir.Node:
        if result is None:
            result = self._resolve(node, ctx)
        if result.type.kind not in (kind, "error"):
            self.sink.error(f"{what} must be {'a condition' if kind == 'bool' else 'a number'},"
                            f" but this is {result.type}", node.span, code="type")
            return ir.Const(False, ERROR, node.span)
        return result

    def literal(self, lit: ast.Literal, want: Type | None, what: str) -> object:
        """A literal's value, checked against `want` (an option's type)."""
        node = self.expr(lit, Context("", None))
        if want is None or node.type is ERROR:
            return node.value if isinstance(node, ir.Const) else None
        self.compatible_value(node, want, what, lit.span)
        return node.value

    def compatible_value(self, node: ir.Const, want: Type, what: str, span: Span,
                         decl_span: Span | None = None) -> bool:
        notes = [Note(f"{what} is declared here", decl_span)] if decl_span else []
        if want.kind == "enum":
            if node.type.kind != "str":
                self.sink.error(f"{what} takes one of {_values(want)}, not {node.type}",
                                span, code="type", notes=notes)
                return False
            if node.value not in want.values:
                self.sink.error(f"'{node.value}' is not a value of {what}"
                                f"{did_you_mean(node.value, want.values)}", span,
                                code="enum-value", notes=notes,
                                hint=f"values: {_values(want)}")
                return False
            return True
        if want.kind == "num" and node.type.kind == "num":
            if node.type.dim != want.dim:
                self.sink.error(f"{what} is {dim_name(want.dim)}, not "
                                f"{dim_name(node.type.dim)}", span, code="unit", notes=notes)
                return False
            if want.integral and Fraction(node.value).denominator != 1:
                self.sink.error(f"{what} takes whole numbers, not {_fmt(node.value)}",
                                span, code="type", notes=notes)
                return False
            return True
        if want.kind != node.type.kind:
            self.sink.error(f"{what} is {want}, not {node.type}", span, code="type", notes=notes)
            return False
        return True

    # ---- leaves
    def _num(self, node: ast.Num, ctx: Context) -> ir.Node:
        value, dim = node.value, NONE
        if node.unit is not None:
            if node.unit not in UNITS:
                self.sink.error(f"unknown unit '{node.unit}'{did_you_mean(node.unit, UNITS)}",
                                node.unit_span or node.span, code="unit")
                return ir.Const(value, ERROR, node.span)
            dim, scale = UNITS[node.unit]
            value = value * scale
        return ir.Const(value, Type("num", dim, value.denominator == 1), node.span)

    def _str(self, node: ast.Str, ctx: Context) -> ir.Node:
        return ir.Const(node.value, STR, node.span)

    def _bool(self, node: ast.Bool, ctx: Context) -> ir.Node:
        return ir.Const(node.value, BOOL, node.span)

    def _ref(self, node: ast.Ref, ctx: Context) -> ir.Node:
        if len(node.parts) == 1:
            return self._name(node.parts[0], node.span, ctx)
        head = node.parts[0]
        if head == "memory" and len(node.parts) == 2:
            return self._memory_sum(node, ctx)
        if head in self.s.fact_groups:
            path = ".".join(node.parts)
            ftype = self._looked("fact", path) if len(node.parts) == 2 else None
            if ftype is not None:
                return ir.FactRef(path, ftype, node.span)
            known = [p for p in self.s.facts if p.startswith(head + ".")]
            self.sink.error(f"unknown fact '{path}'{did_you_mean(path, known)}", node.span,
                            code="unknown-fact",
                            hint=f"declare it in kb/core with: fact {path}: TYPE")
            return ir.Const(False, ERROR, node.span)
        self.sink.error(f"unknown name '{node.dotted}'; dotted names are facts "
                        f"({', '.join(p + '.*' for p in self.s.fact_groups)})", node.span,
                        code="unknown-name")
        return ir.Const(False, ERROR, node.span)

    def _memory_sum(self, node: ast.Ref, ctx: Context) -> ir.Node:
        level = node.parts[1]
        levels = self.s.memory_levels
        if ctx.memory_level not in levels[1:] or ctx.framework is None:
            above = " or ".join(f"'{name}'" for name in levels[1:])
            self.sink.error(f"memory.* sums can only be used in memory terms at level {above}",
                            node.span, code="memory-sum")
            return ir.Const(False, ERROR, node.span)
        allowed = levels[:levels.index(ctx.memory_level)]
        if level not in allowed:
            self.sink.error(f"memory.{level} cannot be used at level '{ctx.memory_level}'"
                            f"{did_you_mean(level, allowed)}", node.span, code="memory-sum",
                            hint="a level may sum only the levels below it: "
                                 + ", ".join(allowed))
            return ir.Const(False, ERROR, node.span)
        return ir.MemorySum(ctx.framework, level, Type("num", (1, 0, 0)), node.span)

    def _name(self, name: str, span: Span, ctx: Context) -> ir.Node:
        if name in ctx.params:
            return ctx.params[name]
        if ctx.framework:
            key = f"{ctx.framework}.{name}"
            otype = self._looked("option", key)
            if otype is not None:
                return ir.OptionRef(key, otype, span)
            if self._looked("let", key) is not None:
                return self._let_ref(key, span)
        core_key = f"core.{name}"
        module = self._looked("let", core_key)
        if module is not None:
            if self._visible(module, ctx, span, name):
                return self._let_ref(core_key, span)
            return ir.Const(False, ERROR, span)
        if name in self._defs_visible(ctx):
            self.sink.error(f"'{name}' is a def; call it with arguments: {name}(...)", span,
                            code="def-as-value")
            return ir.Const(False, ERROR, span)
        self.sink.error(f"unknown name '{name}'{did_you_mean(name, self._visible_names(ctx))}",
                        span, code="unknown-name")
        return ir.Const(False, ERROR, span)

    def _let_ref(self, key: str, span: Span) -> ir.Node:
        self.s.on_let_ref(key)
        ltype = self.s.let_type(key)
        if self._recording:
            self._recording[-1].lets.append((key, ltype))
        return ir.LetRef(key, ltype, span)

    def _visible(self, module: str, ctx: Context, span: Span, name: str) -> bool:
        if module == ctx.module or module in self._looked("imports", ctx.module):
            return True
        self.sink.error(f"'{name}' is defined in module {module}, which this module does not "
                        f"import", span, code="not-imported", hint=f"add: import {module}")
        return False

    def _visible_names(self, ctx: Context) -> list[str]:
        names = list(ctx.params)
        if ctx.framework:
            prefix = ctx.framework + "."
            names += [k[len(prefix):] for k in self.s.options if k.startswith(prefix)]
            names += [k[len(prefix):] for k in self.s.lets if k.startswith(prefix)]
        names += [k[5:] for k in self.s.lets if k.startswith("core.")]
        return names

    def _defs_visible(self, ctx: Context) -> dict[str, str]:
        return self._looked("defs", ctx.framework)

    def _defs_of(self, framework: str | None) -> dict[str, str]:
        found = {}
        for key in self.s.defs:  # core first, so the framework's own def wins
            scope, name = key.split(".", 1)
            if scope == "core":
                found[name] = key
        for key in self.s.defs:
            scope, name = key.split(".", 1)
            if framework and scope == framework:
                found[name] = key
        return found

    # ---- operators
    def _unary(self, node: ast.Unary, ctx: Context) -> ir.Node:
        operand = self._resolve(node.operand, ctx)
        if operand.type is ERROR:
            return operand
        if node.op == "not":
            if operand.type.kind != "bool":
                self.sink.error(f"'not' needs a condition, but this is {operand.type}",
                                node.operand.span, code="type")
                return ir.Const(False, ERROR, node.span)
            return ir.Op("not", (operand,), BOOL, node.span)
        if not operand.type.is_num:
            self.sink.error(f"'-' needs a number, but this is {operand.type}", node.span,
                            code="type")
            return ir.Const(False, ERROR, node.span)
        return ir.Op("neg", (operand,), operand.type, node.span)

    def _binary(self, node: ast.Binary, ctx: Context) -> ir.Node:
        left, right = self._resolve(node.left, ctx), self._resolve(node.right, ctx)
        if ERROR in (left.type, right.type):
            return ir.Const(False, ERROR, node.span)
        op = node.op
        if op in _BOOL_OPS:
            for side, sub in ((left, node.left), (right, node.right)):
                if side.type.kind != "bool":
                    self.sink.error(f"'{op}' needs conditions on both sides, but this is "
                                    f"{side.type}", sub.span, code="type")
                    return ir.Const(False, ERROR, node.span)
            return ir.Op(op, (left, right), BOOL, node.span)
        if op in ("==", "!="):
            if not self._comparable(left, right, node):
                return ir.Const(False, ERROR, node.span)
            return ir.Op(op, (left, right), BOOL, node.span)
        if not (left.type.is_num and right.type.is_num):
            bad, sub = (left, node.left) if not left.type.is_num else (right, node.right)
            self.sink.error(f"'{op}' needs numbers, but this is {bad.type}", sub.span,
                            code="type")
            return ir.Const(False, ERROR, node.span)
        return self._arith(op, left, right, node)

    def _arith(self, op: str, left: ir.Node, right: ir.Node, node: ast.Binary) -> ir.Node:
        lt, rt = left.type, right.type
        if op in _ORDER_OPS or op in ("+", "-"):
            if lt.dim != rt.dim:
                self.sink.error(f"'{op}' mixes units: {dim_name(lt.dim)} and "
                                f"{dim_name(rt.dim)}", node.span, code="unit")
                return ir.Const(False, ERROR, node.span)
            if op in _ORDER_OPS:
                return ir.Op(op, (left, right), BOOL, node.span)
            return ir.Op(op, (left, right), Type("num", lt.dim, lt.integral and rt.integral),
                         node.span)
        if op == "*":
            return ir.Op(op, (left, right),
                         Type("num", dim_mul(lt.dim, rt.dim), lt.integral and rt.integral),
                         node.span)
        if op == "/":
            if isinstance(right, ir.Const) and right.value == 0:
                self.sink.error("division by zero", node.right.span, code="div-zero")
                return ir.Const(False, ERROR, node.span)
            return ir.Op(op, (left, right), Type("num", dim_div(lt.dim, rt.dim)), node.span)
        # %
        if not (lt.integral and rt.integral and lt.dim == NONE == rt.dim):
            self.sink.error("'%' needs whole plain numbers on both sides", node.span,
                            code="type")
            return ir.Const(False, ERROR, node.span)
        if isinstance(right, ir.Const) and right.value == 0:
            self.sink.error("remainder by zero", node.right.span, code="div-zero")
            return ir.Const(False, ERROR, node.span)
        return ir.Op("%", (left, right), Type("num", NONE, True), node.span)

    def _comparable(self, left: ir.Node, right: ir.Node, node: ast.Binary) -> bool:
        lt, rt = left.type, right.type
        for enum_side, other in ((left, right), (right, left)):
            if enum_side.type.kind == "enum" and isinstance(other, ir.Const) \
                    and other.type.kind == "str":
                return self.compatible_value(other, enum_side.type, _describe(enum_side),
                                             other.span)
        if lt.kind == "enum" and rt.kind == "enum":
            if set(lt.values) & set(rt.values):
                return True
        elif lt.is_textual and rt.is_textual:
            return True
        elif lt.kind == rt.kind == "num":
            if lt.dim == rt.dim:
                return True
            self.sink.error(f"'{node.op}' mixes units: {dim_name(lt.dim)} and "
                            f"{dim_name(rt.dim)}", node.span, code="unit")
            return False
        elif lt.kind == rt.kind:
            return True
        self.sink.error(f"cannot compare {lt} with {rt}", node.span, code="type")
        return False

    def _inset(self, node: ast.InSet, ctx: Context) -> ir.Node:
        subject = self._resolve(node.operand, ctx)
        if subject.type is ERROR:
            return subject
        parts = []
        for lit in node.values:
            value = self._resolve(lit, ctx)
            fake = ast.Binary("==", node.operand, lit, lit.span)
            if value.type is ERROR or not self._comparable(subject, value, fake):
                return ir.Const(False, ERROR, node.span)
            parts.append(ir.Op("==", (subject, value), BOOL, lit.span))
        result: ir.Node = parts[0]
        for part in parts[1:]:
            result = ir.Op("or", (result, part), BOOL, node.span)
        if node.negated:
            result = ir.Op("not", (result,), BOOL, node.span)
        return result

    def _ifelse(self, node: ast.IfElse, ctx: Context) -> ir.Node:
        cond = self._expect(node.cond, ctx, "bool", "the 'if' condition")
        then, else_ = self._resolve(node.then, ctx), self._resolve(node.else_, ctx)
        joined = self._join(then, else_, node.span)
        if ERROR in (cond.type, joined):
            return ir.Const(False, ERROR, node.span)
        return ir.Op("if", (cond, then, else_), joined, node.span)

    def _join(self, a: ir.Node, b: ir.Node, span: Span) -> Type:
        ta, tb = a.type, b.type
        if ERROR in (ta, tb):
            return ERROR
        if ta.kind == tb.kind == "num":
            if ta.dim != tb.dim:
                self.sink.error(f"branches have different units: {dim_name(ta.dim)} and "
                                f"{dim_name(tb.dim)}", span, code="unit")
                return ERROR
            return Type("num", ta.dim, ta.integral and tb.integral)
        if ta.is_textual and tb.is_textual:
            if ta.kind == tb.kind == "enum":
                return Type("enum", values=tuple(dict.fromkeys(ta.values + tb.values)))
            return STR
        if ta.kind == tb.kind:
            return ta
        self.sink.error(f"branches have different types: {ta} and {tb}", span, code="type")
        return ERROR

    def _match(self, node: ast.Match, ctx: Context) -> ir.Node:
        subject = self._resolve(node.subject, ctx)
        if subject.type is ERROR:
            return subject
        covered: set = set()
        branches: list[tuple[ir.Node, ir.Node]] = []
        for arm in node.arms:
            cond = self._inset(ast.InSet(node.subject, arm.values, False, arm.span), ctx)
            if cond.type is ERROR:
                return cond
            covered |= {getattr(v, "value", None) for v in arm.values}
            branches.append((cond, self._resolve(arm.result, ctx)))
        if node.default is not None:
            result = self._resolve(node.default, ctx)
        else:
            if subject.type.kind == "enum":
                missing = [v for v in subject.type.values if v not in covered]
            elif subject.type.kind == "bool":
                missing = [str(v).lower() for v in (True, False) if v not in covered]
            else:
                missing = ["other values"]
            if missing:
                self.sink.error("match does not cover " + ", ".join(f"'{m}'" for m in missing)
                                + "; add an 'else =>' arm", node.span, code="match")
                return ir.Const(False, ERROR, node.span)
            result = branches.pop()[1]
        for cond, value in reversed(branches):
            joined = self._join(value, result, node.span)
            if joined is ERROR:
                return ir.Const(False, ERROR, node.span)
            result = ir.Op("if", (cond, value, result), joined, node.span)
        return result

    # ---- calls
    def _call(self, node: ast.Call, ctx: Context) -> ir.Node:
        args = [self._resolve(a, ctx) for a in node.args]
        if any(a.type is ERROR for a in args):
            return ir.Const(False, ERROR, node.span)
        builtin = _BUILTINS.get(node.name)
        if builtin is not None:
            return builtin(self, node, args)
        defs = self._defs_visible(ctx)
        if node.name in defs:
            return self._inline(defs[node.name], node, args, ctx)
        self.sink.error(f"unknown function '{node.name}'"
                        f"{did_you_mean(node.name, list(_BUILTINS) + list(defs))}",
                        node.span, code="unknown-function")
        return ir.Const(False, ERROR, node.span)

    def _inline(self, key: str, node: ast.Call, args: list[ir.Node], ctx: Context) -> ir.Node:
        decl, module, framework = self._looked("def", key)
        if key in ctx.calls:
            self.sink.error(f"def '{decl.name}' calls itself", node.span, code="recursion",
                            notes=[Note("defined here", decl.name_span)])
            return ir.Const(False, ERROR, node.span)
        if len(args) != len(decl.params):
            self.sink.error(f"'{decl.name}' takes {len(decl.params)} argument(s), "
                            f"{len(args)} given", node.span, code="arity",
                            notes=[Note("defined here", decl.name_span)])
            return ir.Const(False, ERROR, node.span)
        if framework is None and module != ctx.module and \
                module not in self._looked("imports", ctx.module):
            self._visible(module, ctx, node.span, decl.name)
            return ir.Const(False, ERROR, node.span)
        inner = Context(module, framework, dict(zip(decl.params, args)),
                        ctx.memory_level, ctx.calls + (key,))
        return self._resolve(decl.expr, inner)


_MISSING = object()
_MEMO = ByIdentity(100_000)  # ast node -> (key, answers, let reads, IR)


class _Reads:
    """What one remembered expression asked of the symbols, and the lets it read."""

    __slots__ = ("asked", "lets")

    def __init__(self):
        self.asked: dict[tuple, object] = {}
        self.lets: list[tuple[str, Type]] = []


def _same(now, then) -> bool:
    """The same answer: equal values, the same declaration, ERROR only for ERROR."""
    if now is then:
        return True
    if type(now) is tuple:  # a def: (decl, module, framework)
        return type(then) is tuple and now[0] is then[0] and now[1:] == then[1:]
    return now == then and now is not ERROR and then is not ERROR


def _values(t: Type) -> str:
    return ", ".join(f'"{v}"' for v in t.values)


def _fmt(value) -> str:
    return str(float(value)) if isinstance(value, Fraction) else str(value)


def _describe(node: ir.Node) -> str:
    if isinstance(node, ir.OptionRef):
        return f"option {node.option.split('.', 1)[1]}"
    if isinstance(node, ir.FactRef):
        return f"fact {node.path}"
    return "this expression"


def _minmax(r: Resolver, node: ast.Call, args: list[ir.Node]) -> ir.Node:
    if len(args) < 2 or any(not a.type.is_num for a in args):
        r.sink.error(f"{node.name}() takes two or more numbers", node.span, code="arity")
        return ir.Const(False, ERROR, node.span)
    if len({a.type.dim for a in args}) > 1:
        r.sink.error(f"{node.name}() mixes units", node.span, code="unit")
        return ir.Const(False, ERROR, node.span)
    integral = all(a.type.integral for a in args)
    return ir.Op(node.name, tuple(args), Type("num", args[0].type.dim, integral), node.span)


def _rounding(r: Resolver, node: ast.Call, args: list[ir.Node]) -> ir.Node:
    if len(args) != 1 or not args[0].type.is_num:
        r.sink.error(f"{node.name}() takes one number", node.span, code="arity")
        return ir.Const(False, ERROR, node.span)
    integral = node.name != "abs" or args[0].type.integral
    return ir.Op(node.name, tuple(args), Type("num", args[0].type.dim, integral), node.span)


def _counting(r: Resolver, node: ast.Call, args: list[ir.Node]) -> ir.Node:
    if len(args) < 2 or any(a.type.kind != "bool" for a in args):
        r.sink.error(f"{node.name}() takes two or more conditions", node.span, code="arity")
        return ir.Const(False, ERROR, node.span)
    return ir.Op(node.name, tuple(args), BOOL, node.span)


def _divisible(r: Resolver, node: ast.Call, args: list[ir.Node]) -> ir.Node:
    if len(args) != 2 or not all(a.type.is_num and a.type.integral for a in args):
        r.sink.error("divisible(a, b) takes two whole numbers", node.span, code="arity")
        return ir.Const(False, ERROR, node.span)
    return ir.Op("divisible", tuple(args), BOOL, node.span)


# how each builtin function (dsl/operators.CALLS, the one list) is typed
TYPING = {"min": _minmax, "max": _minmax, "ceil": _rounding, "floor": _rounding,
          "abs": _rounding, "at_most_one": _counting, "exactly_one": _counting,
          "divisible": _divisible}
BUILTINS = _BUILTINS = {name: TYPING[name] for name in CALLS}
