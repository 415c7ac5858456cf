"""The catalog's HF table from the KB cache keeps its readers pickled until first read
(catalog/hf.py HfTable): it reads as the table never pickled, pickles again unread, and a
plan of a catalog model never reads it."""

from __future__ import annotations

import pickle

from kbsolve import api
from kbsolve.catalog.hf import _PICKLED, HfTable


def _round_trip(value):
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def test_a_pickled_table_reads_its_readers_on_first_use():
    table = api.load_kb().catalog.hf
    assert isinstance(table, HfTable) and table.readers
    copy = _round_trip(table)
    assert "readers" not in vars(copy) and _PICKLED in vars(copy)
    assert copy.fallback == table.fallback
    assert copy.readers == table.readers
    assert "readers" in vars(copy) and _PICKLED not in vars(copy)
    assert copy == table and copy.reader("llama") == table.reader("llama")


def test_a_table_pickled_again_unread_keeps_its_readers():
    table = api.load_kb().catalog.hf
    twice = _round_trip(_round_trip(table))
    assert _PICKLED in vars(twice)
    assert twice == table
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(_round_trip(table), protocol=protocol)) == table


def test_only_the_readers_are_read_on_first_use():
    copy = _round_trip(HfTable({}, "x"))
    assert not hasattr(copy, "no_such_name")
    assert _PICKLED in vars(copy)
    assert copy.readers == {} and copy.fallback == "x"


def test_a_plan_of_a_catalog_model_never_reads_the_table():
    kb = _round_trip(api.load_kb())
    plan = api.solve({"gpus": "8xA100", "model": "wan14b"}, kb)
    assert plan.status == "optimal"
    assert _PICKLED in vars(kb.catalog.hf)
