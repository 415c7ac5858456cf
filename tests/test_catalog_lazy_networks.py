"""catalog/load.py: a pickled catalog keeps its networks table pickled until it is read."""

from __future__ import annotations

import pytest


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
