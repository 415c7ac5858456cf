"""Minimal fixes for an infeasible query: pins to drop (MaxSAT over soft
pins, in the spirit of Kconfig's ConfigFix) and hardware that would do."""

from __future__ import annotations

from typing import Callable

import z3

from kbsolve.solver.prove import CoreFinder, Model, core_finder
from kbsolve.results.plan import Fix
from kbsolve.program.problem import Problem

MAX_PIN_FIXES = 2


def drop_pins(model: Model) -> list[Fix]:
    """The smallest sets of pins whose removal makes the query feasible (_drops)."""
    pins = {name: part for name, part in model.parts.items() if name.startswith("pin:")}
    return [Fix(kind="drop_pins", drop=names, description="drop " + ", ".join(names))
            for names in ([_pin_text(model.p, n) for n in dropped]
                          for dropped in _drops(model, pins))]


def allow_optins(model: Model, core: list[str] | None = None) -> list[Fix]:
    """The smallest sets of optins whose consent (--allow) makes the query feasible
    (none when the refusal's minimal `core` holds no consent rule: the MaxSAT keeps
    every other part, so the core's parts still clash and it would find none; and no
    further fix once every consent rule of the core must be kept, for the same
    reason)."""
    optin_of = model.p.program.optin_of
    consent = {name: part for name, part in model.parts.items()
               if name.startswith("rule:") and optin_of(name[5:]) is not None}
    if core is not None and not consent.keys() & set(core):
        return []
    fixes = []
    for dropped in _drops(model, consent, core):
        names = [optin_of(n[5:]).name for n in dropped]
        fixes.append(Fix(kind="allow", allow=names,
                         description=f"pass --allow {','.join(names)}"))
    return fixes


def _drops(model: Model, soft: dict, core: list[str] | None = None) -> list[list[str]]:
    """_smallest_drops of the soft parts `soft` (pins, consent rules), settled by
    plain checks of the refusal's CoreFinder where fixes of one part exist. Every
    fix of one part is a part whose drop alone gives a plan (with the minimal `core`
    given, one of its parts: with every part of the core kept it still clashes).

    Several: the first two in name order. (The MaxSAT met equal optima in whatever
    order Z3's context happened to give: one query's two consent fixes swapped when
    a memory Sum's terms were compiled in another order, and again when other
    checks ran on the context first.) Exactly one: it is the MaxSAT's first optimum,
    and the second must keep it: none when the core holds no other soft part, or
    when the rest clashes with every other soft part dropped; else the MaxSAT finds
    the second. None: when the rest clashes with every soft part dropped there is
    no fix at all; else (every fix drops two or more), or where a check ran out of
    its rlimit, the MaxSAT is asked, as it always was."""
    if not soft:
        return []
    finder = core_finder(model)
    ours = sorted(set(core) & soft.keys()) if core is not None else sorted(soft)
    answers = {name: finder.check(without=(name,)) for name in ours}
    alone = [name for name, answer in answers.items() if answer == z3.sat]
    if z3.unknown in answers.values():
        return _smallest_drops(model, soft, core)
    if not alone:
        if finder.check(without=tuple(soft)) == z3.unsat:
            return []
        return _smallest_drops(model, soft, core)
    if len(alone) > 1:
        return [[name] for name in alone[:MAX_PIN_FIXES]]
    first = [alone[0]]
    if core is not None and set(ours) <= set(first):
        return [first]
    if finder.check(without=tuple(n for n in soft if n != alone[0])) == z3.unsat:
        return [first]
    return _smallest_drops(model, soft, core, found=[first])


def _smallest_drops(model: Model, pins: dict, core: list[str] | None = None,
                    found: list | None = None) -> list[list[str]]:
    """MaxSAT: the smallest sets of the soft parts `pins` to drop for a solution.
    With the query's minimal `core`: once the fixes found leave every soft part of
    the core kept (each earlier fix dropped one part alone, and the next must keep
    it), every part of the core is hard and still clashes, so the MaxSAT is
    unsatisfiable without asking it. `found`: the first fixes, already known."""
    if not pins:
        return []
    fixes = list(found or [])
    blocked: list = list(fixes)
    for _ in range(MAX_PIN_FIXES - len(fixes)):
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
    """Some plan fits (_first_plan)."""
    return _first_plan(problem, orders)[0]


