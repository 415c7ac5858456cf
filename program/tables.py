"""Per-query tables over value indices: the fast evaluator of the core.

The options a query leaves open are numbered 0..n-1 (the search order) and
their values 0..d-1. Every IR node whose open options span at most LIMIT value
combinations becomes a table over those indices, built once per query with
numpy; a larger node stays an expression over tables. Arithmetic that is smooth
(+ - * / min max abs) is tabled in float64; comparisons, ceil, floor and
modulo, and everything below them, are tabled in exact Fractions, so that no
rule, rounding or divisibility test rests on a rounding error. Decisions taken
on floats are confirmed by the exact evaluator (program/evaluate.py).

A cell answers two questions: its value at a full assignment, and the range of
values it can still take when only the first k options of the order are set.
"""

from __future__ import annotations

import bisect
import heapq
import math
import operator
from fractions import Fraction
from typing import Any

import numpy as np

from kbsolve.dsl import ir
from kbsolve.dsl.types import NUM
from kbsolve.program.operators import BOOL_RESULT, FRAGILE, UNKNOWN, interval, interval_of
from kbsolve.program.operators import SCALAR as _SCALAR
from kbsolve.program.operators import VECTOR as _VECTOR
from kbsolve.program.program import kept, reads, summed_terms

LIMIT = 1 << 15  # cells of a float table
EXACT_LIMIT = 1 << 12  # cells of a table of Fractions
_MISS = object()


def _no_places(idx):
    return ()


