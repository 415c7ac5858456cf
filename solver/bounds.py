"""Bounds per value, read once from a search's tables (issue 25 item 8).

An explanation asks, for many (option, value) pairs, whether any plan could have
that value. Two of its questions are answered here from the tables the search
already built, without a search:

- whether one rule alone rules a value out: the rule's table (exact: comparisons
  and everything below them are tabled in Fractions) over all of the rule's other
  options' values, reduced once per (rule, option);
- whether the GPU memory (or host RAM) alone rules it out: the least weighted sum
  of the search's memory cells over every completion with that value, inside the
  domains arc consistency left (each table's minimum per value of the option,
  computed once; an expression's range with everything open). The cells are the
  search's own rule-masked lower bounds, so this is the bound the search's
  narrowed feasibility run reads at its first node, or a weaker one.

A bound that proves a value impossible is what the search would have concluded
(floats prune only with the search's own tolerance); every other answer falls
back to the search.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kbsolve.program.operators import COMPARISONS, UNKNOWN, VECTOR, interval
from kbsolve.program.tables import Table, allowed_cells
from kbsolve.solver.search import TOLERANCE


class ValueBounds:
    """The per-value questions of one prepared search (its masks: search.allowed)."""

    def __init__(self, search):
        self.s = search
        self.cells = dict(search.rules)
        self._supports: dict[tuple[str, int], Any] = {}
        self._truths: dict[str, Any] = {}
        self._per_value: dict[tuple[int, int], tuple] = {}  # (id(table), axis) -> ranges
        self._masked: dict[int, tuple] = {}  # id(table) -> _masked's arrays, for its other axes
        self._open: dict[int, tuple] = {}  # id(cell) -> its range at the search's root

    # ---- one rule alone
    def rule_allows(self, name: str, key: str, value, others: list[str]) -> bool | None:
        """Whether some values of `others` (every one of their choices; the rest of
        the problem as fixed) meet the rule with key=value; None when the rule is not
        one table over exactly key and `others`."""
        cell = self.cells.get(name)
        s = self.s
        if cell is None or cell.kind != "bool":
            return None
        axis = s.tables.axis.get(key)
        if axis is None or axis not in cell.deps or \
                {s.keys[a] for a in cell.deps} != {key, *others}:
            return None
        index = s.p.choices[key].index(value)
        if isinstance(cell, Table) and s.prepare() and s.allowed[axis][index]:
            return True  # arc consistency kept it: a support among the allowed values
        found = self._supports.get((name, axis), _MISSING)
        if found is _MISSING:
            array = self._truths.get(name, _MISSING)
            if array is _MISSING:  # once per rule, for all of its options
                array = self._truths[name] = _truth(cell, s.tables.sizes)
            if array is not None:
                i = cell.deps.index(axis)
                rest = tuple(j for j in range(len(cell.deps)) if j != i)
                array = array.any(axis=rest) if rest else array
            found = self._supports[(name, axis)] = array
        if found is None:
            return None
        return bool(found[index])

    # ---- no plan at all, as the search's narrowed run would find at its first node
    def refuted(self, key: str, value) -> str | bool:
        """Whether no plan has key=value, read from ranges over the problem's domains
        with that value set: the name of a rule (or `when`) part that reads the option
        and is false on every completion ('rule:...', 'when:...'), else True where the
        budgets overflow (overflows), else False. These are the ranges the search's
        narrowed feasibility run (search._narrowed: the option placed first) reads at
        its only child, so that run would prune it at once."""
        s = self.s
        if not s.prepare():
            return False
        axis = s.tables.axis[key]
        index = s.p.choices[key].index(value)
        memo: dict = {}
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: nan, no information
            for name, cell in s.rules:
                if axis in cell.deps and not isinstance(cell, Table):  # tables: arc consistency
                    found = self._walk(cell, axis, index, memo)
                    if found is not UNKNOWN and not found[1]:
                        return name
            return self.overflows(key, value)

    # ---- the budgets alone
    def overflows(self, key: str, value) -> bool:
        """True when every plan with key=value, inside the problem's domains, needs
        more GPU memory (or host RAM) than the budget: the search would find none."""
        s = self.s
        if not s.prepare():
            return False
        axis = s.tables.axis[key]
        index = s.p.choices[key].index(value)
        memory = self._least(s.memory_terms, axis, index)
        if _over(memory, s.budget):
            return True
        return bool(s.host_terms) and _over(self._least(s.host_terms, axis, index),
                                            s.host_budget)

    def _least(self, terms: list, axis: int, index: int) -> float:
        total = 0.0
        memo: dict = {}  # sub-expressions shared by the terms, walked once
        for weight, slot in terms:
            found = self._walk(self.s.tracked[slot], axis, index, memo)
            if found is UNKNOWN:
                return -math.inf  # no information
            low, high = found
            part = weight * (low if weight > 0 else high)
            if part != part:
                return -math.inf  # no information
            total += part
        return total

    def _walk(self, cell, axis: int, index: int, memo: dict):
        """The cell's range over every completion with axis=index: a table's own
        least and greatest for that value; an expression over such ranges by the
        interval arithmetic the search uses (program/tables.interval, an `if`
        reading only the branch its condition decides), which is the range the
        search reads with that option set first, or a wider one."""
        if axis not in cell.deps:
            return self._root(cell)
        if isinstance(cell, Table):
            if cell.kind == "code":
                return (cell.values[index],) * 2 if cell.deps == (axis,) else UNKNOWN
            found = self._per_value.get((id(cell), axis))
            if found is None:
                arrays = self._masked.get(id(cell))
                if arrays is None:
                    arrays = self._masked[id(cell)] = _masked(cell, self.s.allowed)
                found = self._per_value[(id(cell), axis)] = _per_value(cell, axis, arrays)
            return found[0][index], found[1][index]
        found = memo.get(id(cell), _MISSING)
        if found is not _MISSING:
            return found
        args = cell.args
        if cell.op == "if":
            test = self._walk(args[0], axis, index, memo)
            if test is UNKNOWN:
                found = UNKNOWN
            elif test[0]:
                found = self._walk(args[1], axis, index, memo)
            elif not test[1]:
                found = self._walk(args[2], axis, index, memo)
            else:
                found = interval("if", [test, self._walk(args[1], axis, index, memo),
                                         self._walk(args[2], axis, index, memo)], cell.exact)
        else:
            found = interval(cell.op, [self._walk(a, axis, index, memo) for a in args],
                              cell.exact)
        memo[id(cell)] = found
        return found

    def _root(self, cell):
        """The search's own range with no option set (its root)."""
        found = self._open.get(id(cell))
        if found is None:
            found = cell.bound(0, [0] * len(self.s.keys))
            self._open[id(cell)] = found
        return found


