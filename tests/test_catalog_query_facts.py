"""catalog/schema.py query_facts: the plain path gives what the query class's model_dump
gives, and leaves every other input to the class; a pickled catalog's lazy networks."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("values", [
    {"num_gpus": 8, "nodes": 1, "gpus_per_node": 8, "frames": 5, "height": 256, "width": 256},
    {"num_gpus": 16, "nodes": 2, "gpus_per_node": 8, "seq_len": 4096, "headroom_pct": 0},
    {},
])
def test_plain_query_facts_are_the_query_class_s(values):
    from kbsolve.catalog.schema import _plain_query_facts, model_class, query_facts
    from kbsolve.dsl.vocab import shipped
    vocabulary = shipped()
    expected = model_class("query", vocabulary)(**values).model_dump()
    assert _plain_query_facts(values, vocabulary.signature("query")) is not None
    assert query_facts(values, vocabulary) == expected
    assert list(query_facts(values, vocabulary)) == list(expected)


@pytest.mark.parametrize("values", [
    {"num_gpus": 0},                 # below its bound: the class words the error
    {"num_gpus": True},              # a bool is no int here
    {"num_gpus": "8"},               # lax pydantic coerces it: the class decides
    {"headroom_pct": 100},
    {"no_such_field": 1},
])
def test_other_query_facts_go_to_the_query_class(values):
    from kbsolve.catalog.schema import _plain_query_facts, model_class, query_facts
    from kbsolve.dsl.vocab import shipped
    vocabulary = shipped()
    assert _plain_query_facts(values, vocabulary.signature("query")) is None
    try:
        expected = model_class("query", vocabulary)(**values).model_dump()
    except Exception as error:  # noqa: BLE001 - the same error either way
        with pytest.raises(type(error)):
            query_facts(values, vocabulary)
    else:
        assert query_facts(values, vocabulary) == expected


def test_a_pickled_catalog_reads_its_networks_when_asked():
    import pickle

    from kbsolve.catalog.load import LAZY
    from kbsolve.catalog.knowledge import load_kb
    catalog = load_kb(None).catalog
    copy = pickle.loads(pickle.dumps(catalog, protocol=pickle.HIGHEST_PROTOCOL))
    assert not set(LAZY) & set(vars(copy))  # still pickled
    assert copy.gpus == catalog.gpus and copy.model("wan14b") == catalog.model("wan14b")
    again = pickle.loads(pickle.dumps(copy))  # pickled again before the tables were read
    assert again.networks == catalog.networks and again.hf == catalog.hf and again == catalog
    assert copy == catalog and copy.network(next(iter(catalog.networks))) is not None
    with pytest.raises(AttributeError):
        copy.no_such_table