class Table:
    """Values over the open options `deps` (ascending axes), row-major. For a
    search, prepare() lays the table out in the search's order of options."""

    __slots__ = ("deps", "sizes", "array", "_values", "kind", "exact", "strides", "_levels",
                 "_search_deps", "_full", "need", "_floats", "_prepared")

    def __init__(self, deps: tuple[int, ...], sizes: tuple[int, ...], array, kind: str,
                 exact: bool):
        self.deps, self.sizes, self.array, self.kind, self.exact = deps, sizes, array, kind, exact
        self._values = None
        self.strides = _strides(sizes) if len(sizes) > 1 else (1,) * len(sizes)
        self._levels = None
        self._search_deps = ()
        self.need = "both"  # or "low" / "high": the side of the ranges a search reads
        self._floats = None
        self._prepared: list = []  # [perm, masks, places, full, levels], latest last

    def floats(self):
        """The array in float64 (made on first use; the array itself when it is)."""
        if self._floats is None:
            self._floats = np.asarray(self.array, dtype=float)
        return self._floats

    @property
    def values(self) -> list:
        """The table flat, as Python values (made on first use)."""
        if self._values is None:
            self._values = self.array.ravel().tolist()
        return self._values

    def value(self, idx: list[int]):
        at = 0
        for axis, stride in zip(self.deps, self.strides):
            at += idx[axis] * stride
        return self.values[at]

    def prepare(self, position: list[int], allowed: list) -> None:
        """Ranges for bound(): the table's axes in search order (`position`:
        axis -> place in the order), over the allowed values (a mask per axis)."""
        perm = sorted(range(len(self.deps)), key=lambda i: position[self.deps[i]])
        places = tuple(position[self.deps[i]] for i in perm)
        masks = [allowed[place] for place in places]
        if self._reuse(perm, masks, places):
            return
        self._full = [None, perm, masks, _MISS]  # laid out on first use (_laid_out, _boxed)
        self._levels = [None] * (len(places) + 1)
        self._search_deps = places
        self._keep(perm, masks)

    def _laid_out(self) -> tuple:
        """The table in search order, with the values the masks leave out
        hidden (+inf on the low side, -inf on the high one), made when a
        level is first built: most tables of a narrowed or short search never
        build one. Kept in the preparation's list (shared with _prepared).
        A num table read on one side only (`need`) hides that side alone and
        reads it as both: the two differ only at values left out, which no
        search sets and no reader of that one side reads on the other."""
        full = self._full
        if full[0] is None:
            boxed = self._boxed()
            if boxed is not None:  # mostly hidden: the allowed cells set into the fills
                full[0] = _unboxed(boxed, len(full[2]), self._fills())
                return full[0]
            _, perm, masks, _ = full
            low = self.array.astype(np.int8) if self.kind == "bool" else self.array
            low = np.transpose(low, perm) if perm != sorted(perm) else low
            left_out = _left_out(masks)
            if not left_out:
                high = low
            elif self.kind == "num" and self.need != "both":  # one side, both ends
                low = high = _hidden(low, left_out, np.inf if self.need == "low" else -np.inf)
            elif self.kind == "num":
                low, high = _hidden(low, left_out, np.inf), _hidden(low, left_out, -np.inf)
            else:
                low, high = _hidden(low, left_out, 1), _hidden(low, left_out, 0)
            full[0] = (low, high)
        return full[0]

    def _reuse(self, perm, masks, places) -> bool:
        """Set the layout of an earlier preparation with the same order of this
        table's axes and the same masks (the same objects): its levels are the
        same reductions, only their places may differ (a search that changes
        its order and changes it back, as the optimisation and the
        explanations' narrowed searches do, rebuilds nothing)."""
        alike = [entry for entry in reversed(self._prepared) if entry[0] == perm and
                 all(a is b for a, b in zip(entry[1], masks))]
        if not alike:
            return False
        entry = next((e for e in alike if e[2] == places), alike[0])
        self._full = entry[3]
        if entry[2] == places:
            self._levels = entry[4]
        else:  # the same arrays at other places: each built level re-placed
            self._levels = [None if level is None else
                            (tuple(zip(places, (s for _, s in level[0]))), *level[1:])
                            for level in entry[4]]
        self._search_deps = places
        if entry[2] != places:
            self._keep(perm, masks)
        return True

    def _keep(self, perm, masks) -> None:
        if len(self._prepared) >= PREPARED_KEPT:
            del self._prepared[0]
        self._prepared.append([perm, masks, self._search_deps, self._full, self._levels])

    def _level(self, j: int):
        """(strides, low, high) over the first j search-ordered axes, built on
        first use (most levels of most tables are never read) from the allowed
        cells (_box_read) or else from the nearest level below it. Small levels
        become lists (faster to index); large ones stay flat arrays, read with
        .item()."""
        boxed = self._boxed()
        if boxed is not None and j:
            level = self._levels[j] = self._box_read(boxed, j)
            return level
        if boxed is not None:
            low, high = self._box_level(boxed)
        else:
            above = j + 1
            while above < len(self._levels) and self._levels[above] is None:
                above += 1
            low, high = self._laid_out() if above >= len(self._levels) - 1 or \
                self._levels[above] is None else self._levels[above][3]
        if boxed is None and j < low.ndim:
            low, high = self._sides(lambda: _reduced(np.fmin, low, j),
                                    lambda: _reduced(np.fmax, high, j))
            low, high = _array(low), (_array(high) if high is not low else None)
            high = low if high is None else high
        flat_low = _flat(low)
        flat_high = flat_low if high is low else _flat(high)
        pairs = tuple(zip(self._search_deps[:j], _strides(low.shape)))  # (place, stride)
        level = (pairs, flat_low, flat_high, (low, high), type(flat_low) is list)
        self._levels[j] = level
        return level

    def _sides(self, least, most) -> tuple:
        """(low, high) as the search reads the table (need): least() alone for the
        low side, most() alone for the high one, both where both are read."""
        if self.need == "low":
            low = high = least()
        elif self.need == "high":
            low = high = most()
        else:
            low, high = least(), most()
        return low, high

    def _fills(self) -> tuple:
        """The values _laid_out hides left-out cells with: (low side, high side)."""
        if self.kind == "bool":
            return 1, 0
        if self.need == "both":
            return np.inf, -np.inf
        fill = np.inf if self.need == "low" else -np.inf
        return fill, fill

    def _boxed(self):
        """The allowed cells alone (_box), found once per layout; None where
        levels are reduced from the whole layout."""
        full = self._full
        if full[3] is _MISS:
            full[3] = _box(self.array, self.kind, full[1], full[2])
        return full[3]

    def _box_read(self, boxed, j: int) -> tuple:
        """Level j >= 1 from the allowed cells, flat as _level makes it
        (_box_flat), without the level's arrays."""
        fill_low, fill_high = self._fills()
        if j == len(boxed[3]):  # the whole layout's sides, as _laid_out hides them
            flat_low = _box_flat(None, boxed, j, fill_low)
            flat_high = flat_low if fill_high == fill_low else _box_flat(None, boxed, j, fill_high)
        else:
            flat_low, flat_high = self._sides(lambda: _box_flat(np.fmin, boxed, j, fill_low),
                                              lambda: _box_flat(np.fmax, boxed, j, fill_high))
        pairs = tuple(zip(self._search_deps[:j], _strides(boxed[3][:j])))
        return pairs, flat_low, flat_high, None, type(flat_low) is list

    def _box_level(self, boxed) -> tuple:
        """Level 0's (low, high) arrays from the allowed cells (_box): the
        least (greatest) allowed cell, as _reduced's scalar made an array."""
        box = boxed[1]
        fill_low, fill_high = self._fills()
        low, high = self._sides(lambda: _box_least(np.fmin, box, fill_low),
                                lambda: _box_least(np.fmax, box, fill_high))
        if high is low:
            low = high = _array(low)
            return low, high
        return _array(low), _array(high)

    def bound(self, k: int, idx: list[int]):
        """(low, high) over every completion of the first k options of the
        search order; `idx` holds value indices by place in that order."""
        deps = self._search_deps
        if self.kind == "code":
            return UNKNOWN if any(a >= k for a in deps) else (self._at(idx),) * 2
        j = bisect.bisect_left(deps, k)
        pairs, low, high, _, listed = self._levels[j] or self._level(j)
        at = 0
        for place, stride in pairs:
            at += idx[place] * stride
        if listed:
            return low[at], high[at]
        return low.item(at), high.item(at)

    def reader(self, k: int):
        """What bound(k, ...) reads: (pairs, low, high, listed), the level built
        now, for callers that read it many times without a call; None where
        bound() itself must answer (tables of codes)."""
        if self.kind == "code":
            return None
        pairs, low, high, _, listed = self._level_at(k)
        return pairs, low, high, listed

    def _level_at(self, k: int):
        j = bisect.bisect_left(self._search_deps, k)
        return self._levels[j] or self._level(j)

    def _at(self, idx):
        pairs, low, _, _, listed = self._levels[-1] or self._level(len(self._search_deps))
        at = sum(idx[place] * stride for place, stride in pairs)
        return low[at] if listed else low.item(at)

    def spread(self, allowed: list) -> dict[int, float]:
        """Per axis: how far fixing it to its worst allowed value lifts the
        table's minimum (num tables): the definition solver/search.py's
        _allowed_spread reads off the allowed cells alone (its tests compare them)."""
        if self.kind != "num" or not self.deps:
            return {}
        array = self.floats()
        masks = [allowed[axis] for axis in self.deps]
        left_out = _left_out(masks)
        if not left_out:
            masked = array  # every value allowed: nothing to hide
        else:
            if not all(mask.any() for mask in masks):
                return {}
            masked = _hidden(array, left_out, np.inf)
        floor = float(masked.min())
        out = {}
        leading = masked  # the table reduced over the axes before i
        for i, axis in enumerate(self.deps):
            # the minimum per value of axis i: the axes before it are reduced one
            # by one, shared by every later axis; the axes after it as one
            # contiguous run per value (the same cells as min over the others)
            per_value = leading.reshape(self.sizes[i], -1).min(axis=1) \
                if leading.ndim > 1 else leading
            if i + 1 < len(self.deps):
                leading = leading.min(axis=0)
            if not masks[i].all():
                per_value = per_value[masks[i]]
            per_value = per_value[np.isfinite(per_value)]
            if per_value.size:
                out[axis] = float(per_value.max()) - floor
        return out


PREPARED_KEPT = 4  # a table's layouts kept for reuse (Table._reuse)
LINK_AFTER = 64  # reads of an expression's level before it is linked (program/link.py)
MEMO_TRIAL = 1024  # an expression's memo misses before it is judged


def may_be_unknown(cell) -> bool:
    """Whether a cell's range can be UNKNOWN (a table of codes', or an
    expression's built from one, Expr.may_be_unknown)."""
    return cell.kind == "code" if isinstance(cell, Table) else cell.may_be_unknown


def reader_of(cell, k: int) -> tuple:
    """(cell, level): what cell.bound(k, ...) reads, a Table's level built now so
    that it is read without a call; level None where bound() itself must answer
    (expressions, tables of codes)."""
    return cell, (cell.reader(k) if isinstance(cell, Table) else None)


def read_bounds(readers, k: int, idx: list[int]) -> list:
    """Each reader's (low, high) with the first k places of idx set."""
    out = []
    for cell, level in readers:
        if level is None:
            out.append(cell.bound(k, idx))
            continue
        pairs, low, high, listed = level
        at = 0
        for place, stride in pairs:
            at += idx[place] * stride
        out.append((low[at], high[at]) if listed else (low.item(at), high.item(at)))
    return out


# what an expression's stepped read does per argument (_arg_reader's first field)
_SETTLED, _LISTED, _FLAT, _MEMO, _BOUND = range(5)


