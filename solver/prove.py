"""Z3, the proof behind the search: the compiled model of a Problem, the
lexicographic optimum by successive tightening (where the branch and bound's
node budget runs out), and minimal cores (infeasible queries, pins, and the
explanations the tables cannot settle). Imported only when needed.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import z3

from kbsolve.dsl import ir
from kbsolve.dsl.types import NUM
from kbsolve.program.metrics import full_assignment, measure, sort_key
from kbsolve.program.problem import Problem
from kbsolve.solver.compile import Compiler
from kbsolve.solver.guard import expired, left_ms
from kbsolve.solver.local_search import back_to_defaults, hill_climb
from kbsolve.solver.optimize import Outcome

SEED = 7
RLIMIT_PER_CHECK = 20_000_000  # Z3 resource units per check (about 2 s of CPU here)


class Model:
    """The compiled constraints of a Problem, as named (trackable) parts."""

    def __init__(self, problem: Problem):
        self.p = problem
        self.objective = problem.objective
        self.c = Compiler(problem)
        self.parts: dict[str, z3.BoolRef] = {}
        for rule in problem.rules:
            self.parts[f"rule:{rule.framework}.{rule.id}"] = self.c.term(rule.constraint)
        for key, value in sorted(problem.pinned.items()):
            if key in problem.choices:
                self.parts[f"pin:{key}"] = self.c.equals(key, value)
        for option in problem.options:
            if option.when is not None and option.key in problem.choices:
                # a `from` option kept as a choice (pinned) has no default among its values:
                # its `when` must hold, as the branch and bound's _is_default says
                default = (self.c.equals(option.key, option.default)
                           if option.default in problem.choices[option.key] else z3.BoolVal(False, self.c.ctx))
                self.parts[f"when:{option.key}"] = z3.Implies(
                    z3.Not(self.c.term(option.when)), default)
        self.memory = self._memory_total()
        budget = self.c.real(problem.budget_bytes)
        self.parts["memory:fit"] = self.memory <= budget
        if problem.host_budget_bytes is not None:
            host = [self.c.num(t.expr) for t in problem.program.memory
                    if t.location == "host"]
            self.parts["memory:host_fit"] = z3.Sum(host or [self.c.real(0)]) <= \
                self.c.real(problem.host_budget_bytes)

    def _memory_total(self):
        terms = [self.c.num(t.expr) for t in self.p.program.memory
                 if t.location == "gpu"]
        return z3.Sum(terms) if terms else self.c.real(0)

    def time_per_work(self):
        """(sum of time terms / work) x each factor in turn: every step is a
        named term split over one factor's small table, never over the values
        of the whole product."""
        speed = self.p.program.speed
        work = self.p.throughput_work
        per_work = []
        for term in (t for t in speed if t.kind == "time"):
            node = term.expr
            if work is not None:
                node = ir.Op("/", (node, work.expr), NUM, term.meta.span)
            per_work.append(self.c.num(node))
        total = self.c.named(z3.Sum(per_work) if per_work else self.c.real(0))
        factors = [t.expr for t in speed if t.kind == "factor"]
        for factor in factors:  # a chain: each step splits over one factor's table
            previous = self.c.named(total)
            total = self.c.split(factor, lambda v, previous=previous: previous * self.c.real(v))
        return total

    def preference_scores(self) -> dict[int, Any]:
        tiers: dict[int, list] = {}
        for pref in self.p.program.preferences:
            term = self.c.term(pref.expr)
            weight = self.c.real(pref.weight)
            score = z3.If(term, weight, self.c.real(0)) if z3.is_bool(term) else weight * term
            tiers.setdefault(pref.tier, []).append(score)
        return {tier: z3.Sum(scores) for tier, scores in sorted(tiers.items())}


class Objective:
    """A term to minimise or maximise, and how to demand a better or an equal value."""

    def __init__(self, sense: str, term):
        self.sense, self.term = sense, term

    def better(self, value):
        return self.term < value if self.sense == "min" else self.term > value

    def at_least_as_good(self, value):
        return self.term <= value if self.sense == "min" else self.term >= value


def solve_z3(problem: Problem, until: float = math.inf, avoid: list | None = None,
             start: dict[str, Any] | None = None) -> Outcome:
    """Lexicographic optimum by successive tightening: after each satisfying
    model, demand a strictly better value of the current objective; when that
    is unsatisfiable, fix the objective at its best value and go to the next.
    Each check has a fixed rlimit; `until` (--timeout) is only an outer guard."""
    deadline = until
    model = Model(problem)
    time_term = Objective("min", model.time_per_work())
    preferences = [Objective("max", score) for _, score in model.preference_scores().items()]
    memory = Objective("min", model.memory)
    objectives = [memory, time_term] + preferences if problem.objective == "memory" else \
        [time_term] + preferences + [memory]
    solver = z3.Solver(ctx=model.c.ctx)
    solver.set("random_seed", SEED)
    for constraint in model.c.domain_constraints():
        solver.add(constraint)
    for part in model.parts.values():
        solver.add(part)
    for chosen in avoid or ():  # alternatives: differ from each earlier plan somewhere
        solver.add(z3.Or([z3.Not(model.c.equals(k, v)) for k, v in chosen.items()]
                         or [z3.BoolVal(False, model.c.ctx)]))
    first = _check(solver, deadline)
    if first == z3.unsat:
        return Outcome("infeasible", core=minimal_core(model), model=model)
    if first != z3.sat:
        return Outcome("unknown", model=model, timed_out=expired(deadline))
    best = _polished(problem, model, solver, solver.model(), deadline, start)
    complete = True
    for objective in objectives:
        value = best.eval(objective.term, model_completion=True)
        solver.push()
        while True:
            solver.add(objective.better(value))
            result = _check(solver, deadline)
            if result != z3.sat:
                complete = complete and result == z3.unsat
                break
            best = _polished(problem, model, solver, solver.model(), deadline)
            value = best.eval(objective.term, model_completion=True)
        solver.pop()
        solver.add(objective.at_least_as_good(value))
        if not complete:
            break
    chosen = back_to_defaults(problem, model.c.decode(best))
    metrics = measure(problem, full_assignment(problem, chosen))
    return Outcome("optimal" if complete else "feasible", chosen, metrics, model=model,
                   timed_out=not complete and expired(deadline))


def _polished(problem: Problem, model: Model, solver: z3.Solver, first, deadline: float,
              start: dict[str, Any] | None = None):
    """Improve the first model by local search in the reference evaluator (one
    option at a time), so that tightening starts near the optimum; the search
    only picks the starting point, Z3 still proves optimality. A better `start`
    (the branch and bound's best plan) is taken when it is feasible."""
    chosen = hill_climb(problem, model.c.decode(first))
    if start is not None:
        ours, theirs = (measure(problem, full_assignment(problem, c)) for c in (chosen, start))
        if theirs.feasible and (not ours.feasible or sort_key(theirs) < sort_key(ours)):
            chosen = start
    solver.push()
    for key, value in chosen.items():
        solver.add(model.c.equals(key, value))
    result = _check(solver, deadline)
    polished = solver.model() if result == z3.sat else first
    solver.pop()
    return polished


def _check(solver: z3.Solver, deadline: float):
    left = left_ms(deadline)
    if left is not None:
        if left <= 0:
            return z3.unknown
        solver.set("timeout", left)
    solver.set("rlimit", RLIMIT_PER_CHECK)
    return solver.check()


class CoreFinder:
    """One solver holding every part behind a marker, to ask many questions:
    is the model satisfiable with these extra assumptions, and if not, which
    parts clash (a minimal core)?"""

    def __init__(self, model: Model):
        self.model = model
        self.solver = z3.Solver(ctx=model.c.ctx)
        self.solver.set("rlimit", RLIMIT_PER_CHECK)  # counted, as every check's budget
        ctx = model.c.ctx
        self.marks = {name: z3.Bool(name, ctx) for name in model.parts}
        self._name_of_mark = {mark.get_id(): name for name, mark in self.marks.items()}
        self._assert(model.c.domain_constraints() + [
            _implies(self.marks[name], part, ctx) for name, part in model.parts.items()])
        self.witnesses: list[tuple] = []  # (Z3 model, {part: holds in it}) of sat checks
        self.clashes: list[frozenset] = []  # sets of parts known to clash (unsat)

    def _assert(self, terms: list) -> None:
        """solver.add of each Bool term, through the C API (z3py's cast and sort
        checks were ~35 us a term; the same assertions in the same order)."""
        ref, solver = self.model.c.ctx.ref(), self.solver.solver
        for term in terms:
            if isinstance(term, z3.BoolRef):
                z3.Z3_solver_assert(ref, solver, term.as_ast())
            else:
                self.solver.add(term)

    def check(self, without=()):
        """Whether every part but `without` can hold at once: z3.sat, z3.unsat, or
        z3.unknown where the check ran out of its rlimit. z3.unsat without asking Z3
        where the parts hold a set known to clash (more parts cannot make it hold)."""
        names = [n for n in self.marks if n not in without]
        if any(known.issubset(names) for known in self.clashes):
            return z3.unsat
        result = self._holds(names)
        if result == z3.unsat:
            self.clashes.append(frozenset(self._core_names()))
        return result

    def _holds(self, names: list[str], extra: list | None = None):
        """The check of `names` (and `extra`): z3.sat without asking Z3 where the model
        of an earlier sat check satisfies every part named (a witness); a sat check's
        model is kept as one."""
        if not extra and self._witnessed(names):
            return z3.sat
        result = self.solver.check([self.marks[n] for n in names] + (extra or []))
        if result == z3.sat and not extra:
            self.witnesses.append((self.solver.model(), dict.fromkeys(names, True)))
        return result

    def _witnessed(self, names: list[str]) -> bool:
        """Some kept model satisfies every part in `names` (evaluated in the model, once
        per part: exact, the model meets every hard assertion of the solver)."""
        for found, holds in self.witnesses:
            for name in names:
                if name not in holds:
                    holds[name] = z3.is_true(found.eval(self.model.parts[name],
                                                        model_completion=True))
                if not holds[name]:
                    break
            else:
                return True
        return False

    def clash(self, extra: list | None = None, without: tuple = (),
              likely=None, grouped=None) -> list[str] | None:
        """None when satisfiable; else the minimal core (names of parts), minimised by
        deletion in name order: a part goes when the others still clash. A check
        that clashes leaves its own core (a subset of what it was asked); a later
        deletion whose remaining parts hold such a core is unsatisfiable without
        asking Z3 (more parts cannot make a clash satisfiable), so the result is the
        one every check would have given. `likely(name)`: a guess of the parts a
        minimal core keeps; once every part still to be tried is outside it, the
        parts kept so far are asked alone, and if they clash, every deletion after
        is settled without a check (one check instead of one per part left).
        `grouped(name)`: parts that usually go together (consent rules: Z3's first
        core holds many, a minimal one few); a run of them in the order is first
        tried as a whole (_run_goes). Neither guess changes the core, only how many
        checks run."""
        extra = extra or []
        names = [n for n in self.marks if n not in without]
        if self._holds(names, extra) != z3.unsat:
            return None
        core = sorted(self._core_names())
        clashing: list[set[str]] = []  # parts some check proved to clash (with `extra`)
        order = list(core)
        decided: set[str] = set()  # parts a run's deletion settled ahead of the loop
        guessed = likely is None
        for at, name in enumerate(order):
            if name in decided:
                continue
            if not guessed and not any(likely(n) for n in order[at:]):
                guessed = True  # the rest of the order: parts the guess expects to go
                kept = [n for n in core if n not in order[at:]]
                if kept and not any(known.issubset(kept) for known in clashing) and \
                        self._holds(kept, extra) == z3.unsat:
                    clashing.append(self._core_names())
            if grouped is not None and grouped(name):
                run = list(itertools.takewhile(grouped, order[at:]))
                if len(run) > 1:
                    self._run_goes(core, run, clashing, extra)
                    decided.update(run)
                    continue
            self._goes(core, name, clashing, extra)
        if not extra:
            self.clashes.append(frozenset(core))
        return core

    def _goes(self, core: list[str], name: str, clashing: list, extra: list) -> None:
        """One deletion: `name` leaves `core` when the rest still clashes."""
        rest = [n for n in core if n != name]
        if any(known.issubset(rest) for known in clashing):
            core.remove(name)  # the rest holds a set that clashes: unsat, no check
        elif self._holds(rest, extra) == z3.unsat:
            clashing.append(self._core_names())
            core.remove(name)

    def _run_goes(self, core: list[str], run: list[str], clashing: list,
                  extra: list) -> None:
        """The deletions of `run` (consecutive parts of the name order, all still in
        `core`), each as deletion in name order decides it: when the core without the
        whole run clashes, each part's deletion leaves a superset of that clash, so all
        go at once; else the first half, then the second, in turn (one part alone: its
        own deletion). An odd run's first half is the larger (run_split): the same
        decisions, fewer Z3 checks (docs/decisions.md, sixteenth round)."""
        if len(run) == 1:
            self._goes(core, run[0], clashing, extra)
            return
        rest = [n for n in core if n not in run]
        goes = any(known.issubset(rest) for known in clashing)
        if not goes and self._holds(rest, extra) == z3.unsat:
            clashing.append(self._core_names())
            goes = True
        if goes:
            for name in run:
                core.remove(name)
            return
        half = run_split(len(run))
        self._run_goes(core, run[:half], clashing, extra)
        self._run_goes(core, run[half:], clashing, extra)

    def _core_names(self) -> set[str]:
        """The parts in the last check's unsat core (its markers, found by AST id: the
        printer that str() runs is slow; an extra assumption is no marker)."""
        name_of = self._name_of_mark
        return {name_of[m.get_id()] for m in self.solver.unsat_core()
                if m.get_id() in name_of}


def run_split(size: int) -> int:
    """Where CoreFinder._run_goes splits a run of `size` parts whose whole deletion
    did not clash: after the larger half. Any split gives the same core (each part's
    decision is the one deletion in name order makes); only the checks asked differ.
    Over the 26 refusals of bench.warm, Z3's work in the cores fell 55.1 -> 51.6 M
    rlimit (268 -> 256 checks) against the smaller half first, and 118.1 -> 113.6 M
    over 46 other refusals: the consent rules a core keeps sort late more often."""
    return (size + 1) // 2


def _implies(mark, part, ctx: z3.Context):
    """z3.Implies(mark, part) through the C API where `part` is a Bool term."""
    if isinstance(part, z3.BoolRef):
        return z3.BoolRef(z3.Z3_mk_implies(ctx.ref(), mark.as_ast(), part.as_ast()), ctx)
    return z3.Implies(mark, part)


def feasibility(problem: Problem) -> Outcome:
    """Satisfiable or not, with the minimal core; no optimisation (for tests
    that only ask whether a query is refused, and by which rules)."""
    model = Model(problem)
    if CoreFinder(model).clash() is None:
        return Outcome("feasible", model=model)
    return Outcome("infeasible", core=minimal_core(model), model=model)


def minimal_core(model: Model) -> list[str]:
    """The parts that clash, minimised by deletion: every part left is needed. A
    core without consent rules is preferred where one exists: "you set X" or a
    limit is a reason the user can act on, while a "not allowed" optin in the core
    would send them to an --allow that cannot help (allow_optins finds no fix then
    either), and which of two true cores Z3 hands back depends only on how the
    KB's expressions happen to be written."""
    finder = core_finder(model)
    optin_of = model.p.program.optin_of
    consent = tuple(name for name in model.parts
                    if name.startswith("rule:") and optin_of(name[5:]) is not None)
    likely, grouped = _likely(consent), frozenset(consent).__contains__
    if consent:
        core = finder.clash(without=consent, likely=likely)
        if core is not None:
            return core
    return finder.clash(likely=likely, grouped=grouped) or []


def core_finder(model: Model) -> CoreFinder:
    """The model's one CoreFinder (its solver keeps what earlier checks learnt), for
    the refusal's core and the fixes after it."""
    finder = model.__dict__.get("_finder")
    if finder is None:
        finder = model._finder = CoreFinder(model)
    return finder


def release(model: Model) -> None:
    """Let `model` go by reference counting: it and its CoreFinder (core_finder) refer to
    each other, so the pair, its Z3 context and every term waited for the cyclic
    collector (its finalizers over the terms and a Z3_del_context with all of them alive,
    ~30-40 ms a refusal)."""
    model.__dict__.pop("_finder", None)


def _likely(consent: tuple):
    """The parts a refusal's minimal core usually keeps: the budgets, the user's pins
    and the consent rules (a guess for CoreFinder.clash: it saves checks, never
    changes the core)."""
    consent = frozenset(consent)
    return lambda name: name.startswith(("memory:", "pin:")) or name in consent
