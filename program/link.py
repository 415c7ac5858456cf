"""Expressions over tables linked into straight-line Python, one function per
level of the search.

An expression (program/tables.Expr) too large to table is a tree of operations
over tables. Its range, with the first k options of the search's order set,
used to be read by walking the tree: a call per node, a dispatch per operation,
a tuple per range. Here the tree is linked once per level: every table's level
is resolved to its flat lists and strides, every operation to its arithmetic,
and the walk becomes one generated function over the value indices. The
function computes exactly what the walk computed, in the same order (the same
float operations on the same operands, the same `if` branches read), so every
bound, and every plan, is the same to the bit; it is only faster to run.
"""

from __future__ import annotations

import bisect
import builtins
import math
import operator
from functools import partial
from types import FunctionType

from kbsolve import codecache
from kbsolve.dsl.memo import Kept
from kbsolve.program import tables as T
from kbsolve.program.operators import OPERATORS, interval

# written out (each by its writer, _Writer._op_<inline>); the others call interval()
INLINE = frozenset(name for name, op in OPERATORS.items() if op.inline)

_MADE = Kept(4096)  # source -> its code, compiled once per process (shapes of many KBs)
# every link's globals besides its constants
_BASE = {"__builtins__": builtins, "interval": interval, "_inf": math.inf, "_MISS": T._MISS}


def link(expr, k: int):
    """fn(k, idx) -> expr's (low, high) with the first k places of idx set (or
    None, the range of an enum-valued expression): what Expr._range returns.

    The expression's arguments are written out where they read as many
    options as it does (their memo could not hit where its own missed) and
    read through their own bound() (its memo) elsewhere. The arrays, places,
    strides and settled values are the function's globals (c0, c1, ...), so
    the source depends only on the expression's shape, and a shape is
    compiled once; each link is a function of its own over a copy of that
    code (a copy, so that the interpreter's cached look-ups of its globals
    stay with one namespace). Globals rather than the arguments of a maker
    closing over them: the text is shorter to parse (no header naming every
    constant) and a link makes no closure cell per constant.

    The parts that do not read the level's last place (hoisted: see
    _Writer.emit) are found once per value of the places before it and kept:
    the search sets that place to each of its values in turn (a node's
    children), and only the parts that read it are found again. Where fewer
    than HOIST_MIN reads would be kept, that code runs first on every call."""
    writer = _Writer(k, expr, hoist=True)
    lo, hi = writer.emit(expr, 2)
    if writer.hoisted_reads < HOIST_MIN:  # too little kept to pay for its look-up
        writer.unhoist()
    if writer.maybe_unknown(expr):
        writer.line(2, f"return None if {lo} is None else ({lo}, {hi})")
    else:
        writer.line(2, f"return ({lo}, {hi})")
    head = writer.head()  # before the names: its places are consts too
    source = "def linked(k, idx):\n" + "\n".join(head + writer.lines) + "\n"
    code = _MADE.get(source)
    if code is None:
        namespace: dict = {}
        exec(codecache.compiled(source, "<linked>"), namespace)
        code = _MADE.keep(source, namespace.pop("linked").__code__)  # its globals: a cycle
    names = {f"c{i}": value for i, value in enumerate(writer.consts)}
    names.update(_BASE)
    if writer.exported:
        names["_kept"] = {}
    return FunctionType(code.replace(), names)


HOIST_MIN = 2  # reads (table levels with places set, memos) worth keeping per prefix
HOIST_KEPT = 256  # prefixes kept per linked level (then forgotten, all at once)


