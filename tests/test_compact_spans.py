"""diagnostics.py compact_spans: a node's or declaration's span is pickled as a tuple and
built into a Span when first read, at the same place."""

import copy
import pickle
from fractions import Fraction

from kbsolve.diagnostics import Span
from kbsolve.dsl import ir
from kbsolve.dsl.kb import Meta
from kbsolve.dsl.types import NUM


def _spans_held(value, seen: set) -> int:
    """How many Span objects the fields of the dataclasses below `value` hold."""
    if isinstance(value, Span):
        return 1
    if id(value) in seen or isinstance(value, (str, int, Fraction)):
        return 0
    seen.add(id(value))
    if isinstance(value, (list, tuple)):
        return sum(_spans_held(v, seen) for v in value)
    if isinstance(value, dict):
        return sum(_spans_held(v, seen) for v in value.values())
    if hasattr(type(value), "__dataclass_fields__"):
        return sum(_spans_held(v, seen) for v in vars(value).values())
    return 0


def test_a_pickled_node_builds_its_span_when_read():
    include = Span("kb/a.kb", 3, 1)
    span = Span("kb/b.kb", 12, 5, 12, 9, via=(include,))
    node = ir.Op("+", (ir.Const(Fraction(1), NUM, Span("kb/b.kb", 12, 5)),), NUM, span)
    loaded = pickle.loads(pickle.dumps(node))
    assert "span" not in vars(loaded) and "span" not in vars(loaded.args[0])
    assert loaded.span == span and loaded.span.via == (include,)
    assert str(loaded.args[0].span) == "kb/b.kb:12:5"
    assert "span" in vars(loaded) and loaded.span is loaded.span  # built once
    again = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(node))))
    assert again == node and again.span == span  # pickled again unread: the same place


def test_defaults_copies_and_unpickled_declarations_keep_their_places():
    assert pickle.loads(pickle.dumps(ir.Const(True, NUM))).span == Span("")
    assert ir.Const.span == Span("")
    meta = Meta(Span("kb/c.kb", 7, 2), "core")
    assert copy.copy(meta).span == meta.span
    loaded = pickle.loads(pickle.dumps(meta))
    assert loaded == meta and hash(loaded) == hash(meta)
    assert loaded != Meta(Span("kb/c.kb", 8, 2), "core")


def test_a_plan_s_scopes_unpickle_no_span_and_read_the_same_places():
    from kbsolve.api import load_kb

    built = load_kb(use_cache=False)
    loaded = pickle.loads(pickle.dumps(built))
    view = loaded.scoped("flow-factory")
    chunks = loaded.__dict__["_scoped"].loaded
    assert set(chunks) >= {"flow-factory", "core"}
    assert sum(_spans_held(chunk, set()) for chunk in chunks.values()) == 0
    for table in ("lets", "rules", "memory", "options"):
        for key, entry in getattr(view, table).items():
            assert entry.meta.span == getattr(built, table)[key].meta.span, key
    for key, let in view.lets.items():
        original = [str(n.span) for n in ir.walk(built.lets[key].expr)]
        assert [str(n.span) for n in ir.walk(let.expr)] == original, key