_MISSING = object()
TRUTH_LIMIT = 1 << 16  # combinations of a rule expression's options tabled for its supports
_CONNECTIVES = ("and", "or", "not", "implies")  # conditions of conditions


def _truth(cell, sizes: list[int]):
    """A boolean cell as an array over its deps (ascending axes), exact: a table's
    own array, or an expression of comparisons and connectives over exact tables
    broadcast together (at most TRUTH_LIMIT combinations); None otherwise."""
    if isinstance(cell, Table):
        return np.asarray(cell.array, dtype=bool) if cell.kind == "bool" else None
    if math.prod(sizes[a] for a in cell.deps) > TRUTH_LIMIT or \
            cell.op not in COMPARISONS and cell.op not in _CONNECTIVES:
        return None
    args = []
    for arg in cell.args:
        if cell.op in COMPARISONS:  # numbers, exact on both sides
            if not isinstance(arg, Table) or arg.kind != "num" or not arg.exact:
                return None
            array = arg.array
        else:
            array = _truth(arg, sizes)
            if array is None:
                return None
        args.append(np.asarray(array).reshape(
            [sizes[a] if a in arg.deps else 1 for a in cell.deps]))
    out = VECTOR[cell.op](*args)  # its vector view (program/operators.py)
    shape = tuple(sizes[a] for a in cell.deps)
    return np.broadcast_to(np.asarray(out, dtype=bool), shape)


def _over(least: float, budget: float) -> bool:
    """The search's own test (its _fits, with its tolerance) on a lower bound."""
    return least > budget * (1 + TOLERANCE)


def _masked(cell: Table, allowed: list):
    """The table's allowed box, as the search lays it out (Table.prepare): its
    combinations whose every value is allowed (a boolean table as 0/1), and per axis
    its mask of allowed values (None where all are)."""
    kept = [None if m.all() else m for m in (allowed[a] for a in cell.deps)]
    array = allowed_cells(cell.array, kept)
    return (array.astype(np.int8) if cell.kind == "bool" else array), kept


def _per_value(cell: Table, axis: int, masked: tuple) -> tuple[list, list]:
    """(least, greatest) of the table for each value of `axis`, over the allowed
    combinations of its other axes (`masked`: _masked's box, made once a table); a
    value with none is (inf, -inf), a boolean one (1, 0). fmin and fmax, as the
    search's levels: a nan says nothing (an all-nan value with some combination left
    out is (inf, -inf), as the search's filled layout reads it)."""
    box, kept = masked
    i = cell.deps.index(axis)
    size = cell.sizes[i]
    empty = (np.inf, -np.inf) if cell.kind == "num" else (1, 0)
    if box.size == 0:
        return [empty[0]] * size, [empty[1]] * size
    rest = tuple(j for j in range(len(cell.deps)) if j != i)
    low = high = box
    if rest:
        low, high = np.fmin.reduce(box, axis=rest), np.fmax.reduce(box, axis=rest)
    low, high = np.asarray(low).tolist(), np.asarray(high).tolist()
    if rest and box.dtype.kind == "f" and any(kept[j] is not None for j in rest):
        low = [math.inf if x != x else x for x in low]  # a few values: no numpy calls
        high = [-math.inf if x != x else x for x in high]
    if kept[i] is None:
        return low, high
    lows, highs = [empty[0]] * size, [empty[1]] * size
    for at, index in enumerate(np.flatnonzero(kept[i]).tolist()):
        lows[index], highs[index] = low[at], high[at]
    return lows, highs
