"""Exact branch and bound over the finite domains, on the problem's tables.

Options are set one at a time in a fixed order. At every node the tables give
sound ranges for what the open options can still reach: a rule that can no
longer hold, memory that can no longer fit, or an objective that can no longer
beat the incumbent prunes the branch. Ranges are computed in floats, widened
where they feed a comparison, and every incumbent is confirmed by the exact
evaluator, so the optimum is exact. The work is counted in nodes, never in
seconds: the same query explores the same tree on any machine.
"""

from __future__ import annotations

import bisect
import math
import operator
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbsolve import codecache
from kbsolve.collector import paused
from kbsolve.dsl.memo import Kept
from kbsolve.program.metrics import Metrics, measure, sort_key
from kbsolve.program.operators import left_sum
from kbsolve.program.program import kept
from kbsolve.program.tables import (_MISS, Expr, Table, Tables, _keep_within, allowed_mask,
                                    masked, read_bounds, reader_of, rule_tables)
from kbsolve.solver.guard import expired

NODE_BUDGET = 200_000
ROUNDS = (10_000, 40_000, 150_000)  # node shares of the rounds (see Search.run)
TOLERANCE = 1e-9  # relative: float ranges within it are settled exactly
# A problem's order puts the options the most bounds read first where at least
# this share of the bound cells are expressions too large to table (an interval
# over an expression loses the correlation between its options that a table
# keeps, so only setting them tightens it). Measured on the warm and as-printed
# grids (docs/decisions.md, issue 25 search; eighteenth round): plain
# PyTorch 0.38 (26k-70k nodes -> 1.9k-5.2k), torchtitan 0.42-0.48 (6.2k -> 1.2k),
# LlamaFactory 0.27-0.48 (1.5k-18k -> 190-870 over bench.warm's 15 LLM plans,
# and the explanations' budgeted searches end proven more often); the diffusion
# frameworks' 0.07-0.12 keep the lifts' order (61-90 nodes -> 860-7,200).
READS_FIRST = 1 / 5
STEPS_KEPT = 4096  # domains()' table steps kept per Search (_step)
STEP_CELLS = 1 << 22  # cells of the rule arrays whose steps are kept per KB (_step)
CUT_ON_TIME = True  # _State.dfs cuts a child on its time before reading its memory


@dataclass
class View:
    """What a full assignment costs, read from the tables in floats. A broken
    assignment is no plan: its cost is not read (fits and the rest None)."""

    broken: list[str]  # 'rule:...' and 'when:...' parts that fail
    fits: bool | None
    time_per_work: float | None
    key: tuple | None  # the objective, as sort_key orders it
    device: float | None

    @property
    def feasible(self) -> bool:
        return not self.broken and self.fits


class Exhausted(Exception):
    pass


class TimedOut(Exception):
    """The wall-clock guard (--timeout) expired: not a budget, reported as such."""


@dataclass
class Found:
    """A search round's result: its status, assignment, metrics and node count."""
    status: str  # optimal | infeasible | budget | timeout
    chosen: dict[str, Any] | None
    metrics: Metrics | None
    nodes: int


