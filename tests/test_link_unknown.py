"""Whether an expression's range can be UNKNOWN is found once, when it is
made (tables.Expr.may_be_unknown), not by each link's writer walking the tree
again: the same answer as that walk for every expression of real searches."""

from __future__ import annotations

import numpy as np
import pytest

from kbsolve import api
from kbsolve.program import tables as T
from kbsolve.program.operators import BOOL_RESULT
from kbsolve.program.query import Query, resolve
from kbsolve.solver.search import Search


def _walked(cell) -> bool:
    """The writer's walk as it was (program/link.py before the twelfth round)."""
    if isinstance(cell, T.Table):
        return cell.kind == "code"
    if cell.op == "if":
        return any(_walked(a) for a in cell.args)
    return cell.op not in BOOL_RESULT and any(_walked(a) for a in cell.args)


@pytest.mark.parametrize("fields", [
    {"gpus": "8xA100", "model": "qwen3-8b"},
    {"gpus": "8xH100", "model": "qwen3-0.6b", "framework": "pytorch"},
])
def test_every_expression_knows_whether_it_may_be_unknown(fields):
    kb = api.load_kb()
    search = Search(resolve(kb, Query(**fields)).problem)
    exprs = [c for c in search.cells if isinstance(c, T.Expr)]
    assert exprs
    found = [T.may_be_unknown(c) for c in exprs]
    assert found == [_walked(c) for c in exprs]
    tables = [c for c in search.cells if isinstance(c, T.Table)]
    assert [T.may_be_unknown(t) for t in tables] == [t.kind == "code" for t in tables]


def test_an_expression_over_a_table_of_codes_may_be_unknown_unless_it_is_a_test():
    code = T.Table((0,), (2,), np.array([1, 2]), "code", False)
    num = T.Table((0,), (2,), np.array([1.0, 2.0]), "num", False)
    assert T.Expr("+", [code, num], "num", False).may_be_unknown
    assert not T.Expr("+", [num, num], "num", False).may_be_unknown
    test = "=="
    assert test in BOOL_RESULT
    assert not T.Expr(test, [code, num], "bool", False).may_be_unknown
    assert T.Expr("if", [T.Expr(test, [num, num], "bool", False), code, num], "code",
                  False).may_be_unknown
