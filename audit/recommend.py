"""The recommended modifications: the fixes for the findings, then the
recommended checklist items that, taken together, still satisfy every hard
rule and still fit (checked by the solver's reference evaluator)."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from kbsolve import roles
from kbsolve.audit.assess import Context, options_needed
from kbsolve.audit.audit_data import audit_data, config_value, reference_change
from kbsolve.audit.consent import describe, needing_consent
from kbsolve.audit.effects import Estimator
from kbsolve.audit.mapping import FlatFile, plain
from kbsolve.results.audit import Change, CheckResult, Finding
from kbsolve.diagnostics import KbError
from kbsolve.dsl.ir import options_used
from kbsolve.program.batch import geometry_of
from kbsolve.program.metrics import measure
from kbsolve.program.problem import build_problem


def sound(ctx: Context, changes: dict[str, Any], must_fit: bool,
          consent: bool = True, est: Estimator | None = None) -> bool:
    """After `changes`, every decidable hard rule holds, the global batch is the
    config's, nothing the user did not allow is changed (optins,
    audit/consent.py), a config that fits still fits (when asked) and one that
    does not fit needs no more memory (by the estimate `est`, when there is one)."""
    if _newly_broken(ctx, changes) or not keeps_batch(ctx, changes):
        return False
    if consent and needing_consent(ctx, changes):
        return False
    if est is not None:
        effect = est.effect(changes)
        if must_fit and not effect.fits:
            return False
        return est.base_fits or not effect.raises_memory
    if must_fit:
        problem = build_problem(ctx.kb, ctx.framework, ctx.facts, {})
        return measure(problem, ctx.with_changes(changes)).fits
    return True


def _newly_broken(ctx: Context, changes: dict[str, Any]) -> list:
    """The rules broken after `changes`, less the framework's advice that the
    config already breaks (a warning of the user's, which holds back no fix)."""
    advice = audit_data(ctx.kb, ctx.framework).advice_rules
    before = {r.id for r in ctx.broken_after({})} if advice else set()
    return [r for r in ctx.broken_after(changes) if not (r.id in advice and r.id in before)]


def keeps_batch(ctx: Context, changes: dict[str, Any]) -> bool:
    """The recipe's global batch (the framework's `batch_geometry`: micro-batch x
    accumulation x data-parallel ranks) is the same after `changes`; when it
    cannot be computed (a fact is unknown), no option it reads may change."""
    geometry = roles.let(ctx.kb, ctx.framework, "batch_geometry")
    if geometry is None or not changes:
        return True
    try:
        return geometry_of(ctx.kb, ctx.framework, ctx.facts, ctx.assignment) == \
            geometry_of(ctx.kb, ctx.framework, ctx.facts, ctx.with_changes(changes))
    except KbError:
        read = options_needed(ctx.kb, geometry.expr)
        return not read & changes.keys()


def repair(ctx: Context, broken: list[str], est: Estimator | None = None,
           consent: bool = True) -> dict[str, Any]:
    """The fewest changes (one, else two) to the options of the broken rules that
    make every decidable rule hold, keep the global batch, add no memory to a
    config that does not fit and (`consent`) change nothing the user did not
    allow; each option's default first. Where every such repair adds memory to a
    config that does not fit, the one that adds the least."""
    kb = ctx.kb
    involved = sorted({k for rule_id in broken
                       for k in options_used(kb.rules[f"{ctx.framework}.{rule_id}"].expr)})
    singles = []
    for key in involved:
        option = kb.options[key]
        values = [option.default] + [v for v in option.domain or () if v != option.default]
        singles += [{key: v} for v in values if v != ctx.assignment.get(key)]
    pairs = [{**a, **b} for a, b in combinations(singles, 2) if a.keys() != b.keys()]
    for change in singles + pairs:
        if sound(ctx, change, False, consent, est):
            return change
    if est is None or est.base_fits:
        return {}
    # the config does not fit and every repair adds memory: the rules it breaks stop
    # the run before it starts, so the repair that adds the least (the fewest changes,
    # then, for a note, the fewest consents) is named; `changes_proven` stays false
    # unless a cure on top makes it fit (cure_or_repairs)
    for tier in (singles, pairs):
        found = [c for c in tier if sound(ctx, c, False, consent)]
        if found:
            return min(found, key=lambda c: (0 if consent else len(needing_consent(ctx, c)),
                                             -est.effect(c).saved))
    return {}


def repair_note(ctx: Context, broken: list[str], found: dict[str, Any]) -> list[str]:
    """The repair that needs consent, named with the --allow that admits it."""
    if not found:
        return []
    consent = needing_consent(ctx, found)
    settings = ", ".join(f"{k.split('.', 1)[1]}: {_text(plain(v))}" for k, v in found.items())
    return [f"{', '.join(broken)}: repaired by {settings}, which changes {describe(consent)}; "
            f"pass --allow {', '.join(sorted({o.name for o in consent}))} to have --fix write it"]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def choose(ctx: Context, ordered: list[CheckResult], must_fit: bool,
           base: dict[str, Any] | None = None, est: Estimator | None = None) -> dict[str, Any]:
    """Option changes from the recommended items, greedily, in priority order,
    on top of `base` (the repair of broken rules)."""
    kb = ctx.kb
    chosen: dict[str, Any] = dict(base or {})
    groups: set[str] = set()
    for result in ordered:
        check = kb.checks[f"{ctx.framework}.{result.id}"]
        if check.group and check.group in groups:
            continue
        trial = {**chosen, **{f"{ctx.framework}.{n}": v for n, v in check.recommend}}
        mine = {k: v for k, v in trial.items() if k not in (base or {})}
        if sound(ctx, trial, must_fit, consent=False, est=est) and \
                not needing_consent(ctx, mine):
            chosen = trial
            if check.group:
                groups.add(check.group)
    return {k: v for k, v in chosen.items() if ctx.assignment.get(k) != v}


def cure_or_repairs(ctx: Context, fixes: dict[str, Any], est: Estimator,
                    main_name: str) -> tuple[dict[str, Any], str]:
    """For a config that does not fit, judged as repaired (`fixes`: the repairs of
    its broken rules): the repairs alone when they cure the OOM (nothing more is
    changed); else the first cure that `kbsolve fix --symptom oom` offers and --fix
    can write whole into the config (one that also needs the launch changed, an
    accelerate FSDP file or FORCE_TORCHRUN, would leave a half-changed run), on top
    of the repairs; else the repairs alone. The checklist's items are not written
    on a config that does not fit, even when several of them together would cure
    it: the cure is the one `fix --symptom oom` ranks first (the fewest changes
    that fit, then the least speed lost), so that the two commands never disagree;
    the items stay listed with their gains. Returns the changes and, for a cure,
    what it does by the estimate."""
    repaired = {k: v for k, v in fixes.items() if ctx.assignment.get(k) != v}
    if repaired and est.effect(fixes).fits:
        return repaired, f"the repair cures the OOM: {est.effect(fixes).summary()}"
    from kbsolve.audit.symptom import suggest  # symptom imports this module
    _, found, _ = suggest(ctx, "oom", ctx.allowed)
    # a cure that leaves every value the config writes as written comes first: the
    # user's micro-batch, accumulation or sharding file are their choices (issue 22 §6)
    found = sorted(found, key=lambda c: any(k in ctx.user and ctx.user[k] != v
                                            for k, v in c.changes.items()))
    for cure in found:
        trial = {**fixes, **cure.changes}
        if cure.fits and _in_config(ctx, main_name, trial) and \
                sound(ctx, trial, must_fit=False, consent=False, est=est) and \
                est.effect(trial).fits:
            return {k: v for k, v in trial.items() if ctx.assignment.get(k) != v}, \
                f"cures the OOM: {est.effect(trial).summary()}"
    return repaired, ""


def _in_config(ctx: Context, main_name: str, trial: dict[str, Any]) -> bool:
    """Every option of `trial` is a key of the config (or a file it names)."""
    return all(any(e.target == main_name for e in ctx.kb.options[key].emits) or
               reference_change(ctx.kb, ctx.framework, main_name, key,
                                ctx.with_changes(trial)) is not None
               for key, value in trial.items() if ctx.assignment.get(key) != value)


def changes(ctx: Context, main_name: str, main: FlatFile, findings: list[Finding],
            chosen: dict[str, Any], why: dict[str, str]) -> list[Change]:
    out: list[Change] = []
    for finding in findings:
        for key, value in finding.fix.items():
            out.append(Change(key=key, old=main.values.get(key), new=plain(value),
                              removed=value is None, reason=f"{finding.kind} {finding.id}"))
    for option_key, value in chosen.items():
        option = ctx.kb.options[option_key]
        written = config_value(ctx.kb, option, main_name, value)
        if written is None:
            key = next((e.key for e in option.emits if e.target == main_name), None)
            moved = reference_change(ctx.kb, ctx.framework, main_name, option_key,
                                     ctx.with_changes(chosen)) if key is None else None
            if moved is not None:  # the framework's own file for the new values
                if not any(c.key == moved[0] for c in out):
                    out.append(Change(key=moved[0], old=main.values.get(moved[0]),
                                      new=moved[1], reason=why.get(option_key, "")))
            elif key is None:
                target = option.emits[0].target if option.emits else "?"
                out.append(Change(key=f"{target}:{option.name}", new=plain(value),
                                  reason=why.get(option_key, "")))
            elif key in main.values:
                out.append(Change(key=key, old=main.values[key], removed=True,
                                  reason=why.get(option_key, "")))
            continue
        key, new = written
        out.append(Change(key=key, old=main.values.get(key), new=new,
                          reason=why.get(option_key, "")))
    return _settings_left_off(ctx, main_name, main, chosen, out)


def _settings_left_off(ctx: Context, main_name: str, main: FlatFile, chosen: dict[str, Any],
                       made: list[Change]) -> list[Change]:
    """A change that turns a feature off (quantization_bit removed) takes the
    settings that apply only under it (quantization_method) with it: left behind,
    they would be no-ops the next audit reports."""
    from kbsolve.audit.assess import Undecided
    from kbsolve.dsl.ir import options_used
    after, out = ctx.with_changes(chosen), list(made)
    for option in ctx.kb.options_of(ctx.framework):
        gate = options_used(option.when) & chosen.keys() if option.when is not None else set()
        if not gate:
            continue
        key = next((e.key for e in option.emits if e.target == main_name), None)
        if key is None or key not in main.values:
            continue
        try:
            if not ctx.holds(option.when) or ctx.holds(option.when, after):
                continue
        except Undecided:
            continue
        names = ", ".join(sorted(k.split(".", 1)[1] for k in gate))
        out = [c for c in out if c.key != key]  # an earlier respelling of it is moot
        out.append(Change(key=key, old=main.values[key], removed=True,
                          reason=f"applies only under the {names} this change removes"))
    return out
