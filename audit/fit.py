"""Does the user's config fit the GPU? The memory breakdown by the KB's terms
(the same path as `kbsolve estimate`), and by how much it overflows."""

from __future__ import annotations

from kbsolve.audit.assess import Context, facts_needed, options_needed
from kbsolve.audit.model import Fit, MemoryTerm
from kbsolve.diagnostics import KbError
from kbsolve.dsl.ir import facts_used, options_used
from kbsolve.program.metrics import measure
from kbsolve.solver.report import band, gib


def fit_check(ctx: Context):
    """(Fit, metrics or None)."""
    kb = ctx.kb
    terms = kb.of(kb.memory, ctx.framework)
    if not terms:
        return Fit(status="undecided", reason="the KB has no memory model for this framework"), \
            None
    needed, read = set(), set()
    for term in terms:
        needed |= facts_used(term.expr) | facts_needed(kb, term.expr)
        read |= options_used(term.expr) | options_needed(kb, term.expr)
    odd = sorted(k.split(".", 1)[1] for k in read & ctx.odd)
    if odd:  # never judged at a default the user did not write
        return Fit(status="undecided", reason="a value the KB does not model: " +
                   ", ".join(odd)), None
    absent = sorted(p for p in needed if p not in ctx.facts)
    if absent or "gpu.memory_gib" not in ctx.facts:
        ctx.missing |= set(absent) | ({"gpu.memory_gib"} - ctx.facts.keys())
        return Fit(status="undecided", reason="unknown: " + ", ".join(
            sorted(set(absent) | ({"gpu.memory_gib"} - ctx.facts.keys())))), None
    try:
        problem = ctx.problem()
        metrics = measure(problem, ctx.assignment)
    except KbError as error:
        return Fit(status="undecided", reason=error.diagnostics[0].message), None
    breakdown = sorted((MemoryTerm(term=k.split(".", 1)[1], gib=gib(v),
                                   because=kb.memory[k].meta.because)
                        for k, v in metrics.memory.items() if v), key=lambda t: -t.gib)
    device, budget = metrics.levels["device"], metrics.budget  # with the band: its upper end
    over = device - budget
    stated = band(problem, metrics, ctx.assignment)  # the class's let too: its measured coverage
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
               band_because=stated.because if stated else ""), metrics