def _arg_reader(cell, k: int) -> tuple:
    """How bound(k, ...) reads cell, found once per reading level (an
    argument's places are among its expression's, so its level depends on k
    only through the reader's): (_SETTLED, range) for a table's level of one
    cell, its (low, high) read now; (_LISTED or _FLAT, pairs, low, high) for a
    table's level read from lists or with .item(); (_MEMO, cell, j, key) for
    an expression, its memo level and key as bound() finds them; (_BOUND,
    cell) where bound() itself answers (tables of codes)."""
    cell, level = reader_of(cell, k)
    if level is not None:
        pairs, low, high, listed = level
        if not pairs:
            return _SETTLED, (low[0], high[0]) if listed else (low.item(0), high.item(0))
        return (_LISTED if listed else _FLAT), pairs, low, high
    if isinstance(cell, Expr):
        j = bisect.bisect_left(cell._places, k)
        return _MEMO, cell, j, cell._keys[j]
    return _BOUND, cell


def _args_read(readers, k: int, idx: list[int]) -> list:
    """read_bounds over _arg_reader's readers, an expression's memo read here
    (Expr.bound written out, as the search's tracker reads it)."""
    out = []
    for reader in readers:
        how = reader[0]
        if how == _SETTLED:
            out.append(reader[1])
        elif how == _MEMO:
            _, cell, j, key = reader
            memo = cell._memo
            if memo is None:
                out.append(cell.bound(k, idx))
                continue
            slot = key(idx)
            found = memo.get(slot, _MISS)
            if found is _MISS:
                found = cell._fill(j, k, idx, slot, memo)
            else:
                cell._hits += 1
            out.append(found)
        elif how == _BOUND:
            out.append(reader[1].bound(k, idx))
        else:
            _, pairs, low, high = reader
            at = 0
            for place, stride in pairs:
                at += idx[place] * stride
            out.append((low[at], high[at]) if how == _LISTED else (low.item(at), high.item(at)))
    return out


def _arg_read(reader: tuple, k: int, idx: list[int]):
    """One of _args_read's reads (written out: an `if`'s test and branches)."""
    how = reader[0]
    if how == _SETTLED:
        return reader[1]
    if how == _MEMO:
        _, cell, j, key = reader
        memo = cell._memo
        if memo is None:
            return cell.bound(k, idx)
        slot = key(idx)
        found = memo.get(slot, _MISS)
        if found is _MISS:
            return cell._fill(j, k, idx, slot, memo)
        cell._hits += 1
        return found
    if how == _BOUND:
        return reader[1].bound(k, idx)
    _, pairs, low, high = reader
    at = 0
    for place, stride in pairs:
        at += idx[place] * stride
    return (low[at], high[at]) if how == _LISTED else (low.item(at), high.item(at))


def _read(reader: tuple, k: int, idx: list[int]):
    """One reader's range, expressions walked (Expr._walked)."""
    return _walk(*reader, k, idx)


def _walk(cell, level, k: int, idx: list[int]):
    if isinstance(cell, Expr):
        return cell._walked(bisect.bisect_left(cell._places, k), k, idx)
    return read_bounds(((cell, level),), k, idx)[0]


def _places_of(cell) -> tuple:
    """The places in the search order of the options cell reads."""
    return cell._search_deps if isinstance(cell, Table) else cell._places


KEEP_MIN = 4  # reads of an expression's level that do not read its last place, worth keeping
KEEP_PREFIXES = 256  # prefixes kept per level (then forgotten, all at once)


class _KeptReads:
    """A stepped level's readers (non-`if`), split by whether they read the
    level's last place: the search reads a level with that place set to each
    value in turn (a node's children), and the others' ranges depend only on
    the places before it (a table's level reads only set places, an
    expression's memo is keyed by them), so they are read once per value of
    those places and kept (program/link.py hoists the same reads)."""

    __slots__ = ("prefix", "kept", "fixed", "varying", "order")

    def __init__(self, prefix, readers: list, fixed: list[int]):
        varying = [n for n in range(len(readers)) if n not in fixed]
        self.prefix = prefix  # the key of the places before the last (Expr._keys[j - 1])
        self.kept: dict = {}
        self.fixed = [readers[n] for n in fixed]
        self.varying = [readers[n] for n in varying]
        # the arguments' order from fixed + varying
        self.order = operator.itemgetter(*sorted(range(len(readers)),
                                                 key=(fixed + varying).__getitem__))

    def read(self, k: int, idx: list[int]):
        """The arguments' ranges, in their order."""
        key = self.prefix(idx)
        fixed = self.kept.get(key)
        if fixed is None:
            if len(self.kept) >= KEEP_PREFIXES:
                self.kept.clear()
            fixed = self.kept[key] = _args_read(self.fixed, k, idx)
        return self.order(fixed + _args_read(self.varying, k, idx))


