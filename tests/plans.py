"""The shipped KB and the plans several tests read, built once per test run.

`shipped_kb()` is the shipped KB without packs, loaded once (without the cache,
so that it is the same whatever the calling test's cache holds); `solved(query)`
is `api.solve(query, shipped_kb())`, solved once per query and copied for each
caller, so that a test may change its plan without changing another's.

Tests of the solver's own determinism, of packs, or of the top-level API call
`api.solve` themselves.
"""

from __future__ import annotations

import json
from functools import lru_cache

from kbsolve import api


@lru_cache(maxsize=1)
def shipped_kb():
    return api.load_kb(use_cache=False)


@lru_cache(maxsize=None)
def _solved(key: str):
    return api.solve(json.loads(key), shipped_kb())


def solved(query: dict):
    """The plan for `query` on the shipped KB: a deep copy of the run's one solve."""
    return _solved(json.dumps(query, sort_keys=True)).model_copy(deep=True)