class Search:
    """The tables and bounds of one problem, ready for many searches."""

    def __init__(self, problem):
        self.p = problem
        self.budget = float(problem.budget_bytes)
        self.host_budget = float(problem.host_budget_bytes or 0)
        self.objective = problem.objective
        common, tracked = self._take_setup()
        if common is None:
            self.keys = sorted(problem.choices)  # the tables' axes
            self._step_memo: dict = {}  # domains()' table steps (_step)
            self._domains_kept: dict = {}  # prepare's domains and _lifts' spreads
            t = self.tables = Tables(problem, self.keys)
            self.rules = [(f"rule:{r.framework}.{r.id}", t.cell(r.constraint))
                          for r in problem.rules]
            for option in problem.options:
                if option.when is not None and option.key in t.axis:
                    self.rules.append((f"when:{option.key}",
                                       t.combine("or", [t.cell(option.when),
                                                        self._is_default(option.key)],
                                                 "bool", False)))
            gpu = [m for m in problem.program.memory if m.location == "gpu"]
            self.memory = [t.cell(m.expr) for m in gpu]
            self.time = self._time()
            self.tiers = self._preferences()
        if tracked is None:
            host = [m for m in problem.program.memory if m.location == "host"]
            self.host = [self.tables.cell(m.expr) for m in host] \
                if problem.host_budget_bytes is not None else []
            self._track()
            self.cells = self._cells()
        self._keep_setup(common, tracked)
        self._mark_needs()

    # A problem's set-up (tables, cells, tracked slots, domains) reads its KB,
    # framework, program, facts, fixed options, choices, pins and consent rules, and
    # whether a host-RAM budget is set (the host cells and slots only); never the
    # budgets' values or the objective. A refusal asks copies of its problem
    # (copy.copy: the same dicts, and the same __dict__ entries) that differ only
    # there (the least-memory and host-RAM questions): each takes the set-up of the
    # search before it, once that search is gone (no one reads its cells'
    # preparations any more), kept in the problem's __dict__.
    _COMMON = ("keys", "_step_memo", "_domains_kept", "tables", "rules", "memory", "time",
               "tiers")
    _TRACKED = ("host", "tracked", "memory_terms", "host_terms", "time_parts",
                "time_factors", "tier_slots", "cells")

    def _kept_domains(self) -> dict | None:
        """The domains (and their spreads) of an earlier search of this set-up whose
        cells' sides (_mark_needs) hold this one's: the same tracked terms, or this
        one without host terms. Their masks are the same objects, so the tables take
        back the levels that search built (Table._reuse); a level built for fewer
        sides would be wrong on the others, so masks a search without host terms
        took are never given to one with them again."""
        kept_domains = self._domains_kept
        if self.host_terms:
            return kept_domains.get(True)
        if False not in kept_domains and True in kept_domains:
            # taken for good: the levels this search adds have its fewer sides only
            kept_domains[False] = kept_domains.pop(True)
        return kept_domains.get(False)

    def _setup_inputs(self) -> tuple:
        p = self.p
        return (type(self), p.kb, p.framework, p.program, p.facts, p.fixed, p.choices,
                p.pinned, p.consent)

    def _setup_contents(self) -> tuple:
        p = self.p
        return dict(p.facts), dict(p.fixed), dict(p.choices), dict(p.pinned)

    def _take_setup(self) -> tuple:
        """(the common fields, the host-dependent ones) of a set-up this search may
        take, each None where none is kept."""
        for entry in self.p.__dict__.get("_search_setups", ()):
            inputs, contents, owner, common, tracked = entry
            if all(a is b for a, b in zip(inputs, self._setup_inputs())) and \
                    owner() is None and contents == self._setup_contents():
                self.__dict__.update(common)
                mine = tracked.get(self.p.host_budget_bytes is not None)
                if mine is not None:
                    self.__dict__.update(mine)
                return common, mine
        return None, None

    def _keep_setup(self, common, tracked) -> None:
        host = self.p.host_budget_bytes is not None
        if common is None:
            entry = [self._setup_inputs(), self._setup_contents(), None,
                     {name: self.__dict__[name] for name in self._COMMON}, {}]
        else:
            entry = next(e for e in self.p.__dict__["_search_setups"] if e[3] is common)
        if tracked is None:
            entry[4][host] = {name: self.__dict__[name] for name in self._TRACKED}
        entry[2] = weakref.ref(self)
        self._setup_entry = entry

    def offer_setup(self) -> None:
        """Leave this search's set-up in its problem for the copies asked after it
        (a refusal's least-memory and host-RAM questions), to take once it is gone.
        Only a refused search offers it: a set-up kept for no taker held a found
        plan's tables until the plan ended (+60 MB peak and ~20 % CPU on the
        pytorch plans, docs/decisions.md)."""
        setups = self.p.__dict__.setdefault("_search_setups", [])
        if not any(e is self._setup_entry for e in setups):
            setups.append(self._setup_entry)

    @staticmethod
    def withdraw_setups(problem) -> None:
        """Drop the set-ups offered in `problem` (once its copies are asked): each holds
        tables that refer back to the problem, a cycle only the collector would free."""
        problem.__dict__.pop("_search_setups", None)

    def _track(self) -> None:
        """The cells the bounds read, one slot each: memory and host RAM as
        weighted sums of tables (a term that scales another level's sum, like
        the allocator's cache, is spread over that sum's terms), time as a sum
        of parts times a chain of factors, and one slot per preference tier.
        Each summand becomes +inf where a rule over its options fails, so the
        bounds see the rules (program/tables.masked)."""
        rules = rule_tables([c for _, c in self.rules], kept(self.p.kb, "rule_masks"))
        sizes = self.tables.sizes
        slots: dict[int, int] = {}
        self.tracked: list = []

        def slot(cell) -> int:
            cell = masked(cell, rules, sizes)
            if id(cell) not in slots:
                slots[id(cell)] = len(self.tracked)
                self.tracked.append(cell)
            return slots[id(cell)]

        def weighted(cells) -> list[tuple[float, int]]:
            weights: dict[int, list] = {}
            for cell in cells:
                for weight, part in _linear(cell, 1.0):
                    entry = weights.setdefault(id(part), [0.0, part])
                    entry[0] += weight
            return [(w, slot(part)) for w, part in weights.values() if w]

        self.memory_terms = weighted(self.memory)
        self.host_terms = weighted(self.host)
        parts, factors = _product(self.time)
        self.time_parts = [slot(c) for c in parts]
        self.time_factors = [slot(c) for c in factors]
        self.tier_slots = [slot(c) for c in self.tiers]

    def _mark_needs(self) -> None:
        """Which side of its ranges each table's bounds are read on: rules and
        preference tiers the high side, positive memory summands the low side;
        a table read inside an expression needs both. An expression met again
        is not walked again: its tables need both already."""
        needs: dict[int, set] = {}
        walked: set[int] = set()  # the expressions whose args are marked

        def mark(cell, side):  # no recursive closure: that cycle held `needs` for the collector
            stack = [(cell, side)]
            while stack:
                cell, side = stack.pop()
                if isinstance(cell, Table):
                    needs.setdefault(id(cell), set()).add(side)
                    cell.need = "both" if len(needs[id(cell)]) > 1 else side
                elif id(cell) not in walked:
                    walked.add(id(cell))
                    stack.extend((arg, "both") for arg in reversed(cell.args))

        for _, cell in self.rules:
            mark(cell, "high")
        for terms in (self.memory_terms, self.host_terms):
            for weight, i in terms:
                mark(self.tracked[i], "low" if weight > 0 else "high")
        for i in self.time_parts + self.time_factors:
            mark(self.tracked[i], "both")
        for i in self.tier_slots:
            mark(self.tracked[i], "high")

    def _cells(self) -> list:
        found: dict = {}
        roots = [c for _, c in self.rules] + self.tracked
        for root in roots:
            found[id(root)] = root
            if isinstance(root, Expr):
                root.tables(found)
        return list(found.values())

    def _plan_order(self, allowed: list, by_reads: bool = False) -> list[int]:
        """The axes in search order: pinned or settled options first, then by how
        far each can lift the time (or memory) bound and the memory bound.
        `by_reads` (the optimisation's order, see run()): before the lifts, the
        options the most bound cells read (memory and host terms, time parts and
        factors). Setting one narrows every bound that reads it, which no single
        table's spread sees: the parallel degrees, read by nearly every term of
        an expression too large to table, come first, and the children that
        overflow memory or lose on time are cut a few levels up."""
        reads = [0] * len(self.keys)
        if by_reads:
            for i in {i for terms in (self.memory_terms, self.host_terms) for _, i in terms} | \
                    set(self.time_parts + self.time_factors):
                for axis in self.tracked[i].deps:
                    reads[axis] += 1
        score = self._lifts(allowed)
        return sorted(range(len(self.keys)), key=lambda a: (allowed[a].sum() > 1, -reads[a],
                                                            -score[a], self.keys[a]))

    def _lifts(self, allowed: list) -> list[float]:
        """Per axis: how far setting it can lift the time (or memory) bound and
        the memory bound (the tables' spreads; found once per set of masks)."""
        found = getattr(self, "_lifted", None)
        if found is not None and found[0] is allowed:
            return found[1]
        score = [0.0] * len(self.keys)
        spreads: dict = {}  # id -> (table, its spread): a memory table is often a cell too

        if allowed is getattr(self, "allowed", None):  # the set-up's own masks
            spreads = self._spreads

        counts = [int(mask.sum()) for mask in allowed]
        firsts = [int(mask.argmax()) for mask in allowed]

        def spread(cell) -> dict:
            found = spreads.get(id(cell))
            if found is None:
                found = spreads[id(cell)] = (cell, _allowed_spread(cell, allowed, counts, firsts))
            return found[1]

        for cell in self.cells:
            if not isinstance(cell, Table) or cell.kind != "num":
                continue
            lifts = spread(cell)
            if lifts:  # the table's least value scales its lifts (found once per table;
                # np.nanmin's own reduction, without its all-nan warning's check)
                scale = max(abs(float(np.fmin.reduce(cell.floats(), axis=None))), 1e-30)
            for axis, lift in lifts.items():
                score[axis] = max(score[axis], lift / scale)
        for cell in self.memory:
            if isinstance(cell, Table):
                for axis, lift in spread(cell).items():
                    score[axis] += lift / max(self.budget, 1.0)
        self._lifted = (allowed, score)
        return score

    # ---- building
    def _is_default(self, key: str) -> Table:
        values = self.p.choices[key]
        default = self.p.kb.options[key].default
        axis = self.tables.axis[key]
        array = np.array([v == default for v in values], dtype=bool)
        return Table((axis,), (len(values),), array, "bool", True)

    def _time(self):
        t, p = self.tables, self.p
        speed = p.program.speed
        work = p.throughput_work
        parts = [t.divided(s.expr, work.expr) if work is not None else t.cell(s.expr)
                 for s in speed if s.kind == "time"]
        total = t.total(parts, False)
        for factor in (s for s in speed if s.kind == "factor"):
            total = t.combine("*", [total, t.cell(factor.expr)], "num", False)
        return total

    def _preferences(self) -> list:
        t, p = self.tables, self.p
        tiers: dict[int, list] = {}
        for pref in p.program.preferences:
            cell = t.cell(pref.expr)
            weight = t.constant(pref.weight, False)
            score = t.combine("if", [cell, weight, t.constant(0, False)], "num", False) \
                if cell.kind == "bool" else t.combine("*", [weight, cell], "num", False)
            tiers.setdefault(pref.tier, []).append(score)
        return [t.total(scores, False) for _, scores in sorted(tiers.items())]

    # ---- domains
    def domains(self, fixed: dict[str, Any] | None = None, why: dict | None = None):
        """A mask of the values left to each option (by axis) after pins,
        `fixed` and arc consistency on the rule tables; None when some option
        has none left. `why` collects (axis, value index) -> the rule that
        removed it, and "empty" -> the rule that emptied a domain."""
        p = self.p
        allowed = []
        for key in self.keys:
            values = p.choices[key]
            if fixed and key in fixed:
                wanted = [fixed[key]]
            elif key in p.pinned:
                wanted = [p.pinned[key]]
            else:  # every value (`in` finds each by identity: no comparisons)
                allowed.append(np.ones(len(values), dtype=bool))
                continue
            allowed.append(np.array([v in wanted for v in values], dtype=bool))
        changed = True
        tables = [(name, c) for name, c in self.rules if isinstance(c, Table)]
        while changed:
            changed = False
            for name, cell in tables:
                if not cell.deps:
                    if not cell.values[0]:
                        if why is not None:
                            why["empty"] = name
                        return None
                    continue
                for axis, kept, lost, emptied in self._step(cell, [allowed[a] for a in cell.deps]):
                    if why is not None:
                        for value in lost:
                            why.setdefault((axis, value), name)
                    allowed[axis] = kept.copy()
                    changed = True
                    if emptied:
                        if why is not None:
                            why["empty"] = name
                        return None
        return allowed

    def _step(self, cell, masks: list) -> list:
        """domains()' step over one rule table: per axis that loses values, in
        the table's order, (axis, its mask after the step, the value indices
        lost, whether none is left). A pure function of the table and the
        masks, kept per Search: an explanation's clash() asks the same tables
        with the same masks again (nine in ten of its steps over bench.warm's plans).
        A table over a kept read-only array (the tables shared across queries,
        program/tables.py _shared_build) keeps its steps per KB, by the array
        (held by the entry, so its id is never another's), its axes and the masks:
        a later query's domains() asks most of them again (609 of 853 over six
        warm plans); bounded by the cells of the arrays held (STEP_CELLS)."""
        masks_key = b"".join([mask.tobytes() for mask in masks])
        array = cell.array
        if array.flags.writeable:
            memo, key, owner = self._step_memo, (id(cell), masks_key), cell
        else:
            memo = kept(self.p.kb, "rule_steps")
            key, owner = (id(array), cell.deps, cell.sizes, masks_key), array
        entry = memo.get(key)
        found = entry[1] if entry is not None and entry[0] is owner else None
        if found is None:
            masked_ = cell.array & allowed_mask(cell.sizes, masks)
            found = []
            for i, axis in enumerate(cell.deps):
                others = tuple(j for j in range(len(cell.deps)) if j != i)
                support = masked_.any(axis=others) if others else masked_
                lost = masks[i] & ~support
                if lost.any():
                    left = masks[i] & support
                    found.append((axis, left, [int(v) for v in np.flatnonzero(lost)],
                                  not left.any()))
            if owner is cell:
                if len(memo) >= STEPS_KEPT:
                    memo.clear()
                memo[key] = (owner, found)
            else:  # bounded by the cells of the arrays it holds
                _keep_within(memo, key, (owner, found), array.size, STEP_CELLS)
        return found

    # ---- the search
    def prepare(self, axes: list[int] | None = None, allowed: list | None = None) -> bool:
        """Domains, order and bounds for this problem (`axes`: a new order;
        `allowed`: narrower masks than the problem's, for one question);
        False when the rules and pins leave some option no value."""
        if hasattr(self, "allowed") and axes is None:
            return self.allowed is not None
        if not hasattr(self, "allowed"):
            found = self._kept_domains()
            if found is None:
                found = {"why": {}}
                found["allowed"] = self.domains(why=found["why"])
                self._domains_kept[self.host_terms != []] = found
            self.why, self.allowed = found["why"], found["allowed"]
            self._spreads = found.setdefault("spreads", {})  # _lifts', over these masks
            if self.allowed is None:
                return False
        p = self.p
        axes = axes or self._plan_order(self.allowed,
                                        by_reads=self._expression_share() >= READS_FIRST)
        masks = allowed or self.allowed
        self.axes = axes
        self.order = [self.keys[a] for a in axes]
        self.place = {key: i for i, key in enumerate(self.order)}
        position = [0] * len(axes)
        for place, axis in enumerate(axes):
            position[axis] = place
        in_order = [masks[a] for a in axes]
        for cell in self.cells:
            cell.prepare(position, in_order)
        self.base_domains = [list(np.flatnonzero(mask)) for mask in in_order]
        self.defaults = [p.choices[k].index(p.kb.options[k].default)
                         if p.kb.options[k].default in p.choices[k] else -1 for k in self.order]
        self.rules_at = [[] for _ in axes]
        for _, cell in self.rules:
            places = cell._search_deps if isinstance(cell, Table) else \
                [position[a] for a in cell.deps]
            for place in places:
                self.rules_at[place].append(cell)
        self.rule_readers: list = [None] * len(axes)  # _State._rules_hold, on first use
        self.view_readers = None  # view(), on first use
        self.tracker = Tracker(self.tracked, [{position[a] for a in c.deps}
                                              for c in self.tracked], len(axes),
                               [self.memory_terms, self.host_terms],
                               set(self.time_parts + self.time_factors))
        return True

    def run(self, start: dict[str, Any] | None = None, fixed: dict[str, Any] | None = None,
            budget: int = NODE_BUDGET, first: bool = False,
            deadline: float = math.inf, ceiling: tuple | None = None,
            among: dict[str, list] | None = None) -> Found:
        """The exact optimum (or, with first=True, any feasible plan) with the
        options in `fixed` held; `start` orders the values to try first.
        `among`: options held to some of their values (their other values left
        out). `ceiling` (with `fixed` or `among`): a known plan's exact key in
        floats, pruned against from the first node; a plan no worse than it,
        else none (then status "infeasible" says none is better).

        An optimisation runs in rounds: when a round spends its share of the
        budget, the options whose setting pruned most of the children they were
        tried on move to the front of the order, and the next round starts from
        the best plan so far. Rounds and shares are counted, so the same query
        takes the same path.

        Python's cyclic garbage collector is paused while it runs (as it was
        before, after): a search makes ranges, memo entries and levels by the
        hundred thousand and no garbage cycles, and the collections their
        allocations set off (each full one traverses every object of the
        process, the KB's included: ~0.1 s, one to three a plain-PyTorch plan)
        found nothing to free. Memory is still freed by reference counting."""
        with paused():
            return self._run(start, fixed, budget, first, deadline, ceiling, among)

    def _run(self, start, fixed, budget: int, first: bool, deadline: float,
             ceiling: tuple | None, among: dict | None) -> Found:
        if not self.prepare():
            return Found("infeasible", None, None, 0)
        if first or fixed or among:
            return self._round(start, fixed, budget, first, deadline, ceiling, among)[0]
        axes = self.axes
        try:
            return self._rounds(start, budget, deadline)
        finally:  # the searches that follow (explanations, whose plans are printed)
            if self.axes != axes:  # run in the problem's order, not a learned one
                self.prepare(axes)

    def _expression_share(self) -> float:
        """The share of the bound cells (memory and host terms, time parts and
        factors) that are expressions over tables rather than tables."""
        cells = {i for terms in (self.memory_terms, self.host_terms) for _, i in terms} | \
            set(self.time_parts + self.time_factors)
        return sum(isinstance(self.tracked[i], Expr) for i in cells) / max(len(cells), 1)

    def _rounds(self, start, budget: int, deadline: float) -> Found:
        """A round after the first prunes against the best plan found so far from
        its first node (`ceiling`, its exact key in floats) and keeps it where it
        ends with none of its own: it reaches the same first optimal leaf in its
        order as it would with no incumbent (docs/decisions.md, eleventh round)."""
        used, ceiling, kept = 0, None, None
        for share in ROUNDS:
            found, state = self._round(start, None, min(budget - used, share), False, deadline,
                                       ceiling)
            used += found.nodes
            if found.chosen is None and kept is not None:  # none below the ceiling
                status = "optimal" if found.status == "infeasible" else found.status
                found = Found(status, kept.chosen, kept.metrics, found.nodes)
            if found.status != "budget" or used >= budget:
                return Found(found.status, found.chosen, found.metrics, used)
            if found.chosen is not None:
                kept, ceiling = found, state.best_float or ceiling
            start = found.chosen or start
            self.prepare(self._learned_order(state))
        return Found("budget", found.chosen, found.metrics, used)

    def _learned_order(self, state) -> list[int]:
        """Options that pruned at least 90% of the children tried on them go
        first (singletons stay ahead), most pruning first; the rest keep their order."""
        ratio = [state.pruned[k] / state.tried[k] if state.tried[k] >= 8 else 0.0
                 for k in range(len(self.axes))]
        decisive = sorted((k for k in range(len(self.axes)) if ratio[k] >= 0.9),
                          key=lambda k: (-ratio[k], k))
        single = [k for k in range(len(self.axes)) if len(self.base_domains[k]) == 1]
        rest = [k for k in range(len(self.axes)) if k not in decisive and k not in single]
        return [self.axes[k] for k in single + [k for k in decisive if k not in single] + rest]

    def _round(self, start, fixed, budget, first, deadline, ceiling: tuple | None = None,
               among: dict | None = None):
        p = self.p
        domains = [list(d) for d in self.base_domains]
        for key, value in (fixed or {}).items():
            place = self.place[key]
            index = p.choices[key].index(value)
            if index not in domains[place]:  # (the caller takes [0])
                return Found("infeasible", None, None, 0), None
            domains[place] = [index]
        for key, values in (among or {}).items():
            place = self.place[key]
            kept = {p.choices[key].index(value) for value in values}
            domains[place] = [index for index in domains[place] if index in kept]
            if not domains[place]:
                return Found("infeasible", None, None, 0), None
        if start:
            for place, key in enumerate(self.order):
                preferred = p.choices[key].index(start[key]) if start.get(key) in \
                    p.choices[key] else -1
                if preferred in domains[place]:
                    domains[place].remove(preferred)
                    domains[place].insert(0, preferred)
        state = _State(self, domains, budget, first, deadline)
        state.best_float = ceiling  # prunes as an incumbent; best and best_key stay unset
        try:
            state.dfs(0)
            status = "optimal"
        except Exhausted:
            status = "budget"
        except TimedOut:
            status = "timeout"
        except _Done:
            status = "optimal"
        if state.best is None:
            return Found("infeasible" if status == "optimal" else status, None, None,
                         state.nodes), state
        return Found(status, state.best[0], state.best[1], state.nodes), state

    def clash(self, key: str, value, start: dict[str, Any], budget: int,
              overflows=None) -> list[str] | str | None:
        """None when some feasible plan has key=value (its plan in last_found); else
        the parts that rule it out ('rule:...', 'when:...', 'memory:fit'); "budget"
        when undecided. `overflows(key, value)`: a proven memory lower bound over the
        budget (True), or the name of a rule part proven false on every completion,
        which skips the feasibility search. Arc consistency runs only when the
        first search finds no plan (a plan it finds keeps every value arc consistency
        would keep), to name the rules that empty a domain."""
        self.last_found = None
        if not self.prepare():
            return None
        axis = self.keys.index(key)
        index = self.p.choices[key].index(value)
        if not self.allowed[axis][index]:
            return [self.why.get((axis, index), "memory:fit")]
        proven = overflows(key, value) if overflows is not None else False
        found = None if proven else \
            self.run(start=start, fixed={key: value}, budget=budget // 10, first=True)
        if found is not None and found.chosen is not None:
            self.last_found = (found.chosen, found.metrics)
            return None
        why: dict = {}
        if self.domains({key: value}, why) is None:
            return sorted({why["empty"], *(r for r in why.values() if r != why["empty"])})[:3] \
                if "empty" in why else ["memory:fit"]
        if isinstance(proven, str):  # a rule false on every completion (no arc consistency sees it)
            return [proven]
        if found is not None and found.status == "budget":  # again, with the value in every bound, first
            found = self._narrowed(key, value, why_masks(self, key, value), start, budget)
            if found.chosen is not None:
                self.last_found = (found.chosen, found.metrics)
                return None
            if found.status == "budget":
                return "budget"
        # no rule alone rules it out: the budgets do (both named when both apply)
        return ["memory:fit", "memory:host_fit"] if self.host_terms else ["memory:fit"]

    def _narrowed(self, key: str, value, masks: list, start, budget: int) -> Found:
        """A feasibility search whose tables know key=value from the start (the
        option placed first), then the problem's own preparation back."""
        axes = self.axes
        axis = self.keys.index(key)
        try:
            self.prepare([axis] + [a for a in axes if a != axis], masks)
            return self.run(start=start, fixed={key: value}, budget=budget, first=True)
        finally:
            self.prepare(axes)

    def rule_options(self, name: str) -> list[str]:
        """The open options a rule part ('rule:...' or 'when:...') reads."""
        if not hasattr(self, "_rule_cells"):
            self._rule_cells = dict(self.rules)
        cell = self._rule_cells.get(name)
        return [self.keys[a] for a in cell.deps] if cell is not None else []

    def view(self, assignment: dict[str, Any]) -> "View | None":
        """A full assignment's objective and feasibility read from the tables
        (floats); None where a float could decide wrongly (a rule or the budget
        within the tolerance), so the caller measures exactly."""
        if not self.prepare():
            return None
        p = self.p
        positions = self.__dict__.get("_positions") or self._find_positions()
        try:  # a value's position by one dict read (its choices' tuple.index compares each)
            idx = [positions[key][assignment[key]] for key in self.order]
        except (KeyError, TypeError):  # a value not among its choices, or unhashable
            idx = [p.choices[key].index(assignment[key]) for key in self.order]
        n = len(idx)
        if self.view_readers is None:  # the full levels, found once per preparation
            self.view_readers = ([reader_of(cell, n) for _, cell in self.rules],
                                 [reader_of(cell, n) for cell in self.tracked])
        broken = []
        for (name, _), (low, high) in zip(self.rules, read_bounds(self.view_readers[0], n, idx)):
            if low != high:
                return None
            if not high:
                broken.append(name)
        if broken:  # no plan: what it would cost is never compared
            return View(broken, None, None, None, None)
        ranges = read_bounds(self.view_readers[1], n, idx)
        memory = _weighted_low(ranges, self.memory_terms)
        host = _weighted_low(ranges, self.host_terms)
        if abs(memory - self.budget) <= TOLERANCE * self.budget or \
                self.host_terms and abs(host - self.host_budget) <= TOLERANCE * self.host_budget:
            return None
        kept = sum(1 for place, i in enumerate(idx) if i == self.defaults[place])
        fits = memory <= self.budget and (not self.host_terms or host <= self.host_budget)
        key = self.objective_bound(ranges, memory, kept)
        return View(broken, fits, key[1] if self.objective == "memory" else key[0], key, memory)

    def _find_positions(self) -> dict[str, dict]:
        """Per option: its values' positions in its choices (view's, found once)."""
        found = self._positions = {key: _positions(values)
                                   for key, values in self.p.choices.items()}
        return found

    def outside(self, assignment: dict[str, Any]) -> bool:
        """Whether a full assignment that keeps every pin has a value that arc
        consistency took out of its domain: it breaks a rule, so it is no plan
        (a plan that meets every rule keeps each of its values: each is
        supported, in every rule table, by the plan's other values, which by
        the same argument were never taken out). False when unknown."""
        if not self.prepare():
            return False
        p = self.p
        if any(assignment.get(key) != value for key, value in p.pinned.items()):
            return False
        return any(not self.allowed[axis][p.choices[key].index(assignment[key])]
                   for axis, key in enumerate(self.keys))

    def objective_bound(self, ranges: list, memory: float, kept: int,
                        time: float | None = None) -> tuple:
        """The objective's lower bound (sort_key's order) from the tracked
        cells' ranges: time as its parts' sum times its factors (`time`: that,
        found from these ranges already), preference tiers at their best,
        memory and the options kept at their defaults."""
        low = self.time_low(ranges) if time is None else time
        prefs = tuple([-ranges[i][1] for i in self.tier_slots])
        if self.objective == "memory":
            return (memory, low) + prefs + (-kept,)
        return (low,) + prefs + (memory, -kept)

    def time_low(self, ranges: list, start: tuple | None = None, both: bool = False):
        """The least time per unit of work the tracked cells' ranges allow: the
        parts' sum times the factors (_mul written out: the same operations in
        the same order, so the same floats, without a call and a list per
        factor). `start`: time_start's, the steps before some place's first
        done already; `both`: the (low, high) range."""
        low, high, parts, factors = start or (0.0, 0.0, self.time_parts, self.time_factors)
        for i in parts:
            r = ranges[i]
            low, high = low + r[0], high + r[1]
        for i in factors:  # _mul: 0 * inf read as 0
            b0, b1 = ranges[i]
            p0, p1, p2, p3 = low * b0, low * b1, high * b0, high * b1
            if p0 != p0:
                p0 = 0
            if p1 != p1:
                p1 = 0
            if p2 != p2:
                p2 = 0
            if p3 != p3:
                p3 = 0
            low = high = p0
            if p1 < low:
                low = p1
            elif p1 > high:
                high = p1
            if p2 < low:
                low = p2
            elif p2 > high:
                high = p2
            if p3 < low:
                low = p3
            elif p3 > high:
                high = p3
        return (low, high) if both else low

    def time_start(self, ranges: list, n: int) -> tuple:
        """time_low's first n steps (the parts, then the factors) done: where
        none of them reads place k, the children of a node at k share them,
        and each child's time_low(ranges, start) goes on from there (the same
        operations in the same order: the same floats)."""
        parts, factors = self.time_parts, self.time_factors
        m = max(n - len(parts), 0)
        low, high = self.time_low(ranges, (0.0, 0.0, parts[:n], factors[:m]), True)
        return low, high, parts[n:], factors[m:]

    def assignment(self, idx: list[int]) -> dict[str, Any]:
        return {key: self.p.choices[key][i] for key, i in zip(self.order, idx)}


def _allowed_spread(cell, allowed: list, counts: list, firsts: list) -> dict[int, float]:
    """cell.spread(allowed) (`counts`: each axis's allowed values, `firsts`: its first
    one), read off the table of the allowed values alone: spread() hides the
    left-out values as +inf, which no minimum takes while every axis keeps a value,
    and an axis with one value left (indexed away) has the table's least value as
    its own; minima are exact, so the same floats over ~2 % of the cells
    (bench.warm's plans: 15.5k of 944k)."""
    if cell.kind != "num" or not cell.deps:
        return {}
    if not all(counts[axis] for axis in cell.deps):
        return {}
    part = cell.floats()[tuple(firsts[axis] if counts[axis] == 1 else slice(None)
                               for axis in cell.deps)]
    opened = [axis for axis in cell.deps if counts[axis] > 1]
    for j, axis in enumerate(opened):
        if counts[axis] < part.shape[j]:
            part = part.compress(allowed[axis], axis=j)
    floor = float(part.min())
    out = {}
    every = tuple(range(len(opened)))
    j = 0
    for axis in cell.deps:
        if counts[axis] == 1:  # the least value over every cell
            if math.isfinite(floor):
                out[axis] = floor - floor
            continue
        per_value = part.min(axis=every[:j] + every[j + 1:]) if part.ndim > 1 else part
        j += 1
        per_value = per_value[np.isfinite(per_value)]
        if per_value.size:
            out[axis] = float(per_value.max()) - floor
    return out


class _Done(Exception):
    pass


class Tracker:
    """The ranges of some cells, kept up to date one option at a time: setting
    the option at place k re-reads only the cells that read it. It also keeps
    weighted sums of their low ends (memory, host RAM) up to date. The cells
    the sums read come first at each place, so that a child whose memory does
    not fit is dropped before the rest of its cells are read (update_sums, then
    update_rest); where the search can cut a child on its time alone
    (_State.dfs), the time cells come before them (update_time). Every child
    of a node sets the same cells (those at its place), so the node's ranges
    are kept once (parent) and set back once (restore), and a child's are
    taken as a plain list (taken, apply)."""

    def __init__(self, cells: list, places: list[set[int]], n: int, sums: list,
                 timed: set | None = None):
        self.cells = cells
        summed = {i for terms in sums for _, i in terms}
        self.summed = summed
        self.timed = timed or set()
        self.at = [sorted((i for i, p in enumerate(places) if k in p),
                          key=lambda i: (i not in summed, i)) for k in range(n)]
        self.split = [sum(1 for i in at if i in summed) for at in self.at]
        self.read_at = [_reader_of(at) for at in self.at]  # per place: ranges[i] for i in at
        self.write_at: list = [None] * n  # per place: set them back (_writer_of), on first use
        # per place: whether a time cell reads it (else its children share the node's time)
        self.times_at = [any(i in self.timed for i in at) for at in self.at]
        # per place, two readers' groups (the summed cells, the rest), or three
        # (the time cells, the other summed cells, the rest), on first use
        self.readers: list = [None] * n
        self.time_readers: list = [None] * n
        self._started: tuple | None = None  # start()'s, read once
        self.sums = sums  # [[(weight, slot), ...], ...]
        weight = [dict((i, w) for w, i in terms) for terms in sums]
        # per place, per sum: (slot, its place in at[k], weight, side of its range read)
        self.terms_at = [[[(i, n, weights[i], 0 if weights[i] > 0 else 1)
                           for n, i in enumerate(self.at[k]) if weights.get(i) is not None]
                          for weights in weight] for k in range(n)]

    def start(self, idx: list[int]) -> tuple[list, list]:
        """The ranges and sums with no place set: they read no value of idx,
        so every search of this preparation starts from the same (read once,
        each search given its own copies)."""
        if self._started is None:
            ranges = [c.bound(0, idx) for c in self.cells]
            # numpy floats (a level over no set option holds them) as Python floats,
            # but in the summed cells, kept as read (chosen while builtin sum() added
            # them; operators.left_sum now adds either alike)
            summed = self.summed
            self._started = ([r if i in summed else _plain_range(r)
                              for i, r in enumerate(ranges)],
                             [self._total(ranges, t) for t in range(len(self.sums))])
        ranges, totals = self._started
        return list(ranges), list(totals)

    def _total(self, ranges: list, t: int) -> float:
        return _weighted_low(ranges, self.sums[t])

    def parent(self, ranges: list, totals: list, k: int, idx: list[int],
               timed: bool = False) -> tuple:
        """The ranges of the cells that read place k, and the sums, before any
        value of place k is set: every child of a node sets the same cells,
        so they are kept once per node (not once per child) and set back once
        (restore). With them, each table's index over the places before k
        (the same for every child: a child adds its value times one stride),
        per group of readers: the summed cells' and the rest's, or with
        `timed` the time cells' first (update_time), the other groups' found
        when a child first reads them (most children of such a node are cut
        on their time)."""
        if timed:
            readers = self.time_readers[k] or self._time_readers(k)
        else:
            readers = self.readers[k] or self._readers(k)
        bases = [_bases(readers[0], idx)] + [None] * (len(readers) - 1)
        return self.read_at[k](ranges), list(totals), bases, readers, int(timed)

    def update_time(self, ranges: list, k: int, idx: list[int], parent: tuple) -> None:
        """The time cells that read place k (a parent() with `timed`), before
        update_sums: a child whose time alone loses is cut before its memory
        is read."""
        tables, exprs, _, _ = parent[3][0]
        _tables(ranges, idx[k], tables, parent[2][0])
        if exprs:
            _exprs(ranges, k, idx, exprs)

    def update_sums(self, ranges: list, totals: list, k: int, idx: list[int],
                    parent: tuple) -> None:
        """The cells the sums read and the sums, after place k is set, from
        the node's own (parent()): each sum is the node's plus the change of
        its terms at place k, the same float operations as before (a child
        always starts from its node's values)."""
        before, node_totals, bases, readers, g = parent
        tables, exprs, _, _ = readers[g]
        _tables(ranges, idx[k], tables, bases[g] or _found(bases, g, readers, idx))
        if exprs:
            _exprs(ranges, k, idx, exprs)
        for t, terms in enumerate(self.terms_at[k]):
            delta = 0.0
            for i, n, w, side in terms:  # a negative weight reads the high end
                delta += w * (ranges[i][side] - before[n][side])
            total = node_totals[t]
            if delta != delta or math.isinf(total) or math.isinf(delta):
                totals[t] = self._total(ranges, t)  # inf or nan: add up afresh
            else:
                totals[t] = total + delta if delta else total

    def update_rest(self, ranges: list, k: int, idx: list[int], parent: tuple) -> None:
        """The other cells that read place k, after update_sums."""
        g = parent[4] + 1
        bases, readers = parent[2], parent[3]
        tables, exprs, _, _ = readers[g]
        _tables(ranges, idx[k], tables, bases[g] or _found(bases, g, readers, idx))
        if exprs:
            _exprs(ranges, k, idx, exprs)

    def _readers(self, k: int) -> tuple:
        """Per place k, on first use: the readers of the cells the sums read,
        and of the rest, each as (tables, expressions)."""
        readers = self.readers[k]
        if readers is None:
            readers = self.readers[k] = tuple(
                self._group(k, part) for part in (self.at[k][:self.split[k]],
                                                  self.at[k][self.split[k]:]))
        return readers

    def _time_readers(self, k: int) -> tuple:
        """Per place k, on first use: the readers of the time cells, of the
        other cells the sums read, and of the rest (each in at[k]'s order)."""
        readers = self.time_readers[k]
        if readers is None:
            at, timed, summed = self.at[k], self.timed, self.summed
            readers = self.time_readers[k] = (
                self._group(k, [i for i in at if i in timed]),
                self._group(k, [i for i in at if i in summed and i not in timed]),
                self._group(k, [i for i in at if i not in summed and i not in timed]))
        return readers

    def _group(self, k: int, part: list) -> tuple:
        """The readers of some cells at place k as (tables, expressions, the
        distinct (place, stride) pairs before k the tables read, each found
        once a node by parent(), and their indexer, _indexer's). A table's:
        (slot, stride of place k, its level's low and high (_indexable),
        listed, which of those pairs); an expression's (or a table of
        codes'): (slot, cell, memo level j, memo key), j and the key as
        Expr.bound finds them (they depend on k only, for this preparation),
        the key None where bound() itself answers. Tables are read before
        expressions: a table's read changes nothing, and the expressions
        (whose reads fill memos and link levels) keep their order."""
        tables, exprs, befores = [], [], {}
        for i in part:
            cell, level = reader_of(self.cells[i], k + 1)
            if isinstance(cell, Expr):
                j = bisect.bisect_left(cell._places, k + 1)
                exprs.append((i, cell, j, cell._keys[j]))
            elif level is None:  # a table of codes
                exprs.append((i, cell, 0, None))
            else:
                pairs, low, high, listed = level
                stride, before = (pairs[-1][1], pairs[:-1]) if pairs and pairs[-1][0] == k \
                    else (0, pairs)  # not read at k (never, for a cell at place k): all before
                tables.append((i, stride, _indexable(low), _indexable(high), listed,
                               befores.setdefault(before, len(befores))))
        return tables, exprs, list(befores), _indexer(tuple(befores))

    def taken(self, ranges: list, totals: list, k: int) -> tuple:
        """What a child that fits set (update_sums and update_rest), to set
        it again with apply()."""
        return self.read_at[k](ranges), list(totals)

    def apply(self, ranges: list, totals: list, k: int, taken: tuple) -> None:
        """Set again what a child set (taken()): every cell that reads place k."""
        (self.write_at[k] or self._writer(k))(ranges, taken[0])
        totals[:] = taken[1]

    def restore(self, ranges: list, totals: list, k: int, parent: tuple) -> None:
        """The node's own ranges and sums back (parent())."""
        (self.write_at[k] or self._writer(k))(ranges, parent[0])
        totals[:] = parent[1]

    def _writer(self, k: int):
        found = self.write_at[k] = _writer_of(tuple(self.at[k]))
        return found


def _plain_range(bounds: tuple) -> tuple:
    """A range whose finite numpy floats are made the Python floats of the same
    values: the same IEEE operations in time_low and the bounds, without numpy's
    scalar arithmetic (~10x the instructions). inf and nan stay as they are
    (numpy's warnings on inf * 0 or inf - inf with them, as before)."""
    low, high = bounds
    if type(low) is not np.float64 and type(high) is not np.float64:
        return bounds
    if type(low) is np.float64 and math.isfinite(low):
        low = float(low)
    if type(high) is np.float64 and math.isfinite(high):
        high = float(high)
    return low, high


def _reader_of(at: list[int]):
    """fn(ranges) -> the tuple of ranges[i] for i in at (one C call,
    operator.itemgetter's, where at holds two or more)."""
    if len(at) >= 2:
        return operator.itemgetter(*at)
    if at:
        return lambda ranges, i=at[0]: (ranges[i],)
    return lambda ranges: ()


_WRITERS = Kept(4096)  # a place's cells -> their writer, made once per process


def _writer_of(at: tuple):
    """fn(ranges, values): ranges[i] = values[n] for the n-th i of at, in at's
    order, written out as one unpacking (`ranges[3], ranges[7] = values`: no
    loop, no pair unpacked a cell). The same cells recur across preparations
    and plans, so each text is compiled once."""
    targets = "".join(f"ranges[{i}], " for i in at) or "()"
    return _generated(_WRITERS, at, f"def write(ranges, values):\n    {targets} = values\n",
                      "<writer>")


def _generated(kept: Kept, key, source: str, filename: str):
    """The one function `source` defines, kept under `key`: compiled once a text
    (codecache.compiled: across the command's processes too), without builtins."""
    fn = kept.get(key)
    if fn is None:
        namespace: dict = {"__builtins__": {}}
        exec(codecache.compiled(source, filename), namespace)
        del namespace["__builtins__"]
        (fn,) = namespace.values()
        fn = kept.keep(key, fn)
    return fn


def _bases(group: tuple, idx: list[int]) -> list[int]:
    """A group's indices over the places before k (its distinct pairs'): its
    indexer's (_indexer), one call."""
    return group[3](idx)


_INDEXERS = Kept(4096)  # a group's distinct pairs -> its indexer, made once per process


def _indexer(befores: tuple):
    """fn(idx) -> each pairs' index, sum(idx[place] * stride), written out as one
    expression per pairs (the same integers as the loop over them, without a
    loop, a tuple unpacked and a name stored per pair). A group's pairs recur
    across preparations and plans (203 distinct over 909 groups in six plans),
    so each text is compiled once."""
    sums = ", ".join(" + ".join(f"idx[{place}] * {stride}" for place, stride in before)
                     or "0" for before in befores)
    return _generated(_INDEXERS, befores, f"def index(idx):\n    return [{sums}]\n",
                      "<indexer>")


def _found(bases: list, g: int, readers: tuple, idx: list[int]) -> list[int]:
    """Group g's indices, found on first use (idx's places before k are the node's)."""
    found = bases[g] = _bases(readers[g], idx)
    return found


def _indexable(values):
    """A level's side as _tables and _rules_hold index it: a list as it is, a
    flat array as a memoryview (a cell read as .item() reads it, the same
    Python value, without a method call; no copy), or as its list where its
    dtype has no such view (objects, a foreign byte order)."""
    if type(values) is list:
        return values
    if values.ndim == 1 and values.dtype.isnative and values.dtype.char in _VIEWED:
        return memoryview(values)
    return values.tolist()


_VIEWED = "?bBhHiIlLqQfd"  # dtypes whose memoryview reads a cell as .item() does


def _tables(ranges: list, value: int, tables: list, bases: list) -> None:
    """Table.bound's reads at place k set to `value` (its level found once,
    each side indexable: _indexable): the node's index plus the value times
    the table's stride of place k."""
    for i, stride, low, high, _, before in tables:
        at = bases[before] + value * stride
        ranges[i] = (low[at], high[at])


def _exprs(ranges: list, k: int, idx: list[int], exprs: list) -> None:
    """Expr.bound's reads, its memo read inline."""
    for i, cell, j, key in exprs:
        if key is not None:
            memo = cell._memo
            if memo is not None:
                slot = key(idx)
                found = memo.get(slot, _MISS)
                if found is _MISS:
                    found = cell._fill(j, k + 1, idx, slot, memo)
                else:
                    cell._hits += 1
                ranges[i] = found
                continue
        ranges[i] = cell.bound(k + 1, idx)


def _positions(values: tuple) -> dict:
    """value -> its position in `values`, the first of equal values (as
    tuple.index finds it: equal values hash alike); {} where one is unhashable
    (view then reads the tuple)."""
    found: dict = {}
    try:
        for i, value in enumerate(values):
            found.setdefault(value, i)
    except TypeError:
        return {}
    return found


def _free_defaults(defaults: list[int], domains) -> list[int]:
    """Per place k: how many places from k on may still take their default
    (a suffix count, once per search rather than a sum per place)."""
    free = [0] * (len(domains) + 1)
    for a in range(len(domains) - 1, -1, -1):
        free[a] = free[a + 1] + (defaults[a] in domains[a])
    return free


def _weighted_low(ranges: list, terms: list) -> float:
    """The least value of a weighted sum of the cells' ranges."""
    return left_sum(w * ranges[i][0 if w > 0 else 1] for w, i in terms)


class _State:
    def __init__(self, search: Search, domains, budget: int, first: bool, deadline: float):
        self.s = search
        self.deadline = deadline
        self.domains = domains
        self.budget = budget
        self.first = first
        self.nodes = 0
        n = len(search.order)
        self.idx = [0] * n
        self.best: tuple[dict, Metrics] | None = None
        self.best_key: tuple | None = None  # exact
        self.best_float: tuple | None = None
        self.ranges, self.totals = search.tracker.start(self.idx)
        self.tried = [0] * n
        self.pruned = [0] * n
        self.time_firsts: list = [None] * n  # _time_first
        self.free_defaults = _free_defaults(search.defaults, domains)
        self.memory_cap = search.budget * (1 + TOLERANCE)  # _fits', found once a search
        self.host_cap = search.host_budget * (1 + TOLERANCE) if search.host_terms else None

    def dfs(self, k: int, defaults: int = 0) -> None:
        """Children in the order of their bounds, best first, so that the first
        leaves reached are good incumbents; each is re-checked before descent.

        Once there is an incumbent, a child whose time alone is beyond it by
        more than twice the tolerance (_beyond) is cut before its memory and
        the rest of its cells are read: its bound, and every incumbent's after
        it, would have the same first component, so the check before descent
        would cut it (the time decides, in _lex_less, before the rest is read).
        It is counted as pruned where that check would have counted it: after
        the other children (every child descended into sorts before it, by its
        time); where the search stops below, one whose memory would not have
        fit is counted then, as the memory check would have counted it.

        A feasibility search (first) orders its children by memory alone and
        stops at its first feasible leaf, before any bound is compared: it
        reads only the cells the sums read (update_rest's cells, time and
        preference tiers, only ever feed the bounds)."""
        s = self.s
        if k == len(s.order):
            self.leaf(defaults)
            return
        children = []
        ranges, totals, tracker = self.ranges, self.totals, s.tracker
        best = self.best_float
        timed = best is not None and not self.first and s.objective != "memory" and CUT_ON_TIME
        parent = tracker.parent(ranges, totals, k, self.idx, timed)
        checks, rule_index = s.rule_readers[k] or self._rule_checks(k)
        rule_bases = rule_index(self.idx)
        cut: list = []
        free = self.free_defaults[k + 1]  # _bounds(k + 1, ...)'s defaults still free
        if timed:
            ceiling = best[0]
            moves = tracker.times_at[k]  # else every child has the node's time
            if not moves and not _beyond(s.time_low(ranges), ceiling):
                timed = False
            elif moves:  # the steps of the time before place k's first, once a node
                start = s.time_start(ranges, self._time_first(k))
        try:
            for value in self.domains[k]:
                self.nodes += 1
                if self.nodes > self.budget:
                    raise Exhausted
                if not self.nodes & 255 and expired(self.deadline):
                    raise TimedOut
                self.idx[k] = value
                self.tried[k] += 1
                if not self._rules_hold(k, checks, rule_bases):
                    self.pruned[k] += 1
                    continue
                time = None  # the child's time bound, where found here
                if timed:
                    if moves:
                        tracker.update_time(ranges, k, self.idx, parent)
                        time = s.time_low(ranges, start)
                    if not moves or _beyond(time, ceiling):
                        cut.append(value)
                        continue
                tracker.update_sums(ranges, totals, k, self.idx, parent)
                if self._fits():
                    kept = defaults + (value == s.defaults[k])
                    if self.first:  # a feasibility search reads only its memory
                        bound = (self._memory(),)
                    else:  # the rest of the cells only for a child that fits
                        tracker.update_rest(ranges, k, self.idx, parent)
                        bound = s.objective_bound(ranges, totals[0], kept + free, time)
                    children.append((bound, value, kept, tracker.taken(ranges, totals, k)))
                else:
                    self.pruned[k] += 1
            if len(children) > 1:  # a feasibility search tries the smallest first
                children.sort(key=_sortable)
            for bound, value, kept, taken in children:
                if self.best_float is not None and not self.first and \
                        not _lex_less(bound, self.best_float, True):
                    self.pruned[k] += 1
                    continue
                self.idx[k] = value
                tracker.apply(ranges, totals, k, taken)  # as update_sums and update_rest set them
                self.dfs(k + 1, kept)
        except BaseException:
            if cut:  # stopped: count the cut children the memory check would have counted
                for value in cut:
                    self.idx[k] = value
                    if moves:
                        tracker.update_time(ranges, k, self.idx, parent)
                    tracker.update_sums(ranges, totals, k, self.idx, parent)
                    if not self._fits():
                        self.pruned[k] += 1
            raise
        finally:  # the node's own ranges back (also where the search stops below)
            tracker.restore(ranges, totals, k, parent)
        self.pruned[k] += len(cut)

    def _time_first(self, k: int) -> int:
        """The first step of time_low (its parts, then its factors) whose cell
        reads place k (found once a round)."""
        n = self.time_firsts[k]
        if n is None:
            s = self.s
            at = set(s.tracker.at[k])
            steps = s.time_parts + s.time_factors
            n = self.time_firsts[k] = next((m for m, i in enumerate(steps) if i in at),
                                           len(steps))
        return n

    def _memory(self) -> float:
        return self.totals[0]

    def _fits(self) -> bool:
        totals = self.totals
        if totals[0] > self.memory_cap:
            return False
        return self.host_cap is None or totals[1] <= self.host_cap

    def _rule_checks(self, k: int) -> tuple:
        """The rules read at place k (on first use per preparation, kept in
        rule_readers[k]): (checks, indexer), a table's check (None, the stride
        of place k, its level's high side (_indexable), listed, which distinct
        pairs before k), an expression's (cell, ...); the indexer finds the pairs' indices
        once a node (_indexer), as a tracker group's."""
        checks, befores = [], {}
        for cell, level in (reader_of(cell, k + 1) for cell in self.s.rules_at[k]):
            if level is None:
                checks.append((cell, 0, None, False, 0))
                continue
            pairs, _, high, listed = level
            stride, before = (pairs[-1][1], pairs[:-1]) if pairs and pairs[-1][0] == k \
                else (0, pairs)
            checks.append((None, stride, _indexable(high), listed,
                           befores.setdefault(before, len(befores))))
        found = self.s.rule_readers[k] = (checks, _indexer(tuple(befores)))
        return found

    def _rules_hold(self, k: int, checks: list, bases: list) -> bool:
        """Whether every rule read at place k may still hold with idx[k] set
        (`bases`: the node's indices over the places before k, _rule_checks')."""
        idx = self.idx
        value = idx[k]
        for cell, stride, high, _, before in checks:
            if cell is not None:
                if not cell.bound(k + 1, idx)[1]:
                    return False
                continue
            at = bases[before] + value * stride
            if not high[at]:
                return False
        return True

    def _bounds(self, k: int, defaults: int, time: float | None = None) -> tuple:
        return self.s.objective_bound(self.ranges, self._memory(),
                                      defaults + self.free_defaults[k], time)

    def leaf(self, defaults: int) -> None:
        s = self.s
        if self.best_float is not None and not _lex_less(self._bounds(len(s.order), defaults),
                                                           self.best_float, allow_equal=True):
            return
        assignment = s.assignment(self.idx)
        metrics = measure(s.p, {**s.p.fixed, **assignment}, lazy=self.first)
        if not metrics.feasible:
            return
        if self.first:  # any feasible plan: its time and the rest measured when read
            self.best = (assignment, metrics)
            raise _Done
        exact = sort_key(metrics)
        if self.best_key is None or exact < self.best_key:
            self.best = (assignment, metrics)
            self.best_key = exact
            self.best_float = tuple(float(x) for x in exact)


def why_masks(search: "Search", key: str, value) -> list:
    """The problem's masks with `key` narrowed to `value`."""
    masks = [mask.copy() for mask in search.allowed]
    axis = search.keys.index(key)
    masks[axis][:] = False
    masks[axis][search.p.choices[key].index(value)] = True
    return masks


def _linear(cell, weight: float) -> list[tuple[float, Any]]:
    """cell as a weighted sum of cells: sums are opened, constant factors pulled out."""
    if isinstance(cell, Expr) and cell.op == "sum":
        return [pair for arg in cell.args for pair in _linear(arg, weight)]
    if isinstance(cell, Expr) and cell.op == "*":
        a, b = cell.args
        for const, other in ((a, b), (b, a)):
            if isinstance(const, Table) and not const.deps and const.kind == "num":
                return _linear(other, weight * float(const.values[0]))
    return [(weight, cell)]


def _product(cell) -> tuple[list, list]:
    """time as (parts summed, factors multiplied)."""
    if isinstance(cell, Expr) and cell.op == "*":
        parts, factors = _product(cell.args[0])
        return parts, factors + list(cell.args[1:])
    if isinstance(cell, Expr) and cell.op == "sum":
        return list(cell.args), []
    return [cell], []


def _beyond(low: float, ceiling: float) -> bool:
    """Whether a time bound loses to an incumbent's time (`ceiling`) by more than
    twice the tolerance: then _lex_less(bound, best, True) is False for this
    incumbent and every later one (their times are no larger), decided by the
    first component. Not for nan or infinite values (_lex_less reads on)."""
    return low - ceiling > 2 * TOLERANCE * max(abs(low), abs(ceiling)) and \
        math.isfinite(low) and math.isfinite(ceiling)


def _sortable(child) -> tuple:
    """A child's sort key: its bound, a nan read as -inf, then its value. The
    bound itself where it holds no nan (nearly always: no tuple rebuilt)."""
    bound = child[0]
    for x in bound:
        if x != x:
            bound = tuple(y if y == y else -math.inf for y in bound)
            break
    return bound + (child[1],)


def _lex_less(a: tuple, b: tuple, allow_equal: bool) -> bool:
    """a < b, components within TOLERANCE counting as equal (then the next decides)."""
    for x, y in zip(a, b):
        if x != x or y != y:  # nan: no information
            return True
        slack = TOLERANCE * max(abs(x), abs(y))
        if x < y - slack:
            return True
        if x > y + slack:
            return False
    return allow_equal
