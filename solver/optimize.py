"""Solve a Problem with Z3: the fastest feasible assignment, or a minimal core.

Objectives, in order: time per unit of work; soft preferences tier by tier;
device memory; options kept at their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from kbsolve.solver.compile import Compiler
from kbsolve.solver.metrics import Metrics, full_assignment, measure
from kbsolve.solver.problem import Problem

SEED = 7


@dataclass
class Outcome:
    status: str  # optimal | feasible | infeasible | unknown
    chosen: dict[str, Any] = field(default_factory=dict)
    metrics: Metrics | None = None
    core: list[str] = field(default_factory=list)


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
        times = [self.c.num(t.expr) for t in self.p.items(self.p.kb.speed) if t.kind == "time"]
        current = z3.Sum(times) if times else self.c._real(0)
        for factor in (t for t in self.p.items(self.p.kb.speed) if t.kind == "factor"):
            base = current
            current = self.c._split(factor.expr, lambda v, base=base: base * self.c._real(v))
        works = self.p.items(self.p.kb.work)
        if not works:
            return current
        step = current
        return self.c._split(works[0].expr,
                             lambda v: step / self.c._real(v) if v else step)

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


def solve(problem: Problem, timeout_ms: int = 10000) -> Outcome:
    model = Model(problem)
    opt = z3.Optimize(ctx=model.c.ctx)
    opt.set(priority="lex", timeout=timeout_ms)
    z3.set_param("smt.random_seed", SEED)
    for constraint in model.c.domain_constraints():
        opt.add(constraint)
    for name, part in model.parts.items():
        opt.add(part)
    opt.minimize(model.time_per_work())
    for tier, score in model.preference_scores().items():
        opt.maximize(score)
    opt.minimize(model.memory)
    opt.maximize(model.defaults_kept())
    result = opt.check()
    if result == z3.unsat:
        return Outcome("infeasible", core=minimal_core(model, timeout_ms))
    try:
        z3model = opt.model()
    except z3.Z3Exception:
        return Outcome("unknown")
    chosen = model.c.decode(z3model)
    metrics = measure(problem, full_assignment(problem, chosen))
    status = "optimal" if result == z3.sat else ("feasible" if metrics.feasible else "unknown")
    return Outcome(status, chosen, metrics)


def minimal_core(model: Model, timeout_ms: int, extra: tuple = ()) -> list[str]:
    """The parts that clash (with `extra` assumed), minimised by deletion:
    every part left is needed. Empty when nothing clashes."""
    solver = z3.Solver(ctx=model.c.ctx)
    solver.set(timeout=timeout_ms)
    for constraint in model.c.domain_constraints() + list(extra):
        solver.add(constraint)
    marks = {name: z3.Bool(name, model.c.ctx) for name in model.parts}
    for name, part in model.parts.items():
        solver.add(z3.Implies(marks[name], part))
    if solver.check(list(marks.values())) != z3.unsat:
        return []
    core = sorted(str(m) for m in solver.unsat_core())
    for name in list(core):
        if solver.check([marks[n] for n in core if n != name]) == z3.unsat:
            core.remove(name)
    return core