class Expr:
    """An operation over cells too large to table together."""

    __slots__ = ("op", "args", "kind", "exact", "deps", "_places", "_memo", "_keys",
                 "_readers", "_hits", "_misses", "_linked", "_prepared", "may_be_unknown",
                 "_ranged")

    def __init__(self, op: str, args: list, kind: str, exact: bool):
        self.op, self.args, self.kind, self.exact = op, args, kind, exact
        self.deps = tuple(sorted(set().union(*[a.deps for a in args])))
        # whether its range can be UNKNOWN: an enum's, or built from one (found once)
        unknown_args = any(may_be_unknown(a) for a in args)
        self.may_be_unknown = (op == "if" or op not in BOOL_RESULT) and unknown_args
        self._ranged = interval_of(op, exact, unknown_args)  # interval(op, ...), resolved once
        self._places: tuple[int, ...] = ()
        self._memo: dict = {}
        self._keys: list = [_no_places]
        self._readers: list = [None]
        self._linked: list = [0]
        self._hits = self._misses = 0
        self._prepared: list = []  # [(places by dep, masks, deps by place), state], latest last

    def value(self, idx: list[int]):
        op, args = self.op, self.args
        if op == "if":
            return args[1].value(idx) if args[0].value(idx) else args[2].value(idx)
        if op == "and":
            return bool(args[0].value(idx)) and bool(args[1].value(idx))
        if op == "or":
            return bool(args[0].value(idx)) or bool(args[1].value(idx))
        if op == "implies":
            return (not args[0].value(idx)) or bool(args[1].value(idx))
        return _SCALAR[op](*[a.value(idx) for a in args])

    def bound(self, k: int, idx: list[int]):
        """Remembered by the values of the options it reads that are set (the
        memo is dropped once it proves useless: MEMO_TRIAL calls nearly all
        missed, as where the expression reads as many options as its readers)."""
        j = bisect.bisect_left(self._places, k)
        memo = self._memo
        if memo is None:  # _range's linked call written out
            linked = self._linked[j]
            return self._range(j, k, idx) if linked.__class__ is int else linked(k, idx)
        key = self._keys[j](idx)
        found = memo.get(key, _MISS)
        if found is _MISS:
            return self._fill(j, k, idx, key, memo)
        self._hits += 1
        return found

    def _fill(self, j: int, k: int, idx: list[int], key, memo: dict):
        """bound()'s memo miss (also read inline by the search's tracker)."""
        if len(memo) > 1 << 14:
            memo.clear()
        linked = self._linked[j]  # _range written out (one call less)
        if linked.__class__ is not int:
            found = memo[key] = linked(k, idx)
        elif linked < LINK_AFTER:
            self._linked[j] = linked + 1
            found = memo[key] = self._stepped(j, k, idx)
        else:
            found = memo[key] = self._range(j, k, idx)
        self._misses += 1
        if self._misses == MEMO_TRIAL and len(memo) >= MEMO_TRIAL:
            calls = self._misses + self._hits
            if self._misses * 8 >= calls * 7:
                self._memo = None
        return found

    def _missed(self, j: int, k: int, idx: list[int], key, memo: dict):
        """A memo miss of linked code (program/link.py reads the memo inline)."""
        if len(memo) > 1 << 14:
            memo.clear()
        linked = self._linked[j]
        found = memo[key] = self._range(j, k, idx) if linked.__class__ is int \
            else linked(k, idx)
        return found

    def _range(self, j: int, k: int, idx: list[int]):
        """The range over the args' ranges; an `if` reads only the branch its
        condition decides (what interval would return). A level read often
        (LINK_AFTER times) is linked into straight-line code (program/link.py:
        the args' levels depend on k only through j); until then its args are
        read one by one."""
        linked = self._linked[j]
        if linked.__class__ is int:
            if linked < LINK_AFTER:
                self._linked[j] = linked + 1
                return self._stepped(j, k, idx)
            from kbsolve.program.link import link
            linked = self._linked[j] = link(self, k)
        return linked(k, idx)

    def _stepped(self, j: int, k: int, idx: list[int]):
        readers = self._readers[j]
        if readers is None:
            readers = self._readers[j] = self._args_readers(j, k)
        if self.op == "if":  # the branch the test decides, else both
            test = _arg_read(readers[0], k, idx)
            if test is UNKNOWN:
                return UNKNOWN
            if test[0]:
                return _arg_read(readers[1] or self._branch(j, k, 1), k, idx)
            if not test[1]:
                return _arg_read(readers[2] or self._branch(j, k, 2), k, idx)
            return interval("if", [test, _arg_read(readers[1] or self._branch(j, k, 1), k, idx),
                                   _arg_read(readers[2] or self._branch(j, k, 2), k, idx)],
                            self.exact)
        if readers.__class__ is _KeptReads:
            return self._ranged(*readers.read(k, idx))
        return self._ranged(*_args_read(readers, k, idx))

    def _args_readers(self, j: int, k: int):
        """_arg_reader of each argument; an `if`'s branches (None) on first read:
        a branch its test never picks builds no table level. Where enough of
        them do not read the level's last place, a _KeptReads."""
        if self.op == "if":
            return [_arg_reader(self.args[0], k), None, None]
        readers = [_arg_reader(a, k) for a in self.args]
        if j == 0:
            return readers
        last = self._places[j - 1]
        fixed = [n for n, a in enumerate(self.args) if last not in _places_of(a)]
        if sum(readers[n][0] != _SETTLED for n in fixed) < KEEP_MIN:
            return readers
        return _KeptReads(self._keys[j - 1], readers, fixed)

    def _branch(self, j: int, k: int, n: int) -> tuple:
        reader = self._readers[j][n] = _arg_reader(self.args[n], k)
        return reader

    def _walked(self, j: int, k: int, idx: list[int]):
        """_range by walking the tree (the reference the linked code must equal)."""
        readers = [reader_of(a, k) for a in self.args]
        if self.op == "if":
            test = _read(readers[0], k, idx)
            if test is UNKNOWN:
                return UNKNOWN
            if test[0]:
                return _read(readers[1], k, idx)
            if not test[1]:
                return _read(readers[2], k, idx)
            return interval("if", [test, _read(readers[1], k, idx),
                                    _read(readers[2], k, idx)], self.exact)
        ranges = [_walk(cell, level, k, idx) for cell, level in readers]
        return interval(self.op, ranges, self.exact)

    def prepare(self, position, allowed) -> None:
        """Ranges for bound() in the search's order. An order and masks met
        before (the same places of every option it reads, the same mask
        objects) take back that preparation's memo and linked code: its tables
        are laid out as they were then (Table._reuse), so both still hold. The
        same order among its options at other places shares a memo
        (_alike_memo); its code is linked afresh (it reads the places)."""
        if self._prepared:  # the state left behind, for a later return to it
            self._prepared[-1][1] = (self._places, self._memo, self._keys, self._readers,
                                     self._linked, self._hits, self._misses)
        where = tuple(position[a] for a in self.deps)
        masks = [allowed[place] for place in where]
        for n, entry in enumerate(self._prepared):
            key = entry[0]
            if key[0] == where and all(a is b for a, b in zip(key[1], masks)):
                (self._places, self._memo, self._keys, self._readers, self._linked,
                 self._hits, self._misses) = entry[1]
                self._prepared.append(self._prepared.pop(n))  # the current one last
                return
        self._fresh(position)
        order = tuple(sorted(range(len(where)), key=where.__getitem__))
        alike = _alike_memo(self._prepared, order, masks)
        if alike is not None:
            self._memo = alike
        if len(self._prepared) >= PREPARED_KEPT:
            del self._prepared[0]
        self._prepared.append([(where, masks, order), None])

    def _fresh(self, position) -> None:
        self._places = tuple(sorted(position[a] for a in self.deps))
        self._memo = {}
        self._hits = self._misses = 0
        # the memo's key reads the values at the first j places (one C call): (),
        # one value, or a tuple of j, so no two levels' keys are equal (no j in it)
        self._keys = [_no_places] + [operator.itemgetter(*self._places[:j])
                                     for j in range(1, len(self._places) + 1)]
        self._readers = [None] * (len(self._places) + 1)
        self._linked = [0] * (len(self._places) + 1)

    def tables(self, found: dict) -> dict:
        for arg in self.args:
            if id(arg) not in found:
                found[id(arg)] = arg
                if isinstance(arg, Expr):
                    arg.tables(found)
        return found


