"""A KB is freed once its caller drops it: a long-lived process that loads KBs (a
service, the test run itself) must not grow by one KB per load."""

from __future__ import annotations

import gc
import weakref

from kbsolve import api

QUERY = {"gpus": "1x4090", "model": "qwen3-8b"}


def _freed(use) -> bool:
    kb = api.load_kb(use_cache=False)
    use(kb)
    ref = weakref.ref(kb)
    del kb
    # The young generations first, where a KB built and dropped here lies; the full pass
    # (seconds over a whole test run's heap) only when they did not free it.
    for generation in (1, 2):
        gc.collect(generation)
        if ref() is None:
            return True
    return False


def test_an_unused_kb_is_freed():
    assert _freed(lambda kb: None)


def test_an_estimated_kb_is_freed():
    assert _freed(lambda kb: api.estimate(QUERY, {}, kb))


def test_a_solved_kb_is_freed():
    assert _freed(lambda kb: api.solve({**QUERY, "top": 0}, kb))
