"""The reference semantics of checked expressions, in exact rationals.

The Z3 model must agree with this evaluator; the enumerator, `estimate`, the
tables in the compiler and the explanations use it directly. Each IR node is
turned once into a Python closure (cached for the life of the KB), so that
evaluating many assignments is cheap. An Evaluator also remembers each let's
value by the values of the options it reads (its facts never change), so a
let is computed once per distinct projection, not once per assignment.
"""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any, Callable, Mapping

from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program import program as _walker
from kbsolve.program.operators import OPERATORS, fraction_sum

Env = tuple  # (assignment, facts, memo for this run, store for this evaluator)


def _caches(kb: KnowledgeBase) -> tuple[dict, dict, dict]:
    """The KB's own caches (freed with it, never pickled): node id -> (node,
    closure), node id -> (node, the options it reads) and node id -> (node, a
    getter of the values of those options); the node is kept so that its id
    stays unique."""
    found = kb.__dict__.get("_evaluation")
    if found is None:
        found = ({}, {}, {})
        object.__setattr__(kb, "_evaluation", found)
    return found


class Evaluator:
    """Evaluates IR for one framework, given facts and an option assignment."""

    def __init__(self, kb: KnowledgeBase, framework: str, facts: Mapping[str, Any]):
        self.kb = kb
        self.framework = framework
        self.facts = facts
        self.store: dict[tuple, Any] = {}  # (let, values of the options it reads) -> value

    def run(self, node: ir.Node, assignment: Mapping[str, Any], memo: dict | None = None):
        env = (assignment, self.facts, {} if memo is None else memo, self.store)
        return closure(self.kb, node)(env)

    def remembered(self, node: ir.Node, assignment: Mapping[str, Any],
                   memo: dict | None = None):
        """run(), remembered by the values of the options the node reads."""
        table = _caches(self.kb)[1]
        reads = table.get(id(node))
        if reads is None or reads[0] is not node:
            reads = (node, sorted(options_read(self.kb, node)))
            table[id(node)] = reads
        slot = _node_slot(id(node), reads[1], assignment)
        if slot not in self.store:
            self.store[slot] = self.run(node, assignment, memo)
        return self.store[slot]


    def remembering(self, assignment: Mapping[str, Any], memo: dict | None = None):
        """remembered() for many nodes at one assignment: run(node). The
        assignment's values are turned into memo keys once (not once per node
        per option read), and each node's options are read by one C call; the
        lets and memory sums under it read those keys too (the env's fifth part)."""
        return self.remembering_each(assignment, memo)[0]

    def remembering_each(self, assignment: Mapping[str, Any], memo: dict | None = None):
        """(run, each): remembering()'s run, and each(entries), the values of the
        nodes of entries(nodes) in order, as [run(node) for node in nodes] finds
        them (the same keys, stores and memo writes) without a call per node."""
        values = _Values({key: (v._numerator, v._denominator) if type(v) is Fraction else v
                          for key, v in assignment.items()})
        kb, getters, store = self.kb, _caches(self.kb)[2], self.store
        memo = {} if memo is None else memo
        env = (assignment, self.facts, memo, store, values)

        def run(node: ir.Node):
            found = getters.get(id(node))
            if found is None or found[0] is not node:
                found = getters[id(node)] = _entry(kb, node)
            slot = (id(node), found[1](values))  # remembered()'s key (see Memo keys)
            value = store.get(slot, _MISS)
            if value is _MISS:
                value = store[slot] = found[2](env)
            memo[id(node)] = value  # for a memory sum's parts (_kept) at this assignment
            return value

        def each(entries: tuple) -> list:
            found, get = [], store.get
            for node_id, read, compute in entries:
                slot = (node_id, read(values))
                value = get(slot, _MISS)
                if value is _MISS:
                    value = store[slot] = compute(env)
                memo[node_id] = value
                found.append(value)
            return found
        return run, each

    def entries(self, nodes) -> tuple:
        """(node id, its options' getter, its closure) per node, for remembering_each's
        each(); the nodes are kept in the KB's cache (their ids stay theirs)."""
        kb, getters = self.kb, _caches(self.kb)[2]
        found = []
        for node in nodes:
            entry = getters.get(id(node))
            if entry is None or entry[0] is not node:
                entry = getters[id(node)] = _entry(kb, node)
            found.append((id(node), entry[1], entry[2]))
        return tuple(found)


_MISS = object()


class _Values(dict):
    """An option the assignment lacks reads as None (as assignment.get does)."""

    def __missing__(self, key):
        return None


def _entry(kb: KnowledgeBase, node: ir.Node) -> tuple:
    """(node, the getter of the options it reads, its closure): remembering()'s cache."""
    return node, _getter(sorted(options_read(kb, node))), closure(kb, node)


def _getter(keys: list[str]) -> Callable:
    """The values of `keys` in a dict of memo-key values, as one hashable value."""
    if not keys:
        return lambda values: ()
    return operator.itemgetter(*keys)


def closure(kb: KnowledgeBase, node: ir.Node) -> Callable[[Env], Any]:
    return _closure(kb, _caches(kb)[0], node)


def _closure(kb: KnowledgeBase, table: dict, node: ir.Node) -> Callable[[Env], Any]:
    cached = table.get(id(node))
    if cached is None or cached[0] is not node:
        cached = table[id(node)] = (node, _build(kb, table, node))
    return cached[1]


