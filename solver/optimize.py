"""Solve a Problem with Z3: the fastest feasible assignment, or a minimal core.

Objectives, in order: time per unit of work; soft preferences tier by tier;
device memory; options kept at their defaults.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from kbsolve.dsl import ir
from kbsolve.dsl.types import NUM

from kbsolve.solver.compile import Compiler
from kbsolve.solver.local_search import hill_climb
from kbsolve.solver.metrics import Metrics, full_assignment, measure
from kbsolve.solver.problem import Problem

SEED = 7


@dataclass
class Outcome:
    status: str  # optimal | feasible | infeasible | unknown
    chosen: dict[str, Any] = field(default_factory=dict)
    metrics: Metrics | None = None
    core: list[str] = field(default_factory=list)
    model: "Model | None" = None


class Model:
    """The compiled constraints of a Problem, as named (trackable) parts."""

    def __init__(self, problem: Problem):
        self.p = problem
        self.c = Compiler(problem)
        self.parts: dict[str, z3.BoolRef] = {}
        for rule in problem.items(problem.kb.rules):
            self.parts[f"rule:{rule.framework}.{rule.id}"] = self.c.term(rule.constraint)
        for key, value in sorted(problem.pinned.items()):
            if key in problem.choices:
                self.parts[f"pin:{key}"] = self.c.equals(key, value)
        for option in problem.options:
            if option.when is not None and option.key in problem.choices:
                self.parts[f"when:{option.key}"] = z3.Implies(
                    z3.Not(self.c.term(option.when)), self.c.equals(option.key, option.default))
        self.memory = self._memory_total()
        budget = self.c._real(problem.budget_bytes)
        self.parts["memory:fit"] = self.memory <= budget

    def _memory_total(self):
        terms = [self.c.num(t.expr) for t in self.p.items(self.p.kb.memory)
                 if t.location == "gpu"]
        return z3.Sum(terms) if terms else self.c._real(0)

    def time_per_work(self):
        """(sum of time terms / work) x (product of factors), built as IR so that
        each quotient and the product of factors can become a small table."""
        speed = self.p.items(self.p.kb.speed)
        work = self.p.throughput_work
        per_work = []
        for term in (t for t in speed if t.kind == "time"):
            node = term.expr
            if work is not None:
                node = ir.Op("/", (node, work.expr), NUM, term.meta.span)
            per_work.append(self.c.num(node))
        total = self.c.named(z3.Sum(per_work) if per_work else self.c._real(0))
        factors = [t.expr for t in speed if t.kind == "factor"]
        if not factors:
            return total
        product = factors[0]
        for factor in factors[1:]:
            product = ir.Op("*", (product, factor), NUM, factor.span)
        self._keep = product  # the compiler memoises by id: keep the node alive
        return self.c._split(product, lambda v: total * self.c._real(v))

    def preference_scores(self) -> dict[int, Any]:
        tiers: dict[int, list] = {}
        for pref in self.p.items(self.p.kb.preferences):
            term = self.c.term(pref.expr)
            weight = self.c._real(pref.weight)
            score = z3.If(term, weight, self.c._real(0)) if z3.is_bool(term) else weight * term
            tiers.setdefault(pref.tier, []).append(score)
        return {tier: z3.Sum(scores) for tier, scores in sorted(tiers.items())}

    def defaults_kept(self):
        kept = [z3.If(self.c.equals(k, self.p.kb.options[k].default), 1, 0)
                for k in self.p.choices if self.p.kb.options[k].default in self.p.choices[k]]
        return z3.Sum(kept) if kept else z3.IntVal(0, self.c.ctx)


def solve(problem: Problem, timeout_ms: int = 10000, avoid: list | None = None) -> Outcome:
    """Lexicographic optimum by successive tightening: after each satisfying
    model, demand a strictly better value of the current objective; when that
    is unsatisfiable, fix the objective at its best value and go to the next."""
    deadline = time.monotonic() + timeout_ms / 1000
    model = Model(problem)
    objectives = [("min", model.time_per_work())]
    objectives += [("max", score) for _, score in model.preference_scores().items()]
    objectives += [("min", model.memory), ("max", model.defaults_kept())]
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
        return Outcome("infeasible", core=minimal_core(model, timeout_ms), model=model)
    if first != z3.sat:
        return Outcome("unknown", model=model)
    best = _polished(problem, model, solver, solver.model(), deadline)
    complete = True
    for sense, term in objectives:
        value = best.eval(term, model_completion=True)
        solver.push()
        while True:
            solver.add(term < value if sense == "min" else term > value)
            result = _check(solver, deadline)
            if result != z3.sat:
                complete = complete and result == z3.unsat
                break
            best = _polished(problem, model, solver, solver.model(), deadline)
            value = best.eval(term, model_completion=True)
        solver.pop()
        solver.add(term <= value if sense == "min" else term >= value)
        if not complete:
            break
    chosen = model.c.decode(best)
    metrics = measure(problem, full_assignment(problem, chosen))
    return Outcome("optimal" if complete else "feasible", chosen, metrics, model=model)


def _polished(problem: Problem, model: Model, solver: z3.Solver, first, deadline: float):
    """Improve the first model by local search in the reference evaluator (one
    option at a time), so that tightening starts near the optimum; the search
    only picks the starting point, Z3 still proves optimality."""
    chosen = hill_climb(problem, model.c.decode(first))
    solver.push()
    for key, value in chosen.items():
        solver.add(model.c.equals(key, value))
    result = _check(solver, deadline)
    polished = solver.model() if result == z3.sat else first
    solver.pop()
    return polished


def _check(solver: z3.Solver, deadline: float):
    left = int((deadline - time.monotonic()) * 1000)
    if left <= 0:
        return z3.unknown
    solver.set("timeout", left)
    return solver.check()


class CoreFinder:
    """One solver holding every part behind a marker, to ask many questions:
    is the model satisfiable with these extra assumptions, and if not, which
    parts clash (a minimal core)?"""

    def __init__(self, model: Model, timeout_ms: int = 10000):
        self.model = model
        self.solver = z3.Solver(ctx=model.c.ctx)
        self.solver.set("timeout", timeout_ms)
        for constraint in model.c.domain_constraints():
            self.solver.add(constraint)
        self.marks = {name: z3.Bool(name, model.c.ctx) for name in model.parts}
        for name, part in model.parts.items():
            self.solver.add(z3.Implies(self.marks[name], part))

    def clash(self, extra: list | None = None, without: tuple = ()) -> list[str] | None:
        """None when satisfiable; else the minimal core (names of parts)."""
        extra = extra or []
        names = [n for n in self.marks if n not in without]
        if self.solver.check([self.marks[n] for n in names] + extra) != z3.unsat:
            return None
        core = sorted(str(m) for m in self.solver.unsat_core() if str(m) in self.marks)
        for name in list(core):
            trial = [self.marks[n] for n in core if n != name] + extra
            if self.solver.check(trial) == z3.unsat:
                core.remove(name)
        return core


def minimal_core(model: Model, timeout_ms: int) -> list[str]:
    """The parts that clash, minimised by deletion: every part left is needed."""
    return CoreFinder(model, timeout_ms).clash() or []