def _first_plan(problem: Problem, orders: dict | None = None) -> tuple[bool, dict | None]:
    """Whether some plan fits, and the plan (None where Z3 decided): a first-plan
    search of the branch and bound, Z3 only when its counted budget runs out.
    `orders` (open options -> a search order) lets candidates with the same open
    options take the first one's order instead of computing their own (about two
    thirds of the search's preparation); the order changes how many nodes the
    search takes, never its answer. The search builds no time or preference
    tables (solver/feasible.py): a first plan is all it looks for."""
    from kbsolve.solver.feasible import FeasibilitySearch
    search = FeasibilitySearch(problem)
    if orders is not None:
        known = orders.get(tuple(search.keys))
        if known is not None and not search.prepare(known):
            return False, None  # arc consistency leaves some option no value
    found = search.run(first=True, budget=FEASIBILITY_BUDGET)
    if orders is not None and getattr(search, "axes", None) is not None:
        orders.setdefault(tuple(search.keys), list(search.axes))
    if found.status == "budget":
        return CoreFinder(Model(problem)).clash() is None, None
    if found.chosen is None:
        return False, None
    return True, {**problem.fixed, **found.chosen}


WITNESS_TRIES = 24  # exact measures of a fitting shape's plan on the next shape


def _witnessed(problem: Problem, plan: dict) -> bool:
    """The plan of a shape that fits, or it with one open option changed, is a plan
    of `problem` too (measured exactly, as the search's leaves are): then a plan
    fits and no search is needed. False says nothing (the search decides). More of
    the same GPU usually keeps the plan but for the gradient accumulation the global
    batch rule asks for (20 of the 26 refusals of bench.warm: 8-15 measures, ~4 ms,
    against a first-plan search's ~35 ms)."""
    from kbsolve.program.evaluate import options_read
    choices = problem.choices
    kept = {key: _among(values, plan.get(key, _NONE)) for key, values in choices.items()}
    if _NONE in kept.values():
        return False
    assignment = {**problem.fixed, **kept}
    metrics = _measured(problem, assignment)
    if metrics is None or metrics.feasible:
        return metrics is not None
    rules = {f"{r.framework}.{r.id}": r for r in problem.rules}
    read = set().union(*[options_read(problem.kb, rules[name].constraint)
                         for name in metrics.broken])
    tries = WITNESS_TRIES
    for key in sorted(read & choices.keys()):
        for value in choices[key]:
            if value == assignment[key]:
                continue
            if tries == 0:
                return False
            tries -= 1
            metrics = _measured(problem, {**assignment, key: value})
            if metrics is not None and metrics.feasible:
                return True
    return False


_NONE = object()


def _among(values: list, value):
    """The value of `values` equal to `value` and of its type (True is no 1), or _NONE."""
    return next((v for v in values if type(v) is type(value) and v == value), _NONE)


def _measured(problem: Problem, assignment: dict):
    """measure(), None where the evaluator fails on this assignment (one the search
    would have cut before its leaf)."""
    from kbsolve.diagnostics import KbError
    from kbsolve.program.metrics import measure
    try:
        return measure(problem, assignment, lazy=True)
    except (KbError, ArithmeticError, KeyError, TypeError, ValueError):
        return None


def hardware(candidates: list[tuple[str, Callable[[], Problem]]], limit: int = 2) -> list[Fix]:
    """The first hardware candidates (cheapest first) under which the pins and rules
    hold. After a shape that fits, the next is first tried with its plan
    (_witnessed): a plan that fits decides it as the search would (the search finds
    a plan wherever one exists), so the same fixes."""
    fixes = []
    orders: dict = {}  # the first candidate's search order, for the shapes after it
    plan = None  # the last fitting shape's plan, where a search found one
    for gpus, build in candidates:
        try:
            problem = build()
        except Exception:  # a candidate the catalog cannot describe is simply skipped
            continue
        fits = plan is not None and _witnessed(problem, plan)
        if not fits:
            fits, found = _first_plan(problem, orders)
            plan = found or plan
        if fits:
            fixes.append(Fix(kind="hardware", gpus=gpus, description=f"use {gpus}"))
            if len(fixes) >= limit:
                break
    return fixes