def _alike_memo(prepared: list, order: tuple, masks: list):
    """The memo of an earlier preparation whose options are in the same order
    among themselves, with the same masks, at other places (the new order moved
    other options before, between or after them): a key of its
    memo, the values of the first j of those options in that order, means
    what it means now, and the range remembered for it is the same range
    (over the same masked values of the options not set). None if none."""
    for (_, kept, kept_order), state in reversed(prepared):
        if kept_order == order and state is not None and state[1] is not None and \
                all(a is b for a, b in zip(kept, masks)):
            return state[1]
    return None


class _Rules(list):
    """rule_tables' list, with the places of the rules reading each option and
    the masks masked() has made of them (many summands fold the same rules in
    over the same options; `kept_oks`: those over read-only rule arrays, kept
    across searches)."""

    by_axis: dict
    oks: dict
    kept_oks: dict | None


def rule_tables(rules: list, kept_oks: dict | None = None) -> list:
    """The rules masked() can fold in (tables over some option), each with its
    options as a set, and by option the places of the rules that read it: found
    once for the many cells a search masks. `kept_oks` (a dict kept per KB):
    where masks over kept (read-only) rule arrays are kept for later searches."""
    found = _Rules((rule, frozenset(rule.deps)) for rule in rules
                   if isinstance(rule, Table) and rule.deps)
    found.by_axis, found.oks, found.kept_oks = {}, {}, kept_oks
    for i, (_, options) in enumerate(found):
        for axis in options:
            found.by_axis.setdefault(axis, []).append(i)
    return found


KEPT_OK_CELLS = 1 << 22  # cells of the masks kept per KB (all dropped when more would be)


def masked(cell, rules: list, sizes: list[int], limit: int = LIMIT):
    """A num table that is +inf wherever a rule sharing its options fails: the
    same lower bounds over feasible plans, but tighter ones. Rules (as
    rule_tables gives them, in order) are folded in while the table stays
    within `limit` cells."""
    if not isinstance(cell, Table) or cell.kind != "num" or not cell.deps:
        return cell
    deps = set(cell.deps)
    size = math.prod([sizes[a] for a in deps])  # cells over deps, kept as deps grows
    chosen = []
    for rule, options in _sharing(rules, deps):
        extra = options - deps
        grown = size * math.prod(map(sizes.__getitem__, extra)) if extra else size
        if grown <= limit:
            deps.update(extra)
            size = grown
            chosen.append(rule)
    if not chosen:
        return cell
    axes = tuple(sorted(deps))
    shape = tuple(sizes[a] for a in axes)
    array = np.broadcast_to(_spread(cell, axes, shape, cell.exact), shape)
    ok = _ok_mask(rules, chosen, axes, shape)
    if cell.exact:
        array = array.astype(float)
    return Table(axes, shape, np.ascontiguousarray(np.where(ok, array, np.inf)), "num", False)


def _ok_mask(rules: list, chosen: list, axes: tuple, shape: tuple):
    """Where every chosen rule holds, over `axes`: made once per search for the
    same rules (by identity) and, where every rule's array is a kept read-only
    one, once per KB for the same arrays (by identity, held by the entry, so an
    id is never another array's) over the same axes and shape."""
    oks = getattr(rules, "oks", None)  # the masks met before, by the rules folded in
    kept_oks = getattr(rules, "kept_oks", None)
    if kept_oks is not None and all(not rule.array.flags.writeable for rule in chosen):
        key = (axes, shape, tuple((id(rule.array), rule.deps) for rule in chosen))
        found = kept_oks.get(key)
        if found is not None:
            return found[1]
        ok = _and_rules(chosen, axes, shape)
        _keep_within(kept_oks, key, ([rule.array for rule in chosen], ok), ok.size,
                     KEPT_OK_CELLS)
        return ok
    key = (axes, tuple(id(rule) for rule in chosen))
    ok = None if oks is None else oks.get(key)
    if ok is None:
        ok = _and_rules(chosen, axes, shape)
        if oks is not None:
            oks[key] = ok
    return ok


def _keep_within(store: dict, key, value, cells: int, limit: int) -> bool:
    """store[key] = value, counting `cells` against `limit` under store["cells"]; past
    the limit everything kept before is dropped first (False then)."""
    total = store.get("cells", 0) + cells
    within = total <= limit
    if not within:
        store.clear()
        total = cells
    store["cells"] = total
    store[key] = value
    return within


def _and_rules(chosen: list, axes: tuple, shape: tuple):
    ok = np.ones(shape, dtype=bool)
    alike: dict[tuple, Any] = {}  # rules over the same options, joined at their size
    for rule in chosen:
        joined = alike.get(rule.deps)
        alike[rule.deps] = rule.array if joined is None else joined & rule.array
    for deps_, joined in alike.items():
        _and_into(ok, joined, [axis in deps_ for axis in axes])
    ok.flags.writeable = False
    return ok

AND_RUN = 64  # cells of the trailing run _and_into lays a rule's mask out over


def _and_into(ok, part, spans: list[bool]) -> None:
    """ok &= part, part over the axes of ok that `spans` marks. numpy walks a
    broadcast operand one innermost run at a time, and a part over some
    trailing axes but not all gives runs of a few cells (20k cells in runs of
    2: ~40x slower than one long run), so such a part is first copied out over
    the trailing axes that make a run of AND_RUN cells or more (a small copy).
    The same booleans are and-ed, so the same mask."""
    shape = ok.shape
    start, run = len(shape), 1
    while start > 0 and run < AND_RUN:
        start -= 1
        run *= shape[start]
    view = part.reshape([size if spanned else 1 for size, spanned in zip(shape, spans)])
    tail = spans[start:]
    if any(tail) and not all(tail):
        view = np.ascontiguousarray(np.broadcast_to(
            view, [size if spanned or i >= start else 1
                   for i, (size, spanned) in enumerate(zip(shape, spans))]))
    np.logical_and(ok, view, out=ok)


