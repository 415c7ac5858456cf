"""Minimal fixes for an infeasible query: pins to drop (MaxSAT over soft
pins, in the spirit of Kconfig's ConfigFix) and hardware that would do."""

from __future__ import annotations

from typing import Callable

import z3

from kbsolve.solver.prove import CoreFinder, Model
from kbsolve.results.plan import Fix
from kbsolve.program.problem import Problem

MAX_PIN_FIXES = 2


def drop_pins(model: Model) -> list[Fix]:
    """The smallest sets of pins whose removal makes the query feasible. Always asked
    where there are pins: its Optimize adds terms to the model's Z3 context, and the
    consent MaxSAT after it (allow_optins) may order equal optima by them."""
    pins = {name: part for name, part in model.parts.items() if name.startswith("pin:")}
    return [Fix(kind="drop_pins", drop=names, description="drop " + ", ".join(names))
            for names in ([_pin_text(model.p, n) for n in dropped]
                          for dropped in _smallest_drops(model, pins))]


def allow_optins(model: Model, core: list[str] | None = None) -> list[Fix]:
    """The smallest sets of optins whose consent (--allow) makes the query feasible
    (none when the refusal's minimal `core` holds no consent rule: the MaxSAT keeps
    every other part, so the core's parts still clash and it would find none; and no
    further fix once every consent rule of the core must be kept, for the same
    reason). The last question asked of the model's Z3 context: skipping it changes
    no later one."""
    optin_of = model.p.program.optin_of
    consent = {name: part for name, part in model.parts.items()
               if name.startswith("rule:") and optin_of(name[5:]) is not None}
    if core is not None and not consent.keys() & set(core):
        return []
    fixes = []
    for dropped in _smallest_drops(model, consent, core):
        names = [optin_of(n[5:]).name for n in dropped]
        fixes.append(Fix(kind="allow", allow=names,
                         description=f"pass --allow {','.join(names)}"))
    return fixes


def _smallest_drops(model: Model, pins: dict, core: list[str] | None = None) -> list[list[str]]:
    """MaxSAT: the smallest sets of the soft parts `pins` to drop for a solution.
    With the query's minimal `core`: once the fixes found leave every soft part of
    the core kept (each earlier fix dropped one part alone, and the next must keep
    it), every part of the core is hard and still clashes, so the MaxSAT is
    unsatisfiable without asking it."""
    if not pins:
        return []
    fixes = []
    blocked: list = []
    for _ in range(MAX_PIN_FIXES):
        kept = {d[0] for d in blocked if len(d) == 1}
        if core is not None and set(core) & pins.keys() <= kept:
            break  # the core's parts all hold: no solution (opt.check() would say unsat)
        opt = z3.Optimize(ctx=model.c.ctx)
        for constraint in model.c.domain_constraints():
            opt.add(constraint)
        for name, part in model.parts.items():
            if name not in pins:
                opt.add(part)
        keep = {name: z3.Bool(f"keep:{name}", model.c.ctx) for name in pins}
        for name, part in pins.items():
            opt.add(z3.Implies(keep[name], part))
            opt.add_soft(keep[name], 1)
        for dropped in blocked:  # another fix must keep one of the pins the last dropped
            opt.add(z3.Or([keep[n] for n in dropped]))
        if opt.check() != z3.sat:
            break
        result = opt.model()
        dropped = sorted(n for n in pins if not z3.is_true(result.eval(keep[n])))
        if not dropped:
            break
        blocked.append(dropped)
        fixes.append(dropped)
    return fixes


def _pin_text(problem: Problem, part: str) -> str:
    key = part.split(":", 1)[1]
    option = problem.kb.options[key]
    value = problem.pinned[key]
    shown = str(value).lower() if isinstance(value, bool) else str(value)
    return f"{option.name}={shown}"


FEASIBILITY_BUDGET = 20_000  # branch-and-bound nodes before Z3 decides a candidate


def _feasible(problem: Problem, orders: dict | None = None) -> bool:
    """Some plan fits: a first-plan search of the branch and bound, Z3 only when its
    counted budget runs out. `orders` (open options -> a search order) lets
    candidates with the same open options take the first one's order instead of
    computing their own (about two thirds of the search's preparation); the order
    changes how many nodes the search takes, never its answer. The search builds no
    time or preference tables (solver/feasible.py): a first plan is all it looks for."""
    from kbsolve.solver.feasible import FeasibilitySearch
    search = FeasibilitySearch(problem)
    if orders is not None:
        known = orders.get(tuple(search.keys))
        if known is not None and not search.prepare(known):
            return False  # arc consistency leaves some option no value
    found = search.run(first=True, budget=FEASIBILITY_BUDGET)
    if orders is not None and getattr(search, "axes", None) is not None:
        orders.setdefault(tuple(search.keys), list(search.axes))
    if found.status == "budget":
        return CoreFinder(Model(problem)).clash() is None
    return found.chosen is not None


def hardware(candidates: list[tuple[str, Callable[[], Problem]]], limit: int = 2) -> list[Fix]:
    """The first hardware candidates (cheapest first) under which the pins and rules hold."""
    fixes = []
    orders: dict = {}  # the first candidate's search order, for the shapes after it
    for gpus, build in candidates:
        try:
            problem = build()
        except Exception:  # a candidate the catalog cannot describe is simply skipped
            continue
        if _feasible(problem, orders):
            fixes.append(Fix(kind="hardware", gpus=gpus, description=f"use {gpus}"))
            if len(fixes) >= limit:
                break
    return fixes
