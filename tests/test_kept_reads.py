"""An expression level's stepped reads with the ranges of the arguments that
do not read its last place kept per prefix (tables._KeptReads) equal every
argument read afresh, in the arguments' order; and an expression's interval
view resolved once (operators.interval_of) equals interval()."""

from __future__ import annotations

from kbsolve import api
from kbsolve.program import operators as O
from kbsolve.program import tables as T
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(type(x) is type(y) and (x == y or x != x and y != y) for x, y in zip(a, b))


def test_kept_reads_are_the_fresh_reads(monkeypatch):
    read = T._KeptReads.read
    seen = {"calls": 0, "kept": 0, "differ": []}

    def checked(self, k, idx):
        had = self.prefix(idx) in self.kept
        found = read(self, k, idx)
        fresh = T._args_read(list(self.order(self.fixed + self.varying)), k, idx)
        seen["calls"] += 1
        seen["kept"] += had
        if len(found) != len(fresh) or not all(map(_same, found, fresh)):
            seen["differ"].append((k, found, fresh))
        return found

    problem = resolve(api.load_kb(), Query(gpus="8xA100", model="qwen3-8b")).problem
    monkeypatch.setattr(T._KeptReads, "read", checked)
    with_check = Search(problem).run(budget=300)
    monkeypatch.undo()
    plain = Search(problem).run(budget=300)
    assert seen["kept"] > 20 and seen["differ"] == []
    assert (with_check.status, with_check.nodes, with_check.chosen) == \
        (plain.status, plain.nodes, plain.chosen)


def test_an_interval_view_resolved_once_is_intervals():
    ranges = {1: [(1.0, 2.0), (-3.0, 0.5)], 2: [(1.0, 2.0), (-3.0, 0.5)]}
    for op in ("+", "-", "*", "/", "max", "min", "sum", "<", "==", "%"):
        for exact in (False, True):
            args = ranges[2]
            view = O.interval_of(op, exact, False)
            assert _same(view(*args), O.interval(op, args, exact)), (op, exact)
            unknown = O.interval_of(op, exact, True)
            assert _same(unknown(args[0], O.UNKNOWN), O.interval(op, [args[0], O.UNKNOWN], exact))
    assert O.interval_of("*", False, False) is O._RANGES["*"]  # no dispatch left