class Tables:
    """The cells of one problem, for an order of its open options."""

    def __init__(self, problem, order: list[str]):
        self.problem = problem
        self.order = order
        self.axis = {key: i for i, key in enumerate(order)}
        self.sizes = [len(problem.choices[key]) for key in order]
        # codes are numbered once per KB (only their equality is ever read), so that a
        # table of codes means the same in every query (the shared tables below)
        self.codes: dict[str, int] = kept(problem.kb, "codes")
        self._cells: dict[tuple[int, bool], tuple[Any, Any]] = {}
        self._shared = kept(problem.kb, "tables")  # see _shared_build
        self._parts: dict = {}  # option key or fact path -> its interned part of a key
        self._depth = 0  # > 0 while a shared build is under way
        self._quiet = False  # True inside cell()'s errstate (combined enters none of its own)
        self._lets: dict[tuple[str, bool], Any] = {}
        self._keep: list = []  # synthetic nodes, kept alive so that their ids stay unique
        self._constants = kept(problem.kb, "constants")  # Const nodes' tables, once per KB
        self._options: dict[tuple[str, bool], tuple] = {}  # (key, exact) -> (array, kind)

    # ---- building
    def cell(self, node: ir.Node, exact: bool = False):
        key = (id(node), exact)
        found = self._cells.get(key)
        if found is None or found[0] is not node:
            if self._quiet:
                built = self._build(node, exact) if self._depth else \
                    self._shared_build(node, exact)
            else:  # the outermost build: numpy's float warnings off once for all of it
                self._quiet = True
                try:
                    with np.errstate(all="ignore"):
                        built = self._shared_build(node, exact)
                finally:
                    self._quiet = False
            found = self._cells[key] = (node, built)
        return found[1]

    def _shared_build(self, node: ir.Node, exact: bool):
        """A formula's cell (one a caller asks for, or a let's body), its table
        kept per KB by what it is built from: the node, the framework, each option
        it reads (open: its axis and values; else its value) and each fact it
        reads (through lets and memory sums). A later query (or a hardware fix's
        problem, or the Z3 compiler's tables) that builds the same node from the
        same inputs takes the array instead of building it again: the same
        computation of the same inputs, so the same array (never written: kept
        read-only). The Table itself is new (its layouts are a search's). An
        expression (a cell too large to table) is not kept: its args are built,
        and the lets among them are kept. Constants have their own tables per KB;
        options and facts are one array each, made at once."""
        if node.__class__ is not ir.Op and not isinstance(node, (ir.LetRef, ir.MemorySum)):
            return self._build(node, exact)
        key = self._shared_key(node, exact)
        if key is not None:
            found = self._shared.get(key)
            if found is not None and found[0] is node:
                return Table(*found[1])
        self._depth += 1
        try:
            cell = self._build(node, exact)
        finally:
            self._depth -= 1
        if key is not None and cell.__class__ is Table:
            cell.array.flags.writeable = False
            if not _keep_within(self._shared, key, (node, (cell.deps, cell.sizes, cell.array,
                                                           cell.kind, cell.exact)),
                                cell.array.size, SHARED_CELLS):
                kept(self.problem.kb, "table_inputs").clear()  # nodes made for one query too
        return cell

    def _shared_key(self, node: ir.Node, exact: bool):
        """_shared_build's key for the node; None where some input is missing
        (the build says what, or fails as it always has)."""
        options, facts = _inputs(self.problem.kb, node)
        parts = self._parts
        key = [id(node), exact, self.problem.framework]
        for name in options:
            part = parts.get(name)
            if part is None:
                part = parts[name] = self._option_part(name)
            key.append(part)
        for path in facts:
            part = parts.get(path)
            if part is None:
                part = parts[path] = self._fact_part(path)
            key.append(part)
        return None if -1 in key else tuple(key)

    def _option_part(self, name: str) -> int:
        p = self.problem
        if name in self.axis:
            part = ("open", self.axis[name], tuple((type(v), v) for v in p.choices[name]))
        elif name in p.fixed:
            part = ("fixed", type(p.fixed[name]), p.fixed[name])
        elif name in p.kb.options:
            default = p.kb.options[name].default
            part = ("fixed", type(default), default)
        else:
            return -1
        return _interned(p.kb, part)

    def _fact_part(self, path: str) -> int:
        value = self.problem.facts.get(path)
        if value is None:
            return -1
        return _interned(self.problem.kb, ("fact", type(value), value))

    def synthetic(self, node: ir.Node, exact: bool = False):
        """A node made for this query (kept alive so that its id stays unique):
        built here, its args through cell() (those are kept across queries)."""
        self._keep.append(node)
        key = (id(node), exact)
        found = self._cells.get(key)
        if found is None or found[0] is not node:
            found = self._cells[key] = (node, self._build(node, exact))
        return found[1]

    def divided(self, top: ir.Node, bottom: ir.Node):
        return self.synthetic(ir.Op("/", (top, bottom), NUM, top.span))

    def code(self, text: str) -> int:
        return self.codes.setdefault(text, len(self.codes))

    def constant(self, value, exact: bool) -> Table:
        if isinstance(value, bool):
            array, kind = np.array(value), "bool"
        elif isinstance(value, str):
            array, kind = np.array(self.code(value), dtype=np.int64), "code"
        elif exact:
            array, kind = np.empty((), dtype=object), "num"
            array[()] = Fraction(value)
        else:
            array, kind = np.array(float(value)), "num"
        return Table((), (), array, kind, exact)

    def _build(self, node: ir.Node, exact: bool):
        if node.__class__ is ir.Op:  # the most common node first
            mode = exact or node.op in FRAGILE  # a fragile operation works on Fractions
            cell = self.cell
            return self.combine(node.op, [cell(a, mode) for a in node.args], _kind(node), mode)
        p = self.problem
        if isinstance(node, ir.Const):
            if isinstance(node.value, str):  # codes are numbered per query
                return self.constant(node.value, exact)
            key = (id(node), exact)
            found = self._constants.get(key)
            if found is None or found[0] is not node:
                found = self._constants[key] = (node, self.constant(node.value, exact))
            return found[1]
        if isinstance(node, ir.FactRef):
            return self.constant(p.evaluator.run(node, {}), exact)
        if isinstance(node, ir.OptionRef):
            return self._option(node.option, exact)
        if isinstance(node, ir.LetRef):  # a let's body: kept across queries
            body = p.kb.lets[node.let].expr
            found = self._cells.get((id(body), exact))
            if found is not None and found[0] is body:
                return found[1]
            found = self._cells[(id(body), exact)] = (body, self._shared_build(body, exact))
            return found[1]
        if isinstance(node, ir.MemorySum):
            parts = [self.cell(t.expr, exact)
                     for t in summed_terms(p.kb, node.framework, node.level)]
            return self.total(parts, exact)
        mode = exact or node.op in FRAGILE  # a fragile operation works on Fractions
        args = [self.cell(a, mode) for a in node.args]
        return self.combine(node.op, args, _kind(node), mode)

    def _option(self, key: str, exact: bool):
        p = self.problem
        if key not in self.axis:
            return self.constant(p.fixed[key] if key in p.fixed else p.kb.options[key].default,
                                 exact)
        axis = self.axis[key]
        found = self._options.get((key, exact))
        if found is None:
            found = self._options[(key, exact)] = self._values_of(key, exact)
        return Table((axis,), (self.sizes[axis],), *found, exact)

    def _values_of(self, key: str, exact: bool) -> tuple:
        """An open option's values as an array, and its kind: made once per query
        (each reference to the option is a table of its own over the same array;
        no table writes into its array)."""
        values = self.problem.choices[key]
        if all(isinstance(v, bool) for v in values):
            array, kind = np.array(values, dtype=bool), "bool"
        elif all(isinstance(v, str) for v in values):
            array, kind = np.array([self.code(v) for v in values], dtype=np.int64), "code"
        elif exact:
            array, kind = np.empty(len(values), dtype=object), "num"
            array[:] = [Fraction(v) for v in values]
        else:
            array, kind = np.array([float(v) for v in values]), "num"
        return array, kind

    def total(self, parts: list, exact: bool):
        if not parts:
            return self.constant(0, exact)
        result = parts[0]
        for part in parts[1:]:
            result = self.combine("+", [result, part], "num", exact)
        return result

    def combine(self, op: str, args: list, kind: str, exact: bool):
        """A table of op(args) when the args are tables small enough together."""
        for a in args:
            if a.deps or a.__class__ is not Table:
                break
        else:  # every arg a constant table: the same arrays as below, without the shapes
            return _constant_of(op, args, kind, exact, self._quiet)
        return self.combined(op, args, kind, exact)

    def combined(self, op: str, args: list, kind: str, exact: bool):
        """combine() by broadcasting over the args' options (any args)."""
        deps = tuple(sorted(set().union(*[a.deps for a in args])))
        size = math.prod(self.sizes[a] for a in deps)
        if all(isinstance(a, Table) for a in args) and \
                size <= (EXACT_LIMIT if exact or _exact_args(args) else LIMIT):
            shape = tuple(self.sizes[a] for a in deps)
            array = _applied(op, [_spread(a, deps, shape, exact) for a in args], self._quiet)
            if array.shape != shape:
                array = np.broadcast_to(array, shape)
            if kind == "num" and not exact and array.dtype == object:
                array = array.astype(float)
            elif kind == "bool":
                array = array.astype(bool)
            return Table(deps, shape, np.ascontiguousarray(array), kind, exact)
        if op == "+" and isinstance(args[0], Expr) and args[0].op == "sum":
            return Expr("sum", args[0].args + [args[1]], kind, exact)
        return Expr("sum" if op == "+" else op, list(args), kind, exact)


