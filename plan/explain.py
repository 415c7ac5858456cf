"""Why each option has its value; the kinds are defined in docs/solver.md
(Explanations): default, pinned, forced, optimum, tie, speed, memory, preference,
fact, recipe.

Every alternative value is first measured as a neighbour of the plan (only
this option changed, options whose `when` turns false back to their defaults).
Only when that neighbour is not a feasible plan is the question "could this
value hold at all?" asked: of the branch and bound's tables (rules that rule
it out, a search for any feasible plan with it), and of Z3 only when that
search's node budget runs out or the plan came from Z3.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from typing import TYPE_CHECKING

from kbsolve.collector import paused
from kbsolve.program.consent import consent_detail
from kbsolve.program.metrics import Metrics, broken_rules, measure, sort_key
from kbsolve.program.problem import Problem, satisfiable
from kbsolve.program.recipe import is_recipe, provenance
from kbsolve.solver.bounds import ValueBounds
from kbsolve.solver.guard import expired
from kbsolve.results.plan import Choice, Reason
from kbsolve.plan.alternatives import VIEW_SLACK, view_first
from kbsolve.plan.report import (band_bytes, band_key, band_measured, gib, option_key, plain,
                                   reason)

if TYPE_CHECKING:
    from kbsolve.solver.prove import Model


EXPLAIN_BUDGET = 20_000  # nodes per "is this value possible at all?" search


class Unexplained(Exception):
    """The --timeout guard expired while explaining."""


def explain(problem: Problem, model: Model | None, assignment: dict[str, Any],
            metrics: Metrics, search=None, met: list | None = None,
            deadline: float = math.inf) -> list[Choice]:
    """One Choice per option; `met` collects (changes, metrics) of every
    feasible plan measured on the way (the alternatives' candidates).

    Python's cyclic collector is paused while it runs, as solver/search.run
    pauses it: an explanation runs a search or two per deciding option, and
    each search leaves its tables' ranges and memo entries young, so the
    collections its allocations set off between the searches traversed them
    again and again (gen-1 passes of ~10 ms) and found no cycles to free.
    What the explanation leaves alive is collected after it, once."""
    with paused():
        return _explain(problem, model, assignment, metrics, search, met, deadline)


def _explain(problem: Problem, model: Model | None, assignment: dict[str, Any],
             metrics: Metrics, search, met: list | None, deadline: float) -> list[Choice]:
    met = [] if met is None else met
    views = _Views(problem, search)
    finder = _oracle(problem, model, search, assignment, met, views)
    choices = []
    for option in problem.options:
        if expired(deadline):
            raise Unexplained
        key = option.key
        value = assignment[key]
        base = dict(option=option.name, key=option_key(problem.kb, option), value=plain(value))
        base["is_default"] = value == option.default
        applies = option.when is None or problem.evaluator.run(option.when, assignment)
        if key in problem.pinned:
            detail = problem.pin_detail(key) + ("" if applies else
                                                "; it does not apply under this plan")
            kind = "default" if key in problem.defaulted else "pinned"  # the task's default
            choices.append(Choice(**base, kind=kind, reasons=[
                Reason(rule=f"pin:{option.name}", detail=detail)]))
        elif not applies:
            choices.append(Choice(**base, kind="n/a", reasons=[Reason(
                rule=f"when:{option.name}", location=str(option.meta.span),
                detail=f"{option.name} does not apply under this plan (its 'when' is false); "
                       f"it keeps its default and is not written")]))
        elif key not in problem.choices:
            choices.append(_fixed(problem, option, base, assignment))
        else:
            choices.append(_decided(problem, finder, option, value, assignment, metrics, base,
                                    met, search, views))
    return choices


TIE_PCT = 0.5  # differences in time below this are ties, not reasons


def shown(value) -> str:
    """A value as the user writes it (--set, YAML): true, not True."""
    return str(value).lower() if isinstance(value, bool) else str(plain(value))


def _fixed(problem: Problem, option, base: dict, assignment: dict[str, Any]) -> Choice:
    if is_recipe(problem.kb, option):
        cited = provenance(problem, option, assignment) or [option]
        return Choice(**base, kind="recipe", reasons=[Reason(
            rule=getattr(item, "key", option.key), because=item.meta.because,
            source=item.meta.source, location=str(item.meta.span),
            detail=f"default from {item.meta.source} — review") for item in cited])
    if option.source_expr is not None:
        return Choice(**base, kind="fact", reasons=[Reason(
            rule=option.key, source=option.meta.source, location=str(option.meta.span),
            detail=f"follows the query ({option.name} comes from a fact)")])
    return Choice(**base, kind="default", reasons=[Reason(
        rule=option.key, source=option.meta.source, location=str(option.meta.span),
        detail="a free setting: the default unless you set it")])


def _oracle(problem: Problem, model: Model | None, search, assignment: dict[str, Any],
            met: list, views: _Views):
    """clash(key, value): None when some feasible plan has key=value, else the
    parts that rule it out."""
    finder: list = []

    def by_z3(key, value, outside=False):
        if not finder:
            from kbsolve.solver.prove import CoreFinder, Model  # Z3, only when asked
            finder.append(CoreFinder(model or Model(problem)))
        return finder[0].clash([finder[0].model.c.equals(key, value)], without=(f"pin:{key}",))

    if search is None:
        return by_z3

    witnessed: set = set()  # (key, value) pairs some feasible plan found so far holds
    local = _local_rules(problem)
    bounds = ValueBounds(search)  # per-value answers from the search's tables, read once

    def clash(key, value, outside=False):
        """`outside`: arc consistency took key=value out (_Views.taken_out), so no
        plan has it and no repair is tried."""
        for changes, _ in met[len(seen):]:
            seen.append(None)
            witnessed.update((k, repr(v)) for k, v in changes.items())
        if (key, repr(value)) in witnessed:
            return None
        for rule, others in local.get(key, ()):  # a rule that alone rules it out
            name = f"rule:{rule.framework}.{rule.id}"
            allows = bounds.rule_allows(name, key, value, others)
            if allows is None:  # not one table: try its other options' values
                allows = satisfiable(problem, [rule], others, {**assignment, key: value})
            if not allows:
                return [name]
        repaired = None if outside else _repaired(problem, search, assignment, key, value, views)
        if repaired is not None:
            met.append(repaired)
            return None
        core = search.clash(key, value, assignment, EXPLAIN_BUDGET, bounds.refuted)
        if core is None and search.last_found is not None:
            chosen, plan = search.last_found
            met.append((changed(assignment, chosen),
                        _Found(plan, views(chosen))))
        return by_z3(key, value) if core == "budget" else core
    seen: list = []
    return clash


LOCAL_LIMIT = 512  # assignments of a rule's other options tried before a search


def _local_rules(problem: Problem) -> dict[str, list]:
    """Option key -> (rule, the rule's other decided options) for the rules that
    read it and few enough other combinations to try them all: whether such a
    rule alone rules a value out needs no search."""
    from kbsolve.program.evaluate import options_read
    found: dict[str, list] = {}
    for rule in problem.rules:
        reads = sorted(options_read(problem.kb, rule.constraint) & set(problem.choices))
        for key in reads:
            others = [k for k in reads if k != key]
            if math.prod(len(problem.choices[k]) for k in others) <= LOCAL_LIMIT:
                found.setdefault(key, []).append((rule, others))
    return found


REPAIR_TRIES = 64  # float views tried before a feasibility search


def _repaired(problem: Problem, search, assignment: dict[str, Any], key: str, value,
              views: _Views):
    """(changes, metrics) of a feasible plan with key=value that changes one
    more option, one that the rules the plain neighbour breaks read; None when
    none of the first REPAIR_TRIES such plans is feasible."""
    base = _settled(problem, {**assignment, key: value}, views.conditional)
    view = views(base)
    if view is None or not view.broken:
        return None
    touched = sorted({k for name in view.broken for k in search.rule_options(name)}
                     - {key} - set(problem.pinned))
    tries = 0
    for other in touched:
        for alt in problem.choices[other]:
            if alt == base[other]:
                continue
            tries += 1
            if tries > REPAIR_TRIES:
                return None
            candidate = _settled(problem, {**base, other: alt}, views.conditional)
            if candidate[key] != value:
                continue
            seen = views(candidate)
            if seen is not None and seen.feasible:
                exact = measure(problem, candidate, lazy=True)
                if exact.feasible:
                    return (changed(assignment, candidate),
                            _Found(exact, seen))
    return None


def _decided(problem: Problem, clash, option, value, assignment, metrics,
             base: dict, met: list, search, views: _Views) -> Choice:
    alternatives = [(i, v) for i, v in enumerate(problem.choices[option.key]) if v != value]
    blocked: dict[Any, list[str]] = {}
    open_: list[Any] = []
    neighbours: dict[Any, Any] = {}
    best_key = sort_key(metrics)
    plan_view = views(assignment)
    taken = views.taken_out(option.key, assignment) if plan_view is not None else ()
    for index, alt in alternatives:
        settled = _settled(problem, {**assignment, option.key: alt}, views.conditional)
        outside = index in taken and settled[option.key] is alt  # kept, not reset
        neighbour = _Neighbour(problem, settled, search, metrics, best_key, plan_view, views,
                               outside)
        neighbours[alt] = neighbour
        if neighbour.feasible:
            met.append((changed(assignment, settled),
                        neighbour))
        core = None if neighbour.feasible else clash(option.key, alt, outside)
        if core is None:
            open_.append(alt)
        else:
            blocked[alt] = core
    rules = _core_reasons(problem, blocked, option, neighbours)
    if not open_:
        kept = _kept_without_consent(problem, option, blocked) if base["is_default"] else None
        if kept is not None:  # the default, and other values need the user's consent
            return Choice(**base, kind="default", reasons=[kept] + rules)
        return Choice(**base, kind="forced", reasons=rules or [Reason(
            rule=option.key, detail="no other value is allowed")])
    slower, too_big, worse_pref, same, coupled = [], [], [], [], []
    for alt in open_:
        neighbour = neighbours[alt]
        if not neighbour.valid:
            coupled.append((alt, neighbour))  # possible only with other changes
            continue
        if not neighbour.fits:
            too_big.append((alt, neighbour))
        elif neighbour.slower:
            slower.append((alt, neighbour))
        elif neighbour.worse_preferences:
            worse_pref.append((alt, neighbour))
        else:
            same.append((alt, neighbour))
    # exact figures only for the branch that prints them (a neighbour measures once)
    slower = _least(slower, "time")
    needs_more = [a for a, _ in too_big + coupled]  # feasible only with other changes
    if value != option.default and same:
        plan_device = metrics.levels["device"]
        same = [(a, n) for a, n in same if n.view is None or
                n.view.device > float(plan_device) * (1 - 1e-6)]
    if slower:
        alt, n = min(slower, key=lambda p: p[1].time_per_work)
        pct = float((n.time_per_work / metrics.time_per_work - 1) * 100) \
            if metrics.time_per_work else 100.0
        if pct >= TIE_PCT:
            detail = f"{option.name}={shown(alt)} fits but is {pct:.1f}% slower"
            return Choice(**base, kind="speed", reasons=[Reason(rule="speed", detail=detail)]
                          + _changed_terms(problem, metrics, n) + rules)
        tie = Choice(**base, kind="tie", reasons=[Reason(
            rule="tie", detail=f"a tie: {option.name}={shown(alt)} also fits and is within "
                               f"{TIE_PCT}% in time ({pct:.2f}% slower); "
                               + ("the default is kept" if base["is_default"] else
                                  "the plan keeps the faster"))] + rules)
    else:
        tie = None
    if too_big:  # each fits only with other changes: the best such plan decides
        alt, n = min(_least(too_big, "device"), key=lambda p: p[1].levels["device"])
        kind, decisive = _decisive(problem, search, option, needs_more, assignment, metrics, met)
        return Choice(**base, kind=kind, reasons=decisive + _too_big(problem, option, alt, n)
                      + rules)
    if worse_pref:
        prefs = [reason(p) for p in problem.program.preferences
                 if option.key in _option_refs(p.expr)]
        return Choice(**base, kind="preference", reasons=prefs or [Reason(
            rule="preference", detail="a soft preference or lower memory chose it")])
    if value != option.default:
        smaller = [(a, n.exact) for a, n in same
                   if n.exact.levels["device"] > metrics.levels["device"]]
        if smaller:
            alt, n = min(smaller, key=lambda p: p[1].levels["device"])
            saved = gib(n.levels["device"] - metrics.levels["device"])
            return Choice(**base, kind="memory", reasons=[Reason(
                rule="memory", detail=f"as fast as {option.name}={shown(alt)} and "
                                      f"{saved:.2f} GiB smaller (ties go to lower memory)")]
                + _grown_terms(problem, metrics, n))
    if tie is not None:
        return tie
    if coupled and not same:
        alt, n = coupled[0]
        needs = ", ".join(map(problem.program.name, n.broken)) or "an option's 'when'"
        kind, decisive = _decisive(problem, search, option, needs_more, assignment, metrics, met)
        return Choice(**base, kind=kind, reasons=decisive + [Reason(
            rule="optimum", detail=f"{option.name}={shown(alt)} alone breaks {needs}")] + rules)
    if value == option.default:
        return Choice(**base, kind="default", reasons=[Reason(
            rule=option.key, detail="nothing depends on it", source=option.meta.source,
            location=str(option.meta.span))])
    return Choice(**base, kind="tie", reasons=[Reason(  # not the default: say it is a tie
        rule="tie", detail="a tie: as fast and as small as the alternatives; kept by the "
                           "tie-breaks", source=option.meta.source,
        location=str(option.meta.span))])


def _kept_without_consent(problem: Problem, option, blocked: dict) -> Reason | None:
    """The default kept because other values need the user's consent (an optin):
    None unless some alternative is ruled out by consent rules alone."""
    optin_of = problem.program.optin_of
    optins = [optin_of(part.partition(":")[2]) for core in blocked.values()
              if core and all(p.startswith("rule:") and optin_of(p[5:]) is not None
                              for p in core) for part in core]
    if not optins:
        return None
    first = optins[0]
    names = sorted({o.name for o in optins})
    return Reason(rule=option.key, location=str(option.meta.span),
                  detail=f"the framework's default; other values are a {first.group} change "
                         f"({first.meta.doc.rstrip('.')}): pin one, or pass "
                         f"--allow {','.join(names)}")


DECISIVE_SHOWN = 3  # changed options named in a decisive comparison
DECISIVE_BUDGET = 500  # nodes of the search for the best plan with a rival value


def _decisive(problem: Problem, search, option, candidates: list, assignment: dict[str, Any],
              metrics: Metrics, met: list) -> tuple[str, list[Reason]]:
    """The kind (optimum, or tie within TIE_PCT) and the decisive comparison for a value
    whose every rival needs other changes: the best plan the search finds with any
    rival value (a counted budget, pruned from its first node against the known plan
    with one that comes closest), and that value."""
    known = [(changes, m) for changes, m in met
             if changes.get(option.key, assignment[option.key]) in candidates]
    known = [(c, m) for c, m in known if getattr(m, "exact", m).feasible]
    if not known:
        return "optimum", [Reason(rule="optimum", detail=f"every other {option.name} needs "
                                                         f"other changes too; the search "
                                                         f"weighed every such plan")]
    changes, rival = _least_known(known)
    alt = changes[option.key]
    proven = False
    if search is not None:  # every rival value, pruned against the known rival
        ceiling = tuple(float(x) for x in sort_key(rival))
        found = search.run(start={**assignment, **changes}, among={option.key: candidates},
                           budget=DECISIVE_BUDGET, ceiling=ceiling)
        if found.chosen is not None and sort_key(found.metrics) <= sort_key(rival):
            changes = changed(assignment, found.chosen)
            rival, alt = found.metrics, found.chosen[option.key]
            met.append((changes, rival))
        # none better than the rival, or the best of those: either way proven
        proven = found.status in ("optimal", "infeasible")
    others = [f"{problem.kb.options[k].name}={shown(v)}" for k, v in sorted(changes.items())
              if k != option.key]
    listed = ", ".join(others[:DECISIVE_SHOWN]) + \
        (f", +{len(others) - DECISIVE_SHOWN} more" if len(others) > DECISIVE_SHOWN else "")
    which = "the best plan" if proven else "the best plan found"
    detail = (f"{option.name}={shown(alt)} fits only with other changes; {which} with it "
              f"({listed}) {_compared(problem, metrics, rival)}")
    pct = float((rival.time_per_work / metrics.time_per_work - 1) * 100) \
        if metrics.time_per_work else 0.0
    if problem.objective == "speed" and pct < TIE_PCT:
        return "tie", [Reason(rule="tie", detail=f"a tie within {TIE_PCT}% in time: {detail}")]
    return "optimum", [Reason(rule="optimum", detail=detail)]


def _least_known(known: list) -> tuple[dict, Metrics]:
    """(changes, exact metrics) of the known plan least in sort_key, the first of
    equals, as min() over all of them finds it; measured exactly only where its float
    view (if any) is within the tolerance of the least view: one beyond it is larger
    in sort_key's first part (time, or memory under the memory objective)."""
    estimates = [view_first(m) for _, m in known]
    floor = min((e for e in estimates if e is not None), default=None)
    if floor is not None:
        slack = abs(floor) * VIEW_SLACK
        known = [pair for pair, e in zip(known, estimates) if e is None or e <= floor + slack]
    changes, best = min(known, key=lambda pair: sort_key(getattr(pair[1], "exact", pair[1])))
    return changes, getattr(best, "exact", best)


class _Found:
    """A feasible plan a search or a repair found: its exact Metrics (measured
    lazily past its memory) and its feasible float view, which ranks it
    (_least_known, plan/alternatives._ranked) until its figures are read."""

    def __init__(self, exact: Metrics, view):
        self.exact = exact
        self.float_view = view if view is not None and view.feasible else None


def _compared(problem: Problem, plan: Metrics, other: Metrics) -> str:
    """How a rival plan loses to the plan, on the objective's first difference."""
    pct = round(float((other.time_per_work / plan.time_per_work - 1) * 100), 2) \
        if plan.time_per_work else 0.0  # rounded as the alternatives are
    more = gib(other.levels["device"] - plan.levels["device"])
    time_part = f"is {pct:.1f}% slower" if pct >= 0.05 else "is as fast"
    memory_part = f"needs {more:.2f} GiB more per GPU" if more >= 0.005 else ""
    if problem.objective == "memory" and memory_part:
        return memory_part + (f" (and {time_part[3:]})" if pct >= 0.05 else "")
    if pct >= 0.05:
        return time_part
    if memory_part:
        return f"is as fast but {memory_part}"
    return "is as fast and as small; the plan wins on the preferences or keeps more defaults"


def _too_big(problem: Problem, option, alt, n: Metrics) -> list[Reason]:
    """Why a value does not fit, with the error band's part in it: a value that fits
    the model's prediction but not its band says so, and names the band."""
    over = n.levels["device"] - problem.budget_bytes
    band = band_bytes(problem, n)
    text = f"{option.name}={shown(alt)} alone"
    if not band:
        return [Reason(rule="memory:fit",
                       detail=f"{text} would need {gib(over):.2f} GiB more than the budget")]
    term = problem.kb.memory[band_key(problem)]
    if over <= band:
        detail = (f"{text} fits the model's prediction ({gib(n.levels['device'] - band):.2f} "
                  f"GiB of {gib(problem.budget_bytes):.2f} GiB) but not its error band: with "
                  f"the band it needs {gib(n.levels['device']):.2f} GiB, {gib(over):.2f} GiB "
                  f"more than the budget")
    else:
        detail = (f"{text} would need {gib(over):.2f} GiB more than the budget with the "
                  f"model's error band ({gib(over - band):.2f} GiB more without it)")
    return [_with_band(Reason(rule="memory:fit", detail=detail), term)]


def _with_band(fit: Reason, term) -> Reason:
    """The fit reason, with the error band's because and source (the band is what the
    budget is checked with, not a part of the clash)."""
    fit.because, fit.source, fit.location = term.meta.because, term.meta.source, \
        str(term.meta.span)
    return fit


def refused_on_memory(problem: Problem, detail: str) -> list[Reason]:
    """The reasons for 'memory:fit' in a refusal's core. Where the framework states an
    error band, the budget is checked at its upper end, and the smallest plan (the same
    pins and rules, no budget) says whether the model's prediction alone would fit."""
    key = band_key(problem)
    if key is None:
        return [Reason(rule="memory:fit", detail=detail)]
    if not band_measured(problem):
        term = problem.kb.memory[key]
        return [_with_band(Reason(rule="memory:fit", detail=f"{detail}; error band: "
                                                            f"{term.meta.because}"), term)]
    import copy
    from kbsolve.solver.optimize import solve
    unlimited = copy.copy(problem)
    unlimited.budget_bytes, unlimited.objective = Fraction(2) ** 80, "memory"
    found = solve(unlimited)
    detail += " at the model's error band's upper end"
    if found.metrics is not None and found.status != "infeasible":
        upper = found.metrics.levels["device"]
        low = upper - band_bytes(problem, found.metrics)
        least = "the plan with the least GPU memory (within the other limits)"
        if low <= problem.budget_bytes:
            detail += (f"; {least} fits the model's prediction ({gib(low):.2f} GiB) but not "
                       f"with its error band ({gib(upper):.2f} GiB)")
        else:
            detail += (f"; {least} needs {gib(low):.2f} GiB even without the band "
                       f"({gib(upper):.2f} GiB with it)")
    return [_with_band(Reason(rule="memory:fit", detail=detail), problem.kb.memory[key])]


class _Views:
    """What one explanation reads over and over, found once: search.view (None
    without a search), remembered per full assignment (the options the search
    decides, in its order) for as long as the search keeps one preparation, and
    the options _settled may reset. An explanation reads the plan's view once
    per option and many neighbours more than once (a repair of a=1 by b=2 is the
    repair of b=2 by a=1). A Fraction is keyed as (numerator, denominator), as the
    evaluator's memo keys are (Python 3.11 hashes a Fraction anew each time). A view is read-only; a new preparation
    (search.prepare makes a new tracker) starts afresh, so a remembered view is
    always the one search.view would return."""

    def __init__(self, problem: Problem, search):
        self.search = search
        self.conditional = _conditional(problem)
        self._tracker = None
        self._memo: dict[tuple, Any] = {}
        self._pins_kept: tuple | None = None  # (plan, whether it keeps every pin)

    def __call__(self, assignment: dict[str, Any]):
        s = self.search
        if s is None or not s.prepare():
            return None
        if s.tracker is not self._tracker:
            self._tracker, self._memo = s.tracker, {}
        slot = tuple([(v._numerator, v._denominator) if type(v) is Fraction else v
                      for v in map(assignment.__getitem__, s.order)])  # hashes fast
        found = self._memo.get(slot, _MISSING)
        if found is _MISSING:
            found = self._memo[slot] = s.view(assignment)
        return found

    def taken_out(self, key: str, plan: dict[str, Any]) -> frozenset[int]:
        """The indices of key's values that arc consistency took out of its domain
        (search.allowed), where the plan keeps every pin: a neighbour of the plan
        that changes key to one of them is outside (search.outside), known without
        its view; empty where unknown. Read after a view of the plan (prepared)."""
        s = self.search
        pins = self._pins_kept
        if pins is None or pins[0] is not plan:
            pins = self._pins_kept = (plan, not any(plan.get(k) != v
                                                    for k, v in s.p.pinned.items()))
        if not pins[1]:
            return frozenset()
        mask = s.allowed[s.keys.index(key)]
        return frozenset() if mask.all() else \
            frozenset([i for i, kept in enumerate(mask.tolist()) if not kept])


_MISSING = object()


class _Neighbour:
    """A neighbour of the plan, judged on the search's float tables where they
    decide safely, measured exactly (program/metrics) where they do not and
    wherever its numbers are shown."""

    def __init__(self, problem: Problem, assignment: dict[str, Any], search, plan: Metrics,
                 plan_key: tuple, plan_view, views: _Views, outside: bool = False):
        self.problem, self.assignment = problem, assignment
        self.plan, self.plan_key, self.plan_view = plan, plan_key, plan_view
        self._exact: Metrics | None = None
        # a value arc consistency took out (`outside`: known by the caller, no view
        # read): a rule is broken, known without measuring; infeasible and not valid
        # as a broken view would say, and nothing reads an invalid neighbour's view
        self.view = views(assignment) if plan_view is not None and not outside else None
        self.ruled_out = outside or self.view is None and plan_view is not None and \
            search.outside(assignment)
        if self.view is not None and self.view.feasible and any(
                _near(a, b) and a != b for a, b in zip(self.view.key, plan_view.key)):
            self.view = None  # a near tie (not the same float): settle it exactly

    @property
    def exact(self) -> Metrics:
        if self._exact is None:
            self._exact = measure(self.problem, self.assignment, lazy=True)
        return self._exact

    @property
    def broken(self) -> list[str]:
        """The rules it breaks, as program/metrics.measure lists them (the reference
        evaluator, the problem's rule order), without measuring its memory and time
        where it was not measured: all a coupled value's reason prints of it."""
        if self._exact is not None:
            return self._exact.broken
        return broken_rules(self.problem, self.problem.evaluator.remembering(self.assignment))

    @property
    def feasible(self) -> bool:
        if self.ruled_out:
            return False
        return self.view.feasible if self.view is not None else self.exact.feasible

    @property
    def valid(self) -> bool:  # no rule broken, no option set outside its 'when'
        if self.ruled_out:
            return False
        if self.view is not None:
            return not self.view.broken
        return not self.exact.broken and not self.exact.irrelevant_changed

    @property
    def fits(self) -> bool:
        return self.view.fits if self.view is not None else self.exact.fits

    @property
    def slower(self) -> bool:
        if self.view is not None:
            return self.view.time_per_work > self.plan_view.time_per_work
        return self.exact.time_per_work > self.plan.time_per_work

    @property
    def worse_preferences(self) -> bool:
        if self.view is not None:
            return self.view.key[:-2] > self.plan_view.key[:-2]
        return sort_key(self.exact)[:-2] > self.plan_key[:-2]


def _least(entries: list, side: str) -> list:
    """[(value, exact metrics)] of the entry least in time or device memory,
    measuring exactly only those whose float estimate is within the tolerance
    of the least one."""
    if not entries:
        return []

    def estimate(n):
        if n.view is None:
            return None
        return n.view.time_per_work if side == "time" else n.view.device

    known = [estimate(n) for _, n in entries if estimate(n) is not None]
    if known:
        floor = min(known)
        entries = [(a, n) for a, n in entries
                   if estimate(n) is None or estimate(n) <= floor + abs(floor) * 1e-6]
    exact = [(a, n.exact) for a, n in entries]
    return [min(exact, key=lambda pair: pair[1].time_per_work if side == "time"
                else pair[1].levels["device"])]


def _near(a, b) -> bool:
    a, b = float(a), float(b)
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b))


