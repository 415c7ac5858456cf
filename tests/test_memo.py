"""dsl/memo.py: the process memos are bounded and answer only for the object kept."""

import gc
import weakref

from kbsolve.dsl.memo import ByIdentity, Kept


def test_kept_is_forgotten_all_at_once_when_full():
    kept = Kept(3)
    for key in "abc":
        assert kept.keep(key, key.upper()) == key.upper()
    assert dict(kept) == {"a": "A", "b": "B", "c": "C"}
    kept.keep("d", "D")
    assert dict(kept) == {"d": "D"}


class Node:
    pass


def test_by_identity_answers_for_the_same_object_only_and_keeps_it_alive():
    memo = ByIdentity(10)
    node, other = Node(), Node()
    memo.keep(node, 1)
    assert memo.get(node) == 1 and memo.get(other) is None and memo.get(other, 0) == 0
    alive = weakref.ref(node)
    del node
    gc.collect()
    assert alive() is not None  # its id cannot be taken by another object while kept


def test_by_identity_is_bounded():
    memo = ByIdentity(2)
    nodes = [Node() for _ in range(3)]
    for i, node in enumerate(nodes):
        memo.keep(node, i)
    assert memo.get(nodes[0]) is None and memo.get(nodes[2]) == 2