SHARED_CELLS = 1 << 22  # cells of the tables kept per KB across queries (all dropped when
# more would be kept: 32 MiB of floats at most)


def _interned(kb, part: tuple) -> int:
    """A small int per distinct part of a shared table's key (hashed once per
    query, not once per lookup: a Fraction hashes slowly)."""
    table = kept(kb, "table_parts")
    found = table.get(part)
    if found is None:
        found = table[part] = len(table)
    return found


def _inputs(kb, node: ir.Node) -> tuple[tuple, tuple]:
    """The options and facts a node's table is built from, sorted: through lets
    and memory sums (a sum's terms' facts too), once per KB."""
    memo = kept(kb, "table_inputs")
    found = memo.get(id(node))
    if found is None or found[0] is not node:
        read = reads(kb, node, sums=True)
        facts = set(reads(kb, node).facts)
        for summed in _sums(kb, read.sums):
            for term in summed_terms(kb, *summed):
                facts |= reads(kb, term.expr).facts
        found = memo[id(node)] = (node, (tuple(sorted(read.options)), tuple(sorted(facts))))
    return found[1]


def _sums(kb, sums) -> set:
    """The memory sums read, with those their terms read, transitively."""
    done: set = set()
    pending = list(sums)
    while pending:
        summed = pending.pop()
        if summed not in done:
            done.add(summed)
            for term in summed_terms(kb, *summed):
                pending += reads(kb, term.expr).sums
    return done


def _sharing(rules: list, deps: set):
    """The rules, in order, that share an option with `deps` as it stands when
    each is reached (masked() grows `deps` as it folds rules in): those of
    rule_tables' list are found through its places by option rather than by
    testing every rule."""
    by_axis = getattr(rules, "by_axis", None)
    if by_axis is None:
        for rule, options in rules:
            if not deps.isdisjoint(options):
                yield rule, options
        return
    pending = sorted({i for axis in deps for i in by_axis.get(axis, ())})
    seen = set(pending)
    heapq.heapify(pending)
    while pending:
        i = heapq.heappop(pending)
        known = set(deps)
        yield rules[i]
        for axis in deps - known:  # options the caller folded in: their later rules
            for j in by_axis.get(axis, ()):
                if j > i and j not in seen:
                    seen.add(j)
                    heapq.heappush(pending, j)


def _applied(op: str, arrays: list, quiet: bool):
    """The operator's vector view over the arrays, numpy's float warnings off
    (`quiet`: they are off already, as inside Tables.cell: entering numpy's
    errstate costs about as much as a small table's operation)."""
    if quiet:
        return np.asarray(_VECTOR[op](*arrays))
    with np.errstate(all="ignore"):
        return np.asarray(_VECTOR[op](*arrays))


def _constant_of(op: str, args: list, kind: str, exact: bool, quiet: bool = False) -> Table:
    """Tables.combine over tables of no option: each arg's array as _spread lays
    it out over no axes, the operator's vector view, the casts combine makes and
    its layout (ascontiguousarray makes one cell of a 0-d array), so that the
    table holds the same array combine's general path builds."""
    arrays = []
    for a in args:
        array = a.array
        if a.kind == "num":
            if a.exact and not exact:
                array = array.astype(float)
            elif exact and not a.exact:
                raise AssertionError("an exact table built from a float one")
        arrays.append(array.reshape(()))
    array = _applied(op, arrays, quiet)
    if kind == "num" and not exact and array.dtype == object:
        array = array.astype(float)
    elif kind == "bool":
        array = array.astype(bool)
    return Table((), (), array.reshape(1), kind, exact)


def allowed_mask(sizes, masks: list) -> np.ndarray:
    """The combinations whose every value is allowed (one mask per axis)."""
    mask = np.ones(sizes, dtype=bool)
    for i, axis_mask in enumerate(masks):
        shape = [1] * len(sizes)
        shape[i] = sizes[i]
        mask = mask & axis_mask.reshape(shape)
    return mask


def _left_out(masks: list) -> list:
    """(axis, its values not allowed) for each axis whose mask leaves some out."""
    return [(i, ~mask) for i, mask in enumerate(masks) if not mask.all()]


def _hidden(array, left_out: list, fill):
    """A copy of the array with `fill` wherever some axis's value is not
    allowed (np.where over allowed_mask's product, without building it): the
    values _left_out found set as slices, axis by axis."""
    out = array.copy()
    for i, outside in left_out:
        out[(slice(None),) * i + (outside,)] = fill
    return out


