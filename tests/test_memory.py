"""A KB is freed once its caller drops it: a long-lived process that loads KBs (a
service, the test run itself) must not grow by one KB per load."""

from __future__ import annotations

import gc
import weakref

import pytest

from kbsolve import api

QUERY = {"gpus": "1x4090", "model": "qwen3-8b"}


def _freed(use) -> bool:
    kb = api.load_kb(use_cache=False)
    use(kb)
    ref = weakref.ref(kb)
    del kb
    gc.collect()
    return ref() is None


def test_an_unused_kb_is_freed():
    assert _freed(lambda kb: None)


# Open defect, reported to the owner of program/: evaluate.py's module-level _CLOSURES
# and _READS (keyed by id(node)) hold every evaluated node and, through the closures,
# its KB for the life of the process (about 45,000 objects per KB; a full test run
# carries hundreds). strict: the mark must go once the defect is fixed.
LEAK = pytest.mark.xfail(strict=True, raises=AssertionError,
                         reason="program/evaluate.py caches keep every KB alive")


@LEAK
def test_an_estimated_kb_is_freed():
    assert _freed(lambda kb: api.estimate(QUERY, {}, kb))


@LEAK
def test_a_solved_kb_is_freed():
    assert _freed(lambda kb: api.solve({**QUERY, "top": 0}, kb))
