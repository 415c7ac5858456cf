"""The shipped KB's refused problems and the Z3 work that several tests check them
against, made once a process: test_fixes.py and test_value_bounds.py ask for the same
1x4090 llama3-70b problem, its fresh finders' cores and plain deletion. Each result
comes from a fresh Model (its own Z3 context), so it does not depend on which test asked
first; callers only read what they get (the problem and lists are shared). Nothing
here solves the problem or keeps a Model: a refusal's Z3 context lives no longer than
the test module that asked for it (test_fixes' `refused`)."""

from __future__ import annotations

import functools
import json

import z3

from kbsolve.program.query import Query, resolve
from kbsolve.solver import prove
from plans import shipped_kb


def _key(fields: dict) -> str:
    return json.dumps(fields, sort_keys=True)


def problem(**fields):
    """The resolved problem of the query on the shipped KB, one object a process."""
    return _problem(_key(fields))


@functools.cache
def _problem(key: str):
    return resolve(shipped_kb(), Query(**json.loads(key))).problem


def consent(**fields) -> tuple:
    """The names of the problem's consent parts (rules a user allows with --allow)."""
    return tuple(_consent(_key(fields)))


@functools.cache
def _consent(key: str) -> tuple:
    model = prove.Model(_problem(key))
    optin_of = model.p.program.optin_of
    return tuple(name for name in model.parts
                 if name.startswith("rule:") and optin_of(name[5:]) is not None)


def counted_clash(fields: dict, likely: bool = False, grouped: bool = False) -> tuple:
    """A fresh core finder's clash on the problem, with the core's guess (`likely`) and
    the consent rules deleted in runs (`grouped`) or not: (core, Z3 checks it ran)."""
    core, checks = _counted_clash(_key(fields), likely, grouped)
    return list(core), checks


@functools.cache
def _counted_clash(key: str, likely: bool, grouped: bool) -> tuple:
    finder = prove.CoreFinder(prove.Model(_problem(key)))
    consent = _consent(key)
    checks, check = [0], finder.solver.check

    def counted(*args):
        checks[0] += 1
        return check(*args)
    finder.solver.check = counted
    core = finder.clash(likely=prove._likely(consent) if likely else None,
                        grouped=frozenset(consent).__contains__ if grouped else None)
    return tuple(core), checks[0]


def plain_deletion(**fields) -> tuple[list, list]:
    """Z3's first core on a fresh solver (every part asked) and the reference core from
    it: deletion in name order with one Z3 check per part."""
    first, plain = _plain_deletion(_key(fields))
    return list(first), list(plain)


@functools.cache
def _plain_deletion(key: str) -> tuple:
    fresh = prove.CoreFinder(prove.Model(_problem(key)))
    assert fresh.solver.check([fresh.marks[n] for n in fresh.marks]) == z3.unsat
    first = sorted(str(m) for m in fresh.solver.unsat_core() if str(m) in fresh.marks)
    plain = list(first)
    for name in first:
        if fresh.solver.check([fresh.marks[n] for n in plain if n != name]) == z3.unsat:
            plain.remove(name)
    return tuple(first), tuple(plain)


def consent_drops(fields: dict, core: list | None = None) -> tuple[list, int]:
    """The consent MaxSAT (solver/fixes._smallest_drops) on a fresh Model, with the
    query's minimal `core` or without: (the smallest sets of consent rules to drop,
    z3.Optimize checks it ran)."""
    drops, asked = _consent_drops(_key(fields), None if core is None else tuple(core))
    return [list(d) for d in drops], asked


@functools.cache
def _consent_drops(key: str, core: tuple | None) -> tuple:
    from kbsolve.solver import fixes
    model = prove.Model(_problem(key))
    consent = {name: model.parts[name] for name in _consent(key)}
    asked, real = [0], z3.Optimize.check

    def counted(self, *args):
        asked[0] += 1
        return real(self, *args)
    z3.Optimize.check = counted
    try:
        drops = fixes._smallest_drops(model, consent, None if core is None else list(core))
    finally:
        z3.Optimize.check = real
    return tuple(tuple(d) for d in drops), asked[0]
