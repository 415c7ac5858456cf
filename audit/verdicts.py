"""The checklist's recommendations judged by the same verdicts as plans: the
KB's rules, its optins (what needs the user's consent) and the estimate of
this config on this hardware (audit/effects.py).

A recommended item keeps the KB's priority only when the estimate shows that
it helps here: when the config fits, it must make the run faster and still fit
(memory it frees is not needed); when it does not fit, it must not add memory.
An item that needs consent (`--allow`), changes the task, or would not fit is
not recommended; one the estimate shows no gain for, or that only costs, is
P2 at most (worth trying, needs testing, never written by --fix); one that
makes a KB warning fire is P1 at most (P0 is 'no risk'). Items whose options
no memory or speed term reads keep the KB's verdict: the estimate is silent."""

from __future__ import annotations

from kbsolve.audit.assess import Context
from kbsolve.audit.consent import describe, needing_consent
from kbsolve.audit.effects import Effect, Estimator
from kbsolve.audit.model import CheckResult
from kbsolve.solver.report import gib

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
            continue
        _judge(result, est, est.effect(changes))
    return withheld


def _judge(result: CheckResult, est: Estimator, e: Effect) -> None:
    result.effect = e.summary()
    warned = [est.ctx.kb.warnings[w].meta.because for w in e.warnings
              if w in est.ctx.kb.warnings]
    if e.broken:
        _refuse(result, f"turning it on breaks rule {e.broken[0].split('.', 1)[1]}")
        return
    if est.base_fits:
        if not e.fits:
            _refuse(result, f"the config fits, and with it it would not "
                            f"({gib(e.peak)} GiB of {gib(e.metrics.budget)} GiB)")
        elif e.faster:
            _cap(result, "P1" if warned else "P0", f"risk: {warned[0]}" if warned else "")
        elif e.lowers_memory:
            cost = f" and costs {-e.speed_pct}% speed" if e.slower else ""
            _refuse(result, f"the config fits: it would free {gib(e.saved)} GiB that the run "
                            f"does not need{cost}")
        elif warned:
            _refuse(result, f"no gain on this config by the estimate, and {warned[0]}")
        else:
            _cap(result, "P2", _costs(e) or "the estimate shows no gain on this config")
        return
    if e.raises_memory:
        _refuse(result, f"the config does not fit, and it adds {-gib(e.saved)} GiB")
    elif e.lowers_memory or e.faster:
        _cap(result, "P1" if warned else "P0", f"risk: {warned[0]}" if warned else "")
    elif warned:
        _refuse(result, f"no gain on this config by the estimate, and {warned[0]}")
    else:
        _cap(result, "P2", "the estimate shows no gain on this config")


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