def changed(assignment: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """other's items whose value differs from assignment's (a key assignment lacks
    compares as None). The same object is the same value without a comparison:
    most of a neighbour's values are the plan's own (a Fraction's == is Python)."""
    out = {}
    for key, value in other.items():
        mine = assignment.get(key)
        if mine is not value and mine != value:
            out[key] = value
    return out


def _settled(problem: Problem, assignment: dict[str, Any],
             conditional: list | None = None) -> dict[str, Any]:
    """Options whose `when` no longer holds go back to their defaults, as they
    would in any plan (LoRA's rank under full fine-tuning); `conditional`: the
    problem's _conditional options, when the caller has them."""
    ev = problem.evaluator
    settled = dict(assignment)
    for other in _conditional(problem) if conditional is None else conditional:
        value = settled[other.key]
        if value is not other.default and value != other.default and \
                not ev.remembered(other.when, settled):
            settled[other.key] = other.default
    return settled


def _conditional(problem: Problem) -> list:
    """The options _settled may send back to their defaults (a `when`, decided by
    the solver, not pinned), in the problem's order."""
    return [o for o in problem.options
            if o.when is not None and o.key in problem.choices and o.key not in problem.pinned]


def _option_refs(node) -> set[str]:
    from kbsolve.dsl.ir import options_used
    return options_used(node)


def _core_reasons(problem: Problem, blocked: dict[Any, list[str]], option=None,
                  neighbours: dict | None = None) -> list[Reason]:
    found: dict[str, Reason] = {}
    ruled_out: dict[str, list[str]] = {}  # plain rule -> the values it rules out, in order
    for alt, core in blocked.items():
        for part in core:
            kind, _, name = part.partition(":")
            if kind == "rule" and name in ruled_out:
                ruled_out[name].append(shown(alt))
            elif kind == "rule" and name not in found:
                detail = consent_detail(problem.kb, problem.framework, name, shown(alt))
                if not detail:
                    ruled_out[name] = [shown(alt)]
                found[name] = reason(problem.rule(name), detail=detail)
                optin = problem.program.optin_of(name)
                found[name].optin_group = optin.group if optin is not None else ""
            elif kind == "when" and part not in found:
                opt = problem.kb.options[name]
                found[part] = Reason(rule=f"when:{opt.name}", location=str(opt.meta.span),
                                     detail=f"{opt.name} only applies when its 'when' condition "
                                            f"holds; otherwise it keeps its default")
            elif kind == "memory" and part not in found and name == "host_fit":
                found[part] = Reason(rule=part, detail="the CPU RAM per node must fit the host "
                                     "RAM (--host-ram, or the assumed node)")
            elif kind == "memory" and part not in found:
                found[part] = _fit_in_core(problem, option, alt, (neighbours or {}).get(alt))
            elif kind == "pin" and part not in found:
                opt = problem.kb.options[name]
                found[part] = Reason(rule=f"pin:{opt.name}", detail=problem.pin_detail(name))
    for name, values in ruled_out.items():
        found[name].detail = f"{name.split('.', 1)[1]} rules out {_listed(values)}"
    return list(found.values())


def _listed(values: list[str], shown_at_most: int = 6) -> str:
    """'3', '3 and 5', '3, 5 and 6', or the first few and how many more."""
    if len(values) > shown_at_most:
        return f"{', '.join(values[:shown_at_most])} and {len(values) - shown_at_most} more"
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} and {values[-1]}"


