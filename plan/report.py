"""Metrics to plan sections: memory term by term, speed, config, warnings."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kbsolve import roles
from kbsolve.dsl.kb import KnowledgeBase, Option
from kbsolve.program.metrics import Metrics, memory_levels
from kbsolve.results.plan import Memory, MemoryBand, MemoryItem, PerGpu, Reason, Speed, Warning_
from kbsolve.program.problem import Problem

GIB = Fraction(2**30)


def plain(value: Any) -> Any:
    """A value as JSON shows it."""
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def gib(value: Fraction) -> float:
    return round(float(value / GIB), 3)


def reason(item, detail: str = "") -> Reason:
    ident = getattr(item, "id", None) or getattr(item, "name", "")
    return Reason(rule=f"{item.framework}.{ident}", because=item.meta.because,
                  source=item.meta.source, location=str(item.meta.span), detail=detail)


def option_key(kb: KnowledgeBase, option: Option) -> str:
    """The framework's own key for an option: its emit into the first output file."""
    files = kb.frameworks[option.framework].files
    main = files[0].name if files else None
    for emit in option.emits:
        if emit.target == main:
            return emit.key
    return option.emits[0].key if option.emits else option.name


def config(problem: Problem, assignment: dict[str, Any],
           applying_only: bool = False) -> dict[str, Any]:
    """Every option's value; with applying_only, only options whose `when` holds (an
    estimate lists no value the framework would not read here)."""
    kb = problem.kb
    return {option_key(kb, o): plain(assignment[o.key]) for o in problem.options
            if not (o.passthrough and assignment.get(o.key) is None)  # given only
            and not (applying_only and o.when is not None
                     and not problem.evaluator.run(o.when, assignment))}


def memory(problem: Problem, metrics: Metrics, assignment: dict[str, Any] | None = None) -> Memory:
    kb = problem.kb
    items = []
    for key, value in list(metrics.memory.items()) + list(metrics.host.items()):
        term = kb.memory[key]
        items.append(MemoryItem(term=term.name, gib=gib(value), level=term.level,
                                location=term.location, rule=key, because=term.meta.because,
                                source=term.meta.source))
    gpu_bytes = Fraction(problem.facts.get("gpu.memory_gib", 0))
    headroom = Fraction(problem.facts.get("query.headroom_pct",
                                          kb.vocabulary.default("query.headroom_pct")), 100)
    return Memory(per_gpu_gib=PerGpu(**{k: gib(v) for k, v in metrics.levels.items()}),
                  budget_gib=gib(problem.budget_bytes), gpu_gib=gib(gpu_bytes),
                  headroom=float(headroom), host_gib=gib(sum(metrics.host.values(), Fraction(0))),
                  fits=metrics.fits, breakdown=items,
                  host_node_gib=gib(sum(metrics.host.values(), Fraction(0))
                                    * problem.facts.get("query.gpus_per_node", 1)),
                  host_budget_gib=None if problem.host_budget_bytes is None else gib(
                      problem.host_budget_bytes * problem.facts.get("query.gpus_per_node", 1)),
                  host_budget_source=problem.host_budget_source or None,
                  host_fits=metrics.host_fits, band=band(problem, metrics, assignment))


def band_key(problem: Problem) -> str | None:
    """The framework's error-band term (the GPU term in role error_band), if it has one."""
    term = roles.term(problem.kb, problem.framework, "error_band")
    return None if term is None or term.location != "gpu" else f"{term.framework}.{term.name}"


def band_measured(problem: Problem) -> bool:
    """The framework's error band is more than the constant 0 (a KB may state a band of 0,
    with the reason it has none)."""
    from kbsolve.dsl.ir import Const
    key = band_key(problem)
    return key is not None and not (isinstance(problem.kb.memory[key].expr, Const)
                                    and not problem.kb.memory[key].expr.value)


def band_bytes(problem: Problem, metrics: Metrics) -> Fraction:
    key = band_key(problem)
    return Fraction(metrics.memory.get(key, 0)) if key else Fraction(0)


def band(problem: Problem, metrics: Metrics,
         assignment: dict[str, Any] | None = None) -> MemoryBand | None:
    """The error band of these metrics: its share of the levels below it, each level
    without it and at its upper end; with the assignment, the band of the run's class
    (the lets the term's branches take) is named, not every class's."""
    key = band_key(problem)
    if key is None:
        return None
    term = problem.kb.memory[key]
    value = band_bytes(problem, metrics)
    order = memory_levels(problem.kb)
    below = order[:order.index(term.level)]
    base = metrics.levels[below[-1]] if below else Fraction(0)
    share = value / base if base else Fraction(0)
    predicted = {level: metrics.levels[level] - (0 if level in below else value)
                 for level in order}
    upper = {level: metrics.levels[level] * (1 + share) if level in below
             else metrics.levels[level] for level in order}
    return MemoryBand(share=round(float(share), 4), gib=gib(value), level=term.level,
                      predicted_gib=PerGpu(**{k: gib(v) for k, v in predicted.items()}),
                      upper_gib=PerGpu(**{k: gib(v) for k, v in upper.items()}),
                      fits_without_band=predicted[order[-1]] <= problem.budget_bytes,
                      rule=key, location=str(term.meta.span),
                      **_band_reason(problem, term, assignment))


