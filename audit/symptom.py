"""`kbsolve fix --symptom`: the seeds' decision trees, done by search over the
KB's options with the estimate of the user's config (audit/effects.py).

oom       changes that lower peak device memory; those that make the config fit
          first (when it does not), then by memory saved per speed lost
slow      changes that raise predicted throughput and still fit, fastest first
unstable  the recipe's own values (an option's `from`: the shipped example's
          learning rate, schedule) that stop a KB warning firing on the config,
          offered with `--allow recipe`; then changes that satisfy more of the
          KB's preferences, still fitting

Every cure keeps the rules, the task and the recipe (the global batch is a
rule: a cure that lowers the micro-batch raises the accumulation with it) and
changes no numerics, recipe or library the user did not allow (`--allow`).
An OOM cure that does not make the config fit is listed after those that do,
and marked so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from typing import Any

from kbsolve import roles
from kbsolve.audit.assess import Context, facts_needed, needs
from kbsolve.audit.audit_data import audit_data
from kbsolve.audit.consent import describe
from kbsolve.audit.effects import Effect, Estimator
from kbsolve.diagnostics import KbError
from kbsolve.dsl import ir
from kbsolve.program.evaluate import Evaluator
from kbsolve.plan.report import gib

MAX_VALUES = 64
PAIR_POOL = 16
CHAIN_POOL = 24  # cures a greedy stack chooses from
CHAIN_STEPS = 5
MAX_REPAIRS = 2000  # measured pairs that repair a single change's broken rules


@dataclass
class Suggestion:
    changes: dict[str, Any]  # option key -> value
    device_gib: float
    budget_gib: float
    speed_delta_pct: float  # + is faster
    saved_gib: float  # peak device memory saved, + is less
    reasons: list[str] = field(default_factory=list)
    fits: bool = True  # the config fits after it (for oom: it cures the OOM)


@dataclass
class Withheld:
    changes: dict[str, Any]
    needs: str  # 'fp8 (numerics)': what --allow would name
    summary: str  # '-6.1 GiB, -8.0% speed'


def suggest(ctx: Context, symptom: str, allowed: frozenset[str] = frozenset(),
            top: int = 5, recipe_allowed: bool = False
            ) -> tuple[Estimator, list[Suggestion], list[Withheld]]:
    est = Estimator(ctx, allowed)
    singles = _singles(est)
    effects = [est.effect(c) for c in singles]
    pool = [e for e in effects if e.allowed] + _repaired(est, singles, effects)
    held = [e for e in effects if e.consent and not e.broken and not e.task_changed]
    if symptom == "oom":
        found = _oom(est, pool)
        held = sorted((e for e in held if e.lowers_memory), key=_oom_rank(est))
    elif symptom == "slow":
        found = sorted((e for e in pool if e.faster and _fits_as_before(est, e)),
                       key=lambda e: (-e.speed_ratio, len(e.changes)))
        held = sorted((e for e in held if e.faster and _fits_as_before(est, e)),
                      key=lambda e: -e.speed_ratio)
    else:
        score = _tier_score(est.base.preferences)
        found = sorted((e for e in pool if _fits_as_before(est, e)
                        and _tier_score(e.metrics.preferences) > score),
                       key=lambda e: _neg(_tier_score(e.metrics.preferences)))
        recipe = _recipe_cures(est)
        found, held = (recipe + found, []) if recipe_allowed else (found, recipe)
    found = _distinct(found)[:top]
    withheld = [Withheld(e.changes, describe(e.consent) if e.consent else
                         f"{roles.value(ctx.kb, 'recipe_group')} (the recipe's {', '.join(k.split('.', 1)[1] for k in e.changes)})",
                         e.summary()) for e in _distinct(held)[:3]]
    return est, [_suggestion(ctx, est, e, symptom) for e in found], withheld


def _recipe_cures(est: Estimator) -> list[Effect]:
    """The recipe's own values (an option's `from` that reads no fact: the shipped
    example's) for the recipe options the KB's audit data limits (audit.yaml
    recipe_limits) when the config exceeds the limit, then for each KB warning the
    config fires, the recipe options it reads moved to that value, one at a time
    and together, where the warning then stops; nothing else may break."""
    ctx, kb = est.ctx, est.ctx.kb
    evaluator = Evaluator(kb, ctx.framework, ctx.facts)
    found = []
    for limit in over_limits(est):
        effect = est.effect({limit.option: _example(evaluator, kb, ctx, limit.option)})
        if not effect.broken and _fits_as_before(est, effect):
            found.append(effect)
    for key in est.base.warnings:
        warning = kb.warnings.get(key)
        if warning is None:
            continue
        example = {}
        for name in sorted(needs(kb, warning.expr)[1]):
            option = kb.options[name]
            if name in est.problem.choices or option.source_expr is None or \
                    facts_needed(kb, option.source_expr):
                continue
            try:
                value = evaluator.run(option.source_expr, ctx.assignment)
            except KbError:
                continue
            if value != ctx.assignment.get(name):
                example[name] = value
        trials = [{k: v} for k, v in example.items()] + ([example] if len(example) > 1 else [])
        for change in trials:
            effect = est.effect(change)
            if key not in effect.metrics.warnings and not effect.broken and \
                    _fits_as_before(est, effect):
                found.append(effect)
    return found


def _singles(est: Estimator) -> list[dict[str, Any]]:
    out = []
    for key, values in sorted(est.problem.choices.items()):
        for value in values[:MAX_VALUES]:
            if value != est.ctx.assignment.get(key):
                out.append({key: value})
    return out


def _repaired(est: Estimator, singles: list[dict], effects: list[Effect]) -> list[Effect]:
    """A change that breaks rules only, plus one change to an option those rules
    read that makes them hold again (micro-batch 4 -> 2 with accumulation 2 -> 4)."""
    kb = est.ctx.kb
    by_key: dict[str, list[dict]] = {}
    for change in singles:
        by_key.setdefault(next(iter(change)), []).append(change)
    found, tried = [], 0
    for effect in effects:
        if not effect.broken or effect.consent or effect.task_changed:
            continue
        key = next(iter(effect.changes))
        read = set()
        for rule_key in effect.broken:
            if rule_key in kb.rules:
                read |= needs(kb, kb.rules[rule_key].expr)[1]
        for other in sorted(read - {key}):
            for change in by_key.get(other, ()):
                if tried >= MAX_REPAIRS:
                    return found
                tried += 1
                both = est.effect({**effect.changes, **change})
                if both.allowed:
                    found.append(both)
    return found


def _oom(est: Estimator, pool: list[Effect]) -> list[Effect]:
    found = [e for e in pool if e.lowers_memory and e.metrics.host_fits]
    if not est.base_fits and not any(e.fits for e in found):
        leaner = sorted((e for e in found if len(e.changes) == 1),
                        key=lambda e: e.peak)[:PAIR_POOL]
        for a, b in combinations(leaner, 2):
            if a.changes.keys() & b.changes.keys():
                continue
            both = est.effect({**a.changes, **b.changes})
            if both.allowed and both.lowers_memory and both.metrics.host_fits:
                found.append(both)
    if not est.base_fits and not any(e.fits for e in found):
        found += _chain(est, found)
    return sorted(found, key=_oom_rank(est))


def _chain(est: Estimator, cures: list[Effect]) -> list[Effect]:
    """Cures stacked greedily (each step the one that leaves the least memory; the
    last the fastest that fits), for an OOM that no one or two changes cure."""
    pool = sorted(cures, key=lambda e: e.peak)[:CHAIN_POOL]
    current: dict[str, Any] = {}
    steps = []
    for _ in range(CHAIN_STEPS):
        tried = [est.effect({**current, **e.changes}) for e in pool
                 if not e.changes.keys() & current.keys()]
        tried = [e for e in tried if e.allowed and e.metrics.host_fits]
        if not tried:
            break
        fitting = [e for e in tried if e.fits]
        if fitting:  # the last step: the fastest of those that fit
            return [max(fitting, key=lambda e: (e.speed_ratio, -len(e.changes)))]
        best = min(tried, key=lambda e: (e.peak, -e.speed_ratio))
        if steps and best.peak >= steps[-1].peak:
            break
        current = best.changes
        steps.append(best)
    return []


def _oom_rank(est: Estimator):
    """Fitting first (when the config does not fit), then the cures that cost no
    speed by memory saved, then memory saved per share of speed lost."""
    def rank(e: Effect) -> tuple:
        cost = max(Fraction(0), 1 - e.speed_ratio)
        value = e.saved if cost == 0 else e.saved / cost
        return (not est.base_fits and not e.fits, cost > 0, -value, len(e.changes))
    return rank


def _fits_as_before(est: Estimator, e: Effect) -> bool:
    """A config that fits still fits; one that does not needs no more memory."""
    return e.fits if est.base_fits else not e.raises_memory


def _distinct(effects: list[Effect]) -> list[Effect]:
    seen, out = set(), []
    for e in effects:
        slot = tuple(sorted((k, str(v)) for k, v in e.changes.items()))
        if slot not in seen:
            seen.add(slot)
            out.append(e)
    return out


def _tier_score(preferences: dict) -> tuple:
    return tuple(preferences[t] for t in sorted(preferences))


def _neg(scores: tuple) -> tuple:
    return tuple(-s for s in scores)


def _suggestion(ctx: Context, est: Estimator, e: Effect, symptom: str) -> Suggestion:
    return Suggestion(e.changes, gib(e.device), gib(e.metrics.budget), e.speed_pct,
                      gib(e.saved), _reasons(ctx, est, e, symptom), e.fits)


def _reasons(ctx: Context, est: Estimator, e: Effect, symptom: str) -> list[str]:
    kb, base, m = ctx.kb, est.base, e.metrics
    if symptom == "oom":
        drops = sorted(((base.memory[k] - v, k) for k, v in m.memory.items()
                        if base.memory.get(k, 0) > v), reverse=True)
        return [f"memory term {k.split('.', 1)[1]} drops by {gib(d)} GiB: "
                f"{kb.memory[k].meta.because}" for d, k in drops[:2]]
    if symptom == "slow":
        gains = sorted(((base.times.get(k, Fraction(0)) - v, k) for k, v in m.times.items()),
                       reverse=True)
        factors = sorted(((base.factors.get(k, Fraction(1)) / v, k)
                          for k, v in m.factors.items() if v), reverse=True)
        told = [f"speed term {k.split('.', 1)[1]}: {kb.speed[k].meta.because}"
                for d, k in gains[:2] if d > 0]
        told += [f"speed factor {k.split('.', 1)[1]}: {kb.speed[k].meta.because}"
                 for r, k in factors[:2] if r > 1]
        return told[:2] or ["a faster step by the KB's speed model"]
    stopped = [kb.warnings[w] for w in base.warnings if w not in m.warnings and w in kb.warnings]
    told = [f"warning {w.id} stops: {w.meta.because} ({w.meta.source})" for w in stopped]
    told += [f"{limit.option.split('.', 1)[1]} was above {float(limit.above):g}x the shipped "
             f"example's: {limit.because} ({limit.source})"
             for limit in over_limits(est) if limit.option in e.changes]
    for key, value in e.changes.items():
        option = kb.options[key]
        if key not in est.problem.choices and option.source_expr is not None:
            told.append(f"{option.name}: {_plain(value)}, the shipped example's value "
                        f"({_example_source(ctx, option, value)}) [recipe] review")
    after = ctx.with_changes(e.changes)
    gained = [p for p in kb.of(kb.preferences, ctx.framework)
              if ctx.run(p.expr, after) != ctx.run(p.expr)]
    return told + [f"preference {p.id}: {p.meta.because}" for p in gained[:3]] or \
        ["more of the KB's preferences hold"]


def over_limits(est: Estimator) -> list:
    """The KB's recipe limits the config's values exceed."""
    ctx = est.ctx
    evaluator = Evaluator(ctx.kb, ctx.framework, ctx.facts)
    out = []
    for limit in audit_data(ctx.kb, ctx.framework).recipe_limits:
        example = _example(evaluator, ctx.kb, ctx, limit.option)
        value = ctx.assignment.get(limit.option)
        if example is not None and value is not None and value > limit.above * example:
            out.append(limit)
    return out


def _example(evaluator: Evaluator, kb, ctx: Context, key: str) -> Any:
    try:
        return evaluator.run(kb.options[key].source_expr, ctx.assignment)
    except KbError:
        return None


def _example_source(ctx: Context, option, value: Any) -> str:
    """The source of the let that gives the option's `from` this value (the
    example's learning rate), else the option's own."""
    evaluator = Evaluator(ctx.kb, ctx.framework, ctx.facts)
    for name in sorted(ir.lets_used(option.source_expr)):
        let = ctx.kb.lets.get(name)
        try:
            if let is not None and let.meta.source and \
                    evaluator.run(let.expr, ctx.assignment) == value:
                return let.meta.source
        except KbError:
            continue
    return option.meta.source


def _plain(value: Any) -> str:
    if isinstance(value, Fraction):
        return f"{float(value):g}"
    return str(value).lower() if isinstance(value, bool) else str(value)
