"""The checklist's recommendations judged by the same verdicts as plans: the
KB's rules, its optins (what needs the user's consent) and the estimate of
this config on this hardware (audit/effects.py).

A recommended item is kept only where the estimate shows a gain here above the
KB's threshold (audit.yaml `advice_threshold`): when the config fits, a faster
run that still fits (memory it frees is not needed); when it does not fit, less
peak memory, or a faster run without more. An item that needs consent
(`--allow`), changes the task, would not fit, adds memory to a config that does
not fit, or gains less than the threshold is not recommended; one that makes a
KB warning fire is P1 at most (P0 is 'no risk'). An item with no estimate
behind it (the GPU or the model is unknown, or no memory or speed term reads
its options) is a tip: one line, never written by --fix."""

from __future__ import annotations

from fractions import Fraction

from kbsolve.audit.assess import Context
from kbsolve.audit.audit_data import audit_data
from kbsolve.audit.consent import describe, needing_consent
from kbsolve.audit.effects import Effect, Estimator
from kbsolve.results.audit import CheckResult
from kbsolve.plan.report import gib

ORDER = ("P0", "P1", "P2")


def weigh(ctx: Context, results: list[CheckResult], est: Estimator | None) -> list[CheckResult]:
    """Adjust the recommended results in place; returns those withheld for
    want of consent (the report lists them with the --allow that would admit them)."""
    withheld = []
    fw = ctx.kb.frameworks[ctx.framework]
    for result in results:
        if result.status != "recommended":
            continue
        check = ctx.kb.checks[f"{ctx.framework}.{result.id}"]
        changes = {f"{ctx.framework}.{name}": value for name, value in check.recommend}
        if fw.task_option and f"{ctx.framework}.{fw.task_option}" in changes:
            _refuse(result, f"it changes the task ({fw.task_option}), which is the user's")
            continue
        consent = needing_consent(ctx, changes)
        if consent:
            names = ", ".join(sorted({o.name for o in consent}))
            _refuse(result, f"it changes {describe(consent)}: pass --allow {names} to "
                            f"consider it")
            withheld.append(result)
            continue
        if est is None or not est.modeled(changes):
            result.tip = True
            continue
        _judge(result, est, est.effect(changes), _threshold(ctx))
    return withheld


def _threshold(ctx: Context) -> tuple[Fraction, Fraction, str]:
    """(bytes, share of step time, what they are) below which a gain is noise."""
    found = audit_data(ctx.kb, ctx.framework).threshold
    if found is None:  # the KB states none: any gain the report can show
        return Fraction(0), Fraction(0), ""
    return found.memory_gib * 2**30, found.speed_pct / 100, \
        f"the KB's threshold of {float(found.memory_gib):g} GiB or {float(found.speed_pct):g}% speed"


def _judge(result: CheckResult, est: Estimator, e: Effect, least: tuple) -> None:
    memory, speed, named = least
    faster = e.faster and e.speed_ratio - 1 >= speed
    leaner = e.lowers_memory and e.saved >= memory
    result.effect = e.summary()
    warned = [est.ctx.kb.warnings[w].meta.because for w in e.warnings
              if w in est.ctx.kb.warnings]
    if e.broken:
        _refuse(result, f"turning it on breaks rule {e.broken[0].split('.', 1)[1]}")
        return
    if est.base_fits:
        if not e.fits:
            _refuse(result, f"the config fits, and with it it would not "
                            f"({gib(e.device)} GiB of {gib(e.metrics.budget)} GiB)")
        elif faster:
            _cap(result, "P1" if warned else "P0", f"risk: {warned[0]}" if warned else "")
        elif e.faster:
            _refuse(result, f"{e.speed_pct}% faster by the estimate, under {named}")
        elif e.lowers_memory:
            cost = f" and costs {-e.speed_pct}% speed" if e.slower else ""
            _refuse(result, f"the config fits: it would free {gib(e.saved)} GiB that the run "
                            f"does not need{cost}")
        elif warned:
            _refuse(result, f"no gain on this config by the estimate, and {warned[0]}")
        else:
            _refuse(result, _costs(e) or "the estimate shows no gain on this config")
        return
    if e.raises_memory:
        _refuse(result, f"the config does not fit, and it adds {-gib(e.saved)} GiB")
    elif leaner or faster:
        _cap(result, "P1" if warned else "P0", f"risk: {warned[0]}" if warned else "")
    elif e.lowers_memory or e.faster:
        _refuse(result, f"the estimate gives {e.summary()}, under {named}")
    elif warned:
        _refuse(result, f"no gain on this config by the estimate, and {warned[0]}")
    else:
        _refuse(result, "the estimate shows no gain on this config")


def _costs(e: Effect) -> str:
    parts = ([f"{-e.speed_pct}% speed"] if e.slower else []) + \
        ([f"{-gib(e.saved)} GiB"] if e.raises_memory else [])
    return f"no gain on this config by the estimate; it costs {' and '.join(parts)}" \
        if parts else ""


def _refuse(result: CheckResult, why: str) -> None:
    result.status = "not_enabled"
    result.reason = why


def _cap(result: CheckResult, best: str, why: str) -> None:
    """Lower the priority to `best` at most, saying why."""
    if ORDER.index(result.priority) < ORDER.index(best):
        result.note = f"{result.priority} in the KB; {best} here: {why}"
        result.priority = best