def _build(kb: KnowledgeBase, table: dict, node: ir.Node) -> Callable[[Env], Any]:
    kind = type(node)  # the node classes have no subclasses
    if kind is ir.Const:
        value = node.value
        return lambda env: value
    if kind is ir.OptionRef:
        key = node.option
        return lambda env: env[0][key]
    if kind is ir.FactRef:
        return _fact(node)
    if kind is ir.LetRef:
        return _let(kb, node.let)
    if kind is ir.MemorySum:
        return _summed(kb, node)
    args = [_closure(kb, table, a) for a in node.args]
    op = OPERATORS[node.op]  # its exact view (program/operators.py)
    if op.lazy:
        return op.exact(*args)
    fn = op.exact
    if op.divides:
        return _divide(node, fn, *args)
    if len(args) == 1:
        a, = args
        return lambda env: fn(a(env))
    if len(args) == 2:
        a, b = args
        return lambda env: fn(a(env), b(env))
    return lambda env: fn(*[a(env) for a in args])


def _summed(kb: KnowledgeBase, node: ir.MemorySum) -> Callable[[Env], Any]:
    """A memory sum: its terms' values added exactly (the whole ones as integers,
    then the rest), kept in the run's memo (one assignment's) by framework and level,
    which fix its terms: two sums of one level read the same value."""
    parts = [_kept(kb, t.expr) for t in _walker.summed_terms(kb, node.framework, node.level)]
    level = (node.framework, node.level)  # a memo key no let name or node id equals

    def summed(env):
        memo = env[2]
        total = memo.get(level)
        if total is None:
            values = [part(env) for part in parts]
            total = memo[level] = fraction_sum(
                [v if type(v) is Fraction else Fraction(v) for v in values])
        return total
    return summed


def _kept(kb: KnowledgeBase, node: ir.Node) -> Callable[[Env], Any]:
    """closure(node), its value kept in the evaluator's store (env[3]) under
    remembered()'s key and in the run's memo (env[2], one assignment's) under the
    node's id, where remembering() also leaves each node it ran: a memory sum's
    terms were mostly just computed (measure reads the inner levels first), and
    each term is a whole formula."""
    run = closure(kb, node)
    reads = sorted(options_read(kb, node))
    read = _getter(reads)
    node_id = id(node)

    def kept(env):
        memo = env[2]
        found = memo.get(node_id, _MISS)
        if found is _MISS:
            slot = (node_id, read(env[4])) if len(env) > 4 else \
                _node_slot(node_id, reads, env[0])
            store = env[3]
            found = store.get(slot, _MISS)
            if found is _MISS:
                found = store[slot] = run(env)
            memo[node_id] = found
        return found
    return kept


def _node_slot(node_id: int, reads: list[str], assignment: Mapping[str, Any]) -> tuple:
    """A node's memo key: (its id, the values of the options it reads: a bare value where
    it reads one, else a tuple), each Fraction as (numerator, denominator) (see Memo keys)."""
    return (node_id, _projection(reads, assignment))


def _projection(reads: list[str], assignment: Mapping[str, Any]):
    """The values of `reads` in the assignment as memo keys read them: a bare value for
    one, else a tuple (as _getter's itemgetter over remembering()'s values)."""
    values = tuple([(v._numerator, v._denominator) if type(v) is Fraction else v
                    for v in map(assignment.get, reads)])
    return values[0] if len(values) == 1 else values


def _fact(node: ir.FactRef):
    path = node.path

    def get(env):
        value = env[1].get(path)
        if value is None:  # node.span read here: built only for a diagnostic (diagnostics.py)
            raise KbError(Diagnostic(f"the model or GPU has no value for {path}, which this "
                                     f"formula needs", node.span, code="missing-fact"))
        return value
    return get


def _let(kb: KnowledgeBase, key: str):
    built: list = []  # [body closure, options read, their getter]

    def get(env):
        memo = env[2]
        found = memo.get(key, _MISS)
        if found is _MISS:
            if not built:
                reads = sorted(_let_options(kb, key))
                built.extend([closure(kb, kb.lets[key].expr), reads, _getter(reads)])
            slot = (key, built[2](env[4]) if len(env) > 4 else _projection(built[1], env[0]))
            store = env[3]
            found = store.get(slot, _MISS)
            if found is _MISS:
                found = store[slot] = built[0](env)
            memo[key] = found
        return found
    return get


# Memo keys (a let's or a node's, by the values of the options it reads) hold a
# Fraction as its (numerator, denominator): that hashes several times faster than
# the Fraction (Python 3.11 computes a Fraction's hash anew each time). Option
# values are never tuples, so the keys of different values never meet; equal
# values of two types (1 and Fraction(1)) may miss, and are computed again.
# remembered() and remembering() key a node's value alike, (node id, the values
# of the options it reads: a bare value where it reads one, else a tuple), so
# either finds what the other stored; a let's keys begin with its name, never an int.
# A run's memo (env[2], one assignment) is keyed by let names, node ids (_kept,
# remembering) and (framework, level) pairs (_summed): never equal across kinds.


def _let_options(kb: KnowledgeBase, key: str) -> frozenset[str]:
    """The options a let reads, through the lets it reads."""
    return options_read(kb, kb.lets[key].expr)


def options_read(kb: KnowledgeBase, root: ir.Node) -> frozenset[str]:
    """The options a node reads, through lets and memory sums (program/program.py's walker)."""
    return _walker.options_read(kb, root)


def facts_read(kb: KnowledgeBase, root: ir.Node) -> frozenset[str]:
    """The facts a node reads, through lets (memory sums excluded)."""
    return _walker.facts_read(kb, root)


def _divide(node: ir.Op, quotient, a, b):
    def run(env):
        divisor = b(env)
        if divisor == 0:
            raise KbError(Diagnostic("division by zero: a fact or option in this formula is 0 "
                                     "for this query", node.span, code="div-zero"))
        return quotient(a(env), divisor)
    return run
