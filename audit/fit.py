"""Does the user's config fit the GPU? The memory breakdown by the KB's terms
(the same path as `kbsolve estimate`), and by how much it overflows."""

from __future__ import annotations

from itertools import product
from math import prod

from kbsolve.audit.assess import Context, facts_needed, options_needed
from kbsolve.audit.mapping import plain
from kbsolve.results.audit import Fit, MemoryTerm
from kbsolve.diagnostics import KbError
from kbsolve.dsl.ir import FactRef
from kbsolve.program.metrics import measure
from kbsolve.plan.report import band, gib

UNREAD = ("a value the audit cannot read (one the KB does not model, a refused key or "
          "value, a file that is not there): ")
MAX_COMBINATIONS = 64  # values of the unknown options measured for a verdict that holds for all


def fit_check(ctx: Context):
    """(Fit, metrics or None)."""
    kb = ctx.kb
    terms = kb.of(kb.memory, ctx.framework)
    if not terms:
        return Fit(status="undecided", reason="the KB has no memory model for this framework"), \
            None
    needed, read = set(), set()
    for term in terms:
        needed |= facts_needed(kb, term.expr)
        read |= options_needed(kb, term.expr)
    absent = sorted(p for p in needed if p not in ctx.facts)
    odd = sorted(read & ctx.odd)
    if odd:  # never judged at a default the user did not write
        return (_whatever(ctx, odd) if not absent and "gpu.memory_gib" in ctx.facts else
                Fit(status="undecided", reason=UNREAD +
                    ", ".join(k.split(".", 1)[1] for k in odd))), None
    if absent or "gpu.memory_gib" not in ctx.facts:
        ctx.missing |= set(absent) | ({"gpu.memory_gib"} - ctx.facts.keys())
        return Fit(status="undecided", reason="unknown: " + ", ".join(
            sorted(set(absent) | ({"gpu.memory_gib"} - ctx.facts.keys())))), None
    try:
        problem = ctx.problem()
        metrics = measure(problem, ctx.assignment)
    except KbError as error:
        return Fit(status="undecided", reason=error.diagnostics[0].message), None
    return _fit(ctx, problem, metrics, ctx.assignment), metrics


def _whatever(ctx: Context, odd: list[str]) -> Fit:
    """The verdict when the memory terms read options written as values the KB
    lacks (a refused value, a DeepSpeed file that does not exist): measured at
    every value of the options' domains, it holds when all of them agree (OOM
    whatever the DeepSpeed stage is), with the figures of the value most in the
    config's favour and `unknowns` naming the options; else undecided. A superset
    of what the user could mean only makes agreement harder, so the verdict rests
    on no guess."""
    names = ", ".join(k.split(".", 1)[1] for k in odd)
    undecided = Fit(status="undecided", reason=UNREAD + names)
    kb = ctx.kb
    domains = [kb.options[k].domain for k in odd]
    if any(not d or isinstance(kb.options[k].source_expr, FactRef)
           for k, d in zip(odd, domains)) or prod(len(d) for d in domains) > MAX_COMBINATIONS:
        return undecided
    try:
        problem = ctx.problem()
        trials = []
        for values in product(*domains):
            assignment = ctx.with_changes(dict(zip(odd, values)))
            trials.append((measure(problem, assignment), assignment, values))
    except KbError:
        return undecided
    fits = {m.levels["device"] <= m.budget and m.host_fits for m, _, _ in trials}
    if len(fits) != 1:
        return undecided
    ok = fits.pop()
    best = (max if ok else min)(trials, key=lambda t: t[0].levels["device"])
    fit = _fit(ctx, problem, best[0], best[1])
    at = ", ".join(f"{k.split('.', 1)[1]}={plain(v)}" for k, v in zip(odd, best[2]))
    fit.unknowns = [k.split(".", 1)[1] for k in odd]
    verb = "are" if len(odd) > 1 else "is"
    fit.reason = (f"{'fits' if ok else 'OOM'} whatever {names} {verb} (a value the audit "
                  f"cannot read; every value the KB knows was measured): figures at the "
                  f"{'most' if ok else 'least'} memory, {at}")
    return fit


def _fit(ctx: Context, problem, metrics, assignment) -> Fit:
    kb = ctx.kb
    breakdown = sorted((MemoryTerm(term=k.split(".", 1)[1], gib=gib(v),
                                   because=kb.memory[k].meta.because)
                        for k, v in metrics.memory.items() if v), key=lambda t: -t.gib)
    device, budget = metrics.levels["device"], metrics.budget  # with the band: its upper end
    over = device - budget
    stated = band(problem, metrics, assignment)  # the class's let too: its measured coverage
    host = sum(metrics.host.values(), 0) * ctx.facts.get("query.gpus_per_node", 1)
    host_budget = None if problem.host_budget_bytes is None else \
        problem.host_budget_bytes * ctx.facts.get("query.gpus_per_node", 1)
    return Fit(status="fits" if over <= 0 and metrics.host_fits else "oom",
               host_gib=gib(host) if metrics.host else None,
               host_budget_gib=gib(host_budget) if host_budget is not None else None, device_gib=gib(device),
               budget_gib=gib(budget), over_gib=gib(over) if over > 0 else None,
               largest_term=next((t.term for t in breakdown
                                  if stated is None or t.term != stated.rule.split(".", 1)[1]),
                                 ""),
               breakdown=breakdown,
               predicted_gib=stated.predicted_gib.device if stated else None,
               band_share=stated.share if stated else None,
               band_because=stated.because if stated else "")