def _band_reason(problem: Problem, term, assignment: dict[str, Any] | None) -> dict[str, str]:
    """because and source of a band: the applied class's let first, then the term's own."""
    from kbsolve.program.recipe import lets_taken
    taken = lets_taken(problem, term.expr, assignment) if assignment is not None else []
    parts = [(let.meta.because, let.meta.source) for let in taken] + \
        [(term.meta.because, term.meta.source)]
    return {"because": "; ".join(b for b, _ in parts if b),
            "source": "; ".join(s for _, s in parts if s)}


def speed(problem: Problem, metrics: Metrics, assignment: dict[str, Any]) -> Speed:
    step = metrics.step_time
    main = problem.throughput_work
    result = Speed(step_time_s=round(float(step), 6), step=main.meta.doc if main else "",
                   terms={problem.program.name(k): round(float(v), 6)
                          for k, v in {**metrics.times, **metrics.factors}.items()})
    if step <= 0:
        return result
    flops = Fraction(0)
    for key, value in metrics.work.items():
        term = problem.kb.work[key]
        if term.expr.type.dim == (0, 0, 0):
            rate = round(float(value / step), 3)
            result.throughput[term.name] = rate
            for role in ("tokens", "samples"):  # Speed.tokens_per_s, samples_per_s
                if roles.entity(problem.kb, problem.framework, role) is term:
                    setattr(result, f"{role}_per_s", rate)
        elif term.expr.type.dim == (0, 1, 0):
            flops += value
    peak = problem.kb.frameworks[problem.framework].peak
    if flops and peak is not None:
        peak_value = Fraction(problem.evaluator.run(peak, assignment))
        if peak_value > 0:
            result.mfu = round(float(flops / step / peak_value), 4)
    return result


def warnings(problem: Problem, metrics: Metrics, planned: bool = False) -> list[Warning_]:
    """The warnings that fire; on a plan, those about the planner's own choices
    carry the KB's `accepted` reason."""
    found = []
    for key in metrics.warnings:
        w = problem.kb.warnings[key]
        accepted = None
        if planned and chosen_by_plan(problem, w):
            accepted = w.accepted or None  # none stated: the warning alone, no made-up line
        found.append(Warning_(id=w.id, because=w.meta.because, source=w.meta.source,
                              location=str(w.meta.span), accepted=accepted))
    return found


def chosen_by_plan(problem: Problem, warning) -> set[str]:
    """The options a warning reads that the planner decided (not the user's pins)."""
    from kbsolve.program.evaluate import options_read
    return (options_read(problem.kb, warning.expr) & set(problem.choices)) - \
        (set(problem.pinned) - set(problem.defaulted))


def global_batch(problem: Problem, assignment: dict[str, Any]):
    """The recipe's batch as the plan makes it: value, origin and factors (None
    where the framework declares no batch_geometry)."""
    from kbsolve.dsl import ir
    from kbsolve.results.plan import GlobalBatch
    kb, fw = problem.kb, problem.framework
    geometry, target = roles.let(kb, fw, "batch_geometry"), roles.let(kb, fw, "global_batch")
    if geometry is None or target is None:
        return None
    run = problem.evaluator.run
    factors, stack = [], [geometry.expr]
    while stack:
        node = stack.pop(0)
        if isinstance(node, ir.Op) and node.op == "*":
            stack = list(node.args) + stack
        elif isinstance(node, ir.OptionRef):
            factors.append(f"{plain(run(node, assignment))} {kb.options[node.option].name}")
        elif isinstance(node, ir.LetRef):
            factors.append(f"{plain(run(node, assignment))} {node.let.split('.', 1)[1]}")
        else:
            factors.append(str(plain(run(node, assignment))))
    given = problem.facts.get("query.global_batch", 0)
    if given:
        origin = "--global-batch or your pins"
    else:
        default = roles.let(kb, fw, "default_global_batch")
        origin = "the KB's default" + (f" ({default.meta.span.file}:{default.meta.span.line})"
                                       if default is not None else "") + \
            "; --global-batch changes it"
    return GlobalBatch(value=int(run(target.expr, assignment)),
                       unit=(geometry.meta.doc or "").rstrip(".").split(",")[0], origin=origin,
                       factors=factors)