BOX_SHARE = 2  # a layout whose allowed cells are at most 1/BOX_SHARE of it is boxed


def _box(array, kind: str, perm: list, masks: list):
    """(kept, box, positions) for a float or bool table whose masks leave out
    most of its cells: per axis in search order the allowed values (`kept`),
    the cells at them alone in that order (`box`, bools as int8), and per
    level j the flat places of the box's first j axes in the level (filled
    on use). None where the layout is reduced whole: nothing or little left
    out, exact (object) or code tables, and a NaN or a -0.0 among the
    allowed cells (a min or max of them is then not one value's bits
    whatever cells and order numpy reduces them in)."""
    if kind not in ("num", "bool") or array.dtype.kind not in "fb" or not masks:
        return None
    kept = [mask.nonzero()[0] for mask in masks]  # (flatnonzero: a wrapper of it)
    cells, whole = math.prod(len(k) for k in kept), math.prod(m.size for m in masks)
    if cells == whole or cells * BOX_SHARE > whole:  # nothing or little left out
        return None
    by_axis = [None] * len(masks)
    for i, mask in enumerate(masks):
        by_axis[perm[i]] = mask
    box = allowed_cells(array, by_axis)
    box = np.ascontiguousarray(np.transpose(box, perm) if perm != sorted(perm) else box)
    if kind == "bool":
        box = box.astype(np.int8)
    elif np.isnan(box).any() or (np.signbit(box) & (box == 0)).any():
        return None
    return kept, box, [np.zeros(1, dtype=np.intp)], tuple(m.size for m in masks)


def allowed_cells(array, masks: list):
    """The cells of `array` at the allowed values alone: `masks` per axis of the
    array (None: every value allowed), the most selective axis cut first."""
    cut = [i for i, mask in enumerate(masks) if mask is not None and not mask.all()]
    for i in sorted(cut, key=lambda i: masks[i].sum() / masks[i].size):
        array = array.compress(masks[i], axis=i)
    return array


def _box_places(boxed, j: int):
    """The flat places, in level j (row-major over the first j axes), of the
    box's cells over those axes, in the box's row-major order."""
    kept, _, places, sizes = boxed
    while len(places) <= j:
        i = len(places) - 1
        places.append((places[i][:, None] * sizes[i] + kept[i][None, :]).ravel())
    return places[j]


def _box_least(ufunc, box, fill):
    """ufunc (np.fmin or np.fmax) over the whole layout hidden with `fill`, as
    _reduced gives it (a numpy scalar): over the allowed cells alone, as a
    fill never wins where an allowed cell is there; the fill where none is."""
    return box.dtype.type(fill) if box.size == 0 else ufunc.reduce(box, axis=None)


def _box_flat(ufunc, boxed, j: int, fill):
    """Level j >= 1 of the whole layout hidden with `fill`, as _flat reads it
    (the same Python values: tolist's), without that layout: each cell of the
    level reduces its allowed cells and the fills, and a fill never wins
    (+inf under fmin, -inf under fmax, 1 and 0 for bools) where an allowed
    cell is there; a cell with none is its fill. A list (the fills, the
    allowed cells set: not a Python value made per cell), or past LIST_LIMIT
    cells a flat array."""
    _, box, _, sizes = boxed
    size = math.prod(sizes[:j])
    part = (box if j == box.ndim else _reduced(ufunc, box, j)) if box.size else box
    if size > LIST_LIMIT:  # a flat array, read with .item() (np.full: no list of fills)
        flat = np.full(size, fill, dtype=box.dtype)
        if box.size:
            flat[_box_places(boxed, j)] = part.reshape(-1)
        return flat
    places, values = _box_places(boxed, j).tolist(), part.ravel().tolist()
    flat = [fill] * size
    for at, value in zip(places, values):
        flat[at] = value
    return flat


def _unboxed(boxed, n: int, fills: tuple) -> tuple:
    """The whole layout from the box: (low, high), each its fill where a value
    is left out and the table's cell elsewhere (_hidden's arrays; one array
    for both where the fills agree)."""
    _, box, _, sizes = boxed
    out = []
    for fill in dict.fromkeys(fills):
        whole = np.full(sizes, fill, dtype=box.dtype)
        if box.size:
            whole.reshape(-1)[_box_places(boxed, n)] = box.reshape(-1)
        out.append(whole)
    return (out[0], out[-1])


LIST_LIMIT = 2048  # levels up to this many cells are read as lists


def _array(value):
    """A reduction over every axis of an exact (object) table gives a bare
    Fraction; levels need arrays."""
    return value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object)


SHORT_RUN = 32  # trailing cells per level cell below which a level is reduced by columns


def _reduced(ufunc, array, j: int):
    """ufunc (np.fmin or np.fmax) reduced over every axis from j on. Where
    each cell of the level reduces a short run of cells and there are many
    runs, the runs are laid out as columns first: numpy reduces a short
    trailing axis one run at a time (8 cells a run over 32k cells: ~10x
    slower), a leading one a row at a time. The same cells are reduced, so
    the same minima and maxima (fmin and fmax leave nan out either way);
    object arrays keep numpy's own order of comparison."""
    rows, run = math.prod(array.shape[:j]), math.prod(array.shape[j:])
    if run > SHORT_RUN or rows < SHORT_RUN or array.dtype == object:
        return ufunc.reduce(array, axis=tuple(range(j, array.ndim)))
    return ufunc.reduce(array.reshape(rows, run).T.copy(), axis=0).reshape(array.shape[:j])


def _flat(array):
    flat = array.ravel()
    return flat.tolist() if flat.size <= LIST_LIMIT else flat


def _kind(node: ir.Node) -> str:
    kind = node.type.kind
    return "num" if kind == "num" else "bool" if kind == "bool" else "code"


def _exact_args(args) -> bool:
    return any(a.exact and a.kind == "num" and a.deps for a in args)


def _strides(sizes) -> tuple[int, ...]:
    out, step = [], 1
    for size in reversed(sizes):
        out.append(step)
        step *= size
    return tuple(reversed(out))


def _spread(table: Table, deps: tuple[int, ...], shape: tuple[int, ...], exact: bool):
    """The table's array reshaped to broadcast over `deps`."""
    array = table.array
    if table.kind == "num" and table.exact and not exact:
        array = array.astype(float)
    elif table.kind == "num" and exact and not table.exact:
        raise AssertionError("an exact table built from a float one")
    return array.reshape([shape[i] if axis in table.deps else 1
                          for i, axis in enumerate(deps)])