class _Writer:
    def __init__(self, k: int, root, hoist: bool = False):
        self.k = k
        self.root = root
        self.lines: list[str] = []
        self.consts: list = []
        self.names = 0
        # hoisting: the root's last set place (its children's place in a search),
        # the code that does not read it (self.pre) and the names it leaves
        j = bisect.bisect_left(root._places, k)
        self.last = root._places[j - 1] if hoist and j else None
        self.prefix = root._places[:j - 1] if j else ()
        self.pre: list[str] = []
        self.exported: list[str] = []
        self.hoisted_reads = 0
        self._out = self.lines
        # names found on every call (depth 2), by (block, what): read again, not found again
        self._seen: dict = {}

    def line(self, depth: int, text: str) -> None:
        self._out.append("    " * depth + text)

    def head(self) -> list[str]:
        """linked()'s first lines: the hoisted values for this prefix, found
        (self.pre) where not kept yet."""
        if not self.exported:
            return []
        key = _getter(self, self.prefix)
        names = "".join(n + ", " for n in self.exported)
        return ["        _key = " + key,
                "        _got = _kept.get(_key)",
                "        if _got is None:",
                *["    " + line for line in self.pre],
                f"            _got = ({names})",
                f"            if len(_kept) >= {HOIST_KEPT}: _kept.clear()",
                "            _kept[_key] = _got",
                f"        {names}= _got"]

    def unhoist(self) -> None:
        """Run the hoisted code on every call, first (written once, not again
        unhoisted): it is depth-2 code, which runs on every call anyway, and
        its values do not depend on where it runs (reads of tables and memos)."""
        self.lines[:0] = self.pre
        self.pre, self.exported = [], []

    def _reads_last(self, cell) -> bool:
        places = cell._search_deps if isinstance(cell, T.Table) else cell._places
        return self.last in places

    def fresh(self, stem: str) -> str:
        self.names += 1
        return f"{stem}{self.names}"

    def const(self, value) -> str:
        self.consts.append(value)
        return f"c{len(self.consts) - 1}"

    def maybe_unknown(self, cell) -> bool:
        """Whether cell's range can be UNKNOWN (an enum's, or built from one:
        found once per expression, tables.may_be_unknown)."""
        return T.may_be_unknown(cell)

    # ---- one node: code at `depth` that leaves its range in two names (None, None: UNKNOWN)
    def emit(self, cell, depth: int) -> tuple[str, str]:
        """A cell that does not read the last place, met where the code runs
        on every call (depth 2: not inside a branch of an `if` or a guard), is
        hoisted: written into self.pre, its range kept per prefix. Its value
        depends only on the places before the last (a table's level reads
        only set places, a smaller expression's memo is keyed by them), so
        the kept value is the one the code would find again."""
        if self.last is not None and depth == 2 and self._out is self.lines and \
                cell is not self.root and not self._reads_last(cell):
            self._out = self.pre
            try:
                lo, hi = self._emit(cell, depth)
            finally:
                self._out = self.lines
            for name in (lo, hi):
                if name not in self.exported and name != "None" and \
                        not (name[0] == "c" and name[1:].isdigit()):
                    self.exported.append(name)
            return lo, hi
        return self._emit(cell, depth)

    def _emit(self, cell, depth: int) -> tuple[str, str]:
        if isinstance(cell, T.Table):
            return self._table(cell, depth)
        if cell is not self.root and len(cell._places) < len(self.root._places):
            return self._called(cell, depth)
        writer = _WRITERS.get(cell.op)
        if writer is not None:
            return writer(self, cell, depth)
        return self._generic(cell, depth)

    def _index(self, pairs, depth: int) -> str:
        """The flat index of a level's cell; one found where the code runs on
        every call (depth 2) is read again by later code of the same block."""
        if not pairs:
            return "0"
        key = (id(self._out), "at", pairs)
        at = self._seen.get(key)
        if at is not None:
            return at
        at = self.fresh("at")
        self.line(depth, f"{at} = " + " + ".join(f"idx[{self.const(p)}] * {self.const(s)}"
                                                 for p, s in pairs))
        if depth == 2:
            self._seen[key] = at
        return at

    def _table(self, table, depth: int) -> tuple[str, str]:
        k = self.k
        if table.kind == "code":  # Table.bound: known only when every option is set
            if any(a >= k for a in table._search_deps):
                return "None", "None"
            pairs, low, _, _, listed = table._levels[-1] or table._level(
                len(table._search_deps))
            value = self._read(low, listed, self._index(pairs, depth), depth)
            return value, value
        pairs, low, high, listed = table.reader(k)
        if not pairs:  # settled: the level is one value
            lo = low[0] if listed else low.item(0)
            hi = high[0] if listed else high.item(0)
            return self.const(lo), self.const(hi)
        at = self._index(pairs, depth)
        lo = self._read(low, listed, at, depth)
        hi = lo if high is low else self._read(high, listed, at, depth)
        return lo, hi

    def _read(self, array, listed: bool, at: str, depth: int) -> str:
        key = (id(self._out), id(array), at)  # the same cell read again (as _index)
        name = self._seen.get(key)
        if name is not None:
            return name
        name = self.fresh("v")
        if depth == 2:
            self._seen[key] = name
        source = self.const(array)
        self.hoisted_reads += self._out is self.pre
        self.line(depth, f"{name} = {source}[{at}]" if listed else
                  f"{name} = {source}.item({at})")
        return name

    def _args(self, cell, depth: int) -> list[tuple[str, str]]:
        return [self.emit(a, depth) for a in cell.args]

    def _guarded(self, cell, args, depth: int, body) -> tuple[str, str]:
        """body(depth) over known args; UNKNOWN where an arg is (as interval)."""
        lo, hi = self.fresh("lo"), self.fresh("hi")
        unknown = [a[0] for a, c in zip(args, cell.args) if self.maybe_unknown(c)]
        if unknown:
            self.line(depth, f"if {' is None or '.join(unknown)} is None:")
            self.line(depth + 1, f"{lo} = {hi} = None")
            self.line(depth, "else:")
            depth += 1
        body(lo, hi, depth)
        return lo, hi

    def _op_add(self, cell, depth):
        (a0, a1), (b0, b1) = self._args(cell, depth)
        return self._guarded(cell, [(a0, a1), (b0, b1)], depth, lambda lo, hi, d: (
            self.line(d, f"{lo} = {a0} + {b0}"), self.line(d, f"{hi} = {a1} + {b1}")))

    def _op_sub(self, cell, depth):
        (a0, a1), (b0, b1) = self._args(cell, depth)
        return self._guarded(cell, [(a0, a1), (b0, b1)], depth, lambda lo, hi, d: (
            self.line(d, f"{lo} = {a0} - {b1}"), self.line(d, f"{hi} = {a1} - {b0}")))

    def _op_neg(self, cell, depth):
        (a0, a1), = self._args(cell, depth)
        return self._guarded(cell, [(a0, a1)], depth, lambda lo, hi, d: (
            self.line(d, f"{lo} = -{a1}"), self.line(d, f"{hi} = -{a0}")))

    def _op_sum(self, cell, depth):
        args = self._args(cell, depth)
        lows = "".join(f" + {a[0]}" for a in args)  # operators.left_sum, written out
        highs = "".join(f" + {a[1]}" for a in args)
        return self._guarded(cell, args, depth, lambda lo, hi, d: (
            self.line(d, f"{lo} = 0{lows}"), self.line(d, f"{hi} = 0{highs}")))

    def _op_min(self, cell, depth):
        return self._extreme(cell, depth, "min")

    def _op_max(self, cell, depth):
        return self._extreme(cell, depth, "max")

    def _extreme(self, cell, depth, fn: str):
        """min's and max's interval views: the extreme of the lows, and of the highs."""
        args = self._args(cell, depth)
        if len(args) == 1:  # min(x) of one range is the range
            return self._guarded(cell, args, depth, lambda lo, hi, d: (
                self.line(d, f"{lo} = {args[0][0]}"), self.line(d, f"{hi} = {args[0][1]}")))
        lows = ", ".join(a[0] for a in args)
        highs = ", ".join(a[1] for a in args)
        return self._guarded(cell, args, depth, lambda lo, hi, d: (
            self.line(d, f"{lo} = {fn}({lows})"), self.line(d, f"{hi} = {fn}({highs})")))

    def _op_mul(self, cell, depth):
        (a0, a1), (b0, b1) = self._args(cell, depth)
        return self._guarded(cell, [(a0, a1), (b0, b1)], depth,
                             lambda lo, hi, d: self._products(lo, hi, d, a0, a1, b0, b1))

    def _products(self, lo, hi, d, a0, a1, b0, b1):
        """*'s interval view: the least and greatest of the four products, 0 * inf
        read as 0. A side whose two ends are one value (the same name, or two
        equal constants) gives each product twice, later in the same order:
        written once (min and max keep the first of equals, so the same)."""
        products = []
        for x in (a0,) if self._same(a0, a1) else (a0, a1):
            for y in (b0,) if self._same(b0, b1) else (b0, b1):
                p = self.fresh("p")
                self.line(d, f"{p} = {x} * {y}")
                self.line(d, f"if {p} != {p}: {p} = 0")
                products.append(p)
        if len(products) == 1:
            self.line(d, f"{lo} = {hi} = {products[0]}")
            return
        first, rest = products[0], products[1:]  # min() and max() written out (operators._mul)
        self.line(d, f"{lo} = {hi} = {first}")
        for p in rest:
            self.line(d, f"if {p} < {lo}: {lo} = {p}")
            self.line(d, f"elif {p} > {hi}: {hi} = {p}")

    def _same(self, x: str, y: str) -> bool:
        """Whether two names hold the same value: one name, or two constants
        of one type (int or float) and the same text (-0.0 is not 0.0)."""
        if x == y:
            return True
        settled = self._settled(x, y)
        if settled is None:
            return False
        u, v = settled
        return type(u) is type(v) and type(u) in (int, float) and repr(u) == repr(v)

    def _op_if(self, cell, depth):
        """Expr._range's `if`: the branch the condition decides, both where it
        does not (then their hull), UNKNOWN where the condition is. Each branch
        is written once: `then` is read unless the condition is surely false,
        `other` unless it is surely true. A condition settled when the level
        is linked (two constants) writes only the branch it takes (or both,
        unconditionally, for the hull); one read as a single value (a bool
        table's level) is an if/else."""
        test, then, other = cell.args
        t0, t1 = self.emit(test, depth)
        settled = self._settled(t0, t1)
        if settled is not None:  # the test's range is a constant: its branch only
            if settled[0]:
                return self.emit(then, depth)
            if not settled[1]:
                return self.emit(other, depth)
        lo, hi = self.fresh("lo"), self.fresh("hi")
        if t0 == t1 and not self.maybe_unknown(test):  # one value: one branch or the other
            self.line(depth, f"if {t0}:")
            a0, a1 = self.emit(then, depth + 1)
            self.line(depth + 1, f"{lo} = {a0}")
            self.line(depth + 1, f"{hi} = {a1}")
            self.line(depth, "else:")
            b0, b1 = self.emit(other, depth + 1)
            self.line(depth + 1, f"{lo} = {b0}")
            self.line(depth + 1, f"{hi} = {b1}")
            return lo, hi
        if self.maybe_unknown(test):
            self.line(depth, f"if {t0} is None:")
            self.line(depth + 1, f"{lo} = {hi} = None")
            self.line(depth, "else:")
            depth += 1
        self.line(depth, f"if {t0} or {t1}:")
        self.line(depth + 1, "pass")
        a0, a1 = self.emit(then, depth + 1)
        self.line(depth, f"if not {t0}:")
        self.line(depth + 1, "pass")
        b0, b1 = self.emit(other, depth + 1)
        self.line(depth, f"if {t0}:")
        self.line(depth + 1, f"{lo} = {a0}")
        self.line(depth + 1, f"{hi} = {a1}")
        self.line(depth, f"elif not {t1}:")
        self.line(depth + 1, f"{lo} = {b0}")
        self.line(depth + 1, f"{hi} = {b1}")
        self.line(depth, "else:")
        unknown = [n for n, c in ((a0, then), (b0, other)) if self.maybe_unknown(c)]
        inner = depth + 1
        if unknown:
            self.line(inner, f"if {' is None or '.join(unknown)} is None:")
            self.line(inner + 1, f"{lo} = {hi} = None")
            self.line(inner, "else:")
            inner += 1
        self.line(inner, f"{lo} = {b0} if {b0} < {a0} else {a0}")  # min(), max() written out
        self.line(inner, f"{hi} = {b1} if {b1} > {a1} else {a1}")
        return lo, hi

    def _settled(self, t0: str, t1: str):
        """The values of a range written as two constants (else None)."""
        if t0[0] == "c" and t0[1:].isdigit() and t1[0] == "c" and t1[1:].isdigit():
            return self.consts[int(t0[1:])], self.consts[int(t1[1:])]
        return None

    def _called(self, cell, depth):
        """A smaller expression, through its memo (as Expr.bound reads it, inline):
        its range where none of its options is set yet, read now, is a constant."""
        j = bisect.bisect_left(cell._places, self.k)
        lo, hi = self.fresh("lo"), self.fresh("hi")
        if j == 0:
            found = cell.bound(self.k, [0] * (max(cell._places, default=0) + 1))
            if found is None:
                return "None", "None"
            return self.const(found[0]), self.const(found[1])
        r, key = self.fresh("r"), self.fresh("key")
        self.hoisted_reads += self._out is self.pre
        if cell._memo is not None and not self.maybe_unknown(cell):
            # a range is a pair (never falsy): a miss is the memo's None, filled by
            # _missed (j bound), one line where a range may be UNKNOWN (None) takes four
            memo = self.const(cell._memo)
            self.line(depth, f"{key} = {self.const(cell._keys[j])}(idx)")
            self.line(depth, f"{lo}, {hi} = {memo}.get({key}) or "
                             f"{self.const(partial(cell._missed, j))}(k, idx, {key}, {memo})")
            return lo, hi
        if cell._memo is None:
            self.line(depth, f"{r} = {self.const(cell)}.bound(k, idx)")
        else:
            # the memo's key as Expr.bound makes it: its getter of the set places
            self.line(depth, f"{key} = {self.const(cell._keys[j])}(idx)")
            memo = self.const(cell._memo)
            self.line(depth, f"{r} = {memo}.get({key}, _MISS)")
            self.line(depth, f"if {r} is _MISS: {r} = {self.const(cell._missed)}("
                             f"{self.const(j)}, k, idx, {key}, {memo})")
        if self.maybe_unknown(cell):
            self.line(depth, f"{lo}, {hi} = ({r} if {r} is not None else (None, None))")
        else:
            self.line(depth, f"{lo}, {hi} = {r}")
        return lo, hi

    def _op_div(self, cell, depth):
        (a0, a1), (b0, b1) = self._args(cell, depth)

        def body(lo, hi, d):  # /'s interval view: unbounded where the divisor may be 0 or infinite
            finite = " and ".join(f"(not isinstance({x}, float) or {x} - {x} == 0)"
                                  for x in (b0, b1))
            self.line(d, f"if {b0} <= 0 <= {b1} or not ({finite}):")
            self.line(d + 1, f"{lo} = -_inf")
            self.line(d + 1, f"{hi} = _inf")
            self.line(d, "else:")
            q0 = self.fresh("q")
            self.line(d + 1, f"{q0} = 1 / {b1}")
            q1 = q0 if self._same(b0, b1) else self.fresh("q")
            if q1 != q0:
                self.line(d + 1, f"{q1} = 1 / {b0}")
            self._products(lo, hi, d + 1, a0, a1, q0, q1)
        return self._guarded(cell, [(a0, a1), (b0, b1)], depth, body)

    def _generic(self, cell, depth):
        args = self._args(cell, depth)
        ranges = ", ".join(f"(None if {a0} is None else ({a0}, {a1}))"
                           if self.maybe_unknown(c) else f"({a0}, {a1})"
                           for (a0, a1), c in zip(args, cell.args))
        r = self.fresh("r")
        op, exact = self.const(cell.op), self.const(cell.exact)
        self.line(depth, f"{r} = interval({op}, [{ranges}], {exact})")
        lo, hi = self.fresh("lo"), self.fresh("hi")
        self.line(depth, f"{lo}, {hi} = ({r} if {r} is not None else (None, None))")
        return lo, hi


def _getter(writer, places) -> str:
    """Code for a key of idx's values at `places` (a hoisted block's prefix):
    one C call (operator.itemgetter) for two places or more."""
    if not places:
        return "()"
    if len(places) == 1:
        return f"idx[{writer.const(places[0])}]"
    return f"{writer.const(operator.itemgetter(*places))}(idx)"


# the writer of each operator program/operators.py marks inline: its interval
# view as straight-line code (the same float operations on the same operands)
_WRITERS = {name: getattr(_Writer, "_op_" + OPERATORS[name].inline) for name in INLINE}