def _fit_in_core(problem: Problem, option, alt, neighbour) -> Reason:
    """The GPU budget as part of what rules a value out: at the error band's upper end
    where the KB states a band, and whether the value, the rest of the plan unchanged,
    would fit the model's prediction without it."""
    fit = Reason(rule="memory:fit", detail="the memory per GPU must fit the budget")
    if not band_measured(problem):
        return fit
    fit.detail += " at the model's error band's upper end"
    if option is not None and neighbour is not None:
        device = neighbour.exact.levels["device"]
        low = device - band_bytes(problem, neighbour.exact)
        if low <= problem.budget_bytes < device:
            fit.detail += (f"; {option.name}={shown(alt)} with the rest of the plan unchanged "
                           f"fits the model's prediction ({gib(low):.2f} GiB of "
                           f"{gib(problem.budget_bytes):.2f} GiB) but not with its error band "
                           f"({gib(device):.2f} GiB)")
    return _with_band(fit, problem.kb.memory[band_key(problem)])


def _changed_terms(problem: Problem, plan: Metrics, other: Metrics) -> list[Reason]:
    out = []
    for key, value in {**plan.times, **plan.factors}.items():
        theirs = {**other.times, **other.factors}.get(key)
        if theirs is not None and theirs != value:
            out.append(reason(problem.kb.speed[key],
                              detail=f"{problem.kb.speed[key].name}: {float(value):.4g} -> "
                                     f"{float(theirs):.4g}"))
    return out


def _grown_terms(problem: Problem, plan: Metrics, other: Metrics) -> list[Reason]:
    band = band_key(problem)  # it grows with the others: a consequence, not a cause
    grown = sorted(((other.memory.get(k, Fraction(0)) - v, k) for k, v in plan.memory.items()
                    if k != band), reverse=True)
    return [reason(problem.kb.memory[k], detail=f"+{gib(d):.2f} GiB")
            for d, k in grown[:2] if d > 0]
