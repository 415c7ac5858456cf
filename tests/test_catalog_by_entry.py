"""A pickled catalog (the KB cache) keeps its GPUs and models pickled entry by entry
(catalog/load.py Entries): a plan unpickles the one GPU and the one model it reads."""

from __future__ import annotations

import pickle

import pytest

from kbsolve.api import load_kb
from kbsolve.catalog.load import BY_ENTRY, Catalog, Entries


@pytest.fixture(scope="module")
def built() -> Catalog:
    return load_kb(use_cache=False).catalog


def test_an_unpickled_catalog_reads_only_the_entries_asked_for(built):
    loaded = pickle.loads(pickle.dumps(built))
    for name in BY_ENTRY:
        table = loaded.__dict__[name]
        assert isinstance(table, Entries) and not table.read
        assert list(table) == list(getattr(built, name)) and len(table) > 10
    gpu = loaded.gpu("A100")
    assert gpu == built.gpu("A100") and type(gpu) is type(built.gpu("A100"))
    assert gpu.span == built.gpu("A100").span and gpu.field_span("memory_gib")
    assert list(loaded.__dict__["gpus"].read) == [gpu.name]
    assert loaded.gpu("A100") is gpu  # read once
    assert not loaded.__dict__["models"].read


def test_an_unpickled_catalog_equals_the_built_one_and_pickles_again_unread(built):
    loaded = pickle.loads(pickle.dumps(built))
    again = pickle.loads(pickle.dumps(loaded))  # unread: passed on still pickled
    assert not again.__dict__["models"].read
    assert again == built and loaded == built  # every entry read on the way
    assert dict(loaded.models) == dict(built.models)
    assert list(loaded.models.items()) == list(built.models.items())
    assert {**loaded.gpus} == dict(built.gpus)
    with pytest.raises(KeyError):
        loaded.models["no-such-model"]
    assert "no-such-model" not in loaded.models and next(iter(built.models)) in loaded.models


def test_entries_of_other_classes_pickle_whole():
    table = Entries.of({"a": {"x": 1}, "b": [2]})
    assert table.keys_ == ()
    copy = pickle.loads(pickle.dumps(table))
    assert dict(copy) == {"a": {"x": 1}, "b": [2]} and list(copy) == ["a", "b"]
    assert Entries.of(copy) is copy
