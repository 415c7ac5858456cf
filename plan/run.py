"""Query in, Plan out: solve, explain, and on failure find the core and fixes."""

from __future__ import annotations

import math
from fractions import Fraction

from kbsolve import collector, roles
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.plan import report
from kbsolve.plan.alternatives import DECIDING_KINDS, runner_ups
from kbsolve.solver.enumerate import enumerate_best
from kbsolve.plan.explain import Unexplained, explain, refused_on_memory
from kbsolve.program.facts import parse_gpus
from kbsolve.program.metrics import full_assignment, measure
from kbsolve.program.recipe import settle
from kbsolve.solver.guard import deadline
from kbsolve.solver.optimize import Outcome, solve
from kbsolve.program.consent import consent_detail
from kbsolve.results.plan import Alternative, Estimate, Fix, Plan, Reason
from kbsolve.program.query import Query, Resolved, resolve, route_pins


def plan(kb: KnowledgeBase, query: Query, solver: str = "z3") -> Plan:
    """The collector is paused for the whole plan, not per search (collector.py): each
    resume after a search set off a collection that walked the plan's young objects and
    freed nothing (about 400 collections, 7 % of the warm grid's CPU, before)."""
    with collector.paused():
        return _plan(kb, query, solver)


def _plan(kb: KnowledgeBase, query: Query, solver: str) -> Plan:
    until = deadline(query.timeout)
    resolved = resolve(kb, query)
    problem = resolved.problem
    if solver == "enumerate":
        outcome = enumerate_best(problem)
        outcome.model = None
    else:
        outcome = solve(problem, until)
    result = Plan(status="timed_out" if outcome.timed_out else outcome.status,
                  framework=problem.framework,
                  query=query.model_dump(), gpu=resolved.gpu.name, model=resolved.model.name,
                  notes=resolved.notes, timed_out=outcome.timed_out,
                  model_facts=model_facts(problem, resolved.model))
    if outcome.status == "infeasible":
        try:
            _refused(kb, resolved, outcome, result)
        finally:
            _let_go(problem, outcome.model)
        return result
    if outcome.timed_out:
        result.notes.append(f"the --timeout of {query.timeout:g} s ran out: " + (
            "the best plan found so far, not proven optimal, and not explained"
            if outcome.metrics is not None else "no plan was found before it"))
    if outcome.metrics is None:
        return result
    assignment = settle(problem, full_assignment(problem, outcome.chosen))
    _fill(result, problem, assignment, outcome.metrics)
    if outcome.status == "optimal":  # a time-out explains nothing
        met: list = []  # the feasible plans the explanations measured
        try:
            result.explanation = explain(problem, outcome.model, assignment, outcome.metrics,
                                         outcome.search, met, until)
        except Unexplained:
            result.status, result.timed_out = "timed_out", True
            result.notes.append(f"the plan is proven optimal, but the --timeout of "
                                f"{query.timeout:g} s ran out while explaining it: no "
                                f"explanations or alternatives are shown")
            return result
        result.alternatives = _alternatives(problem, outcome, query, result.explanation, met)
    return result


def _refused(kb: KnowledgeBase, resolved: Resolved, outcome: Outcome, result: Plan) -> None:
    """A refusal's core and, where Z3 was asked, its fixes."""
    problem = resolved.problem
    result.core = _core(problem, outcome.core)
    if outcome.model is not None:
        from kbsolve.solver.fixes import allow_optins, drop_pins, hardware  # Z3: refusals
        result.fixes = drop_pins(outcome.model) + \
            allow_optins(outcome.model, outcome.core) + \
            _global_batch_fix(kb, resolved, outcome.core) + \
            _host_ram_fix(problem, outcome.core) + hardware(_bigger(kb, resolved))


def _let_go(problem, model) -> None:
    """A refusal's Z3 model (prove.release) and the set-up its search left in the
    problem for the copies (Search.offer_setup: the least-memory and host-RAM
    questions, both asked by now) go with the plan, freed by reference counting.
    Each is a cycle (the model and its CoreFinder; the problem, its kept tables and
    the problem), which the cyclic collector found among the plan's garbage at the
    plan's end: 40-80k objects, 70-190 ms a refusal."""
    if model is not None:
        from kbsolve.solver.prove import release
        release(model)
    from kbsolve.solver.search import Search
    Search.withdraw_setups(problem)


def _fill(result, problem, assignment, metrics) -> None:
    result.config = report.config(problem, assignment)
    result.memory = report.memory(problem, metrics, assignment)
    result.speed = report.speed(problem, metrics, assignment)
    result.warnings = report.warnings(problem, metrics, planned=True)
    result.launch = _launch(problem, assignment)
    result.global_batch = report.global_batch(problem, assignment)


def model_facts(problem, model) -> dict:
    """The model's vocabulary fields that apply to its kind (numbers, flags, enums) and
    the KB's parameter counts: the lets in roles params and active_params where they apply."""
    from kbsolve.diagnostics import KbError
    from kbsolve.dsl import ir
    facts = {}
    for field in problem.kb.vocabulary.group("model"):
        applies = field.when is None or field.when.holds(getattr(model, field.when.field, None))
        value = getattr(model, field.name, None)
        if applies and field.fact_type not in (None, "str") and value is not None:
            facts[field.name] = value
    for name in ("params", "active_params"):  # roles (kb/core/roles.kb)
        let = roles.let(problem.kb, None, name)
        if let is None:
            continue
        try:
            value = problem.evaluator.run(ir.LetRef(let.key, let.type), {})
        except (KbError, KeyError, ZeroDivisionError, TypeError):
            continue  # the let reads a fact this kind of model has none of
        facts[name] = round(value)  # parameter counts: whole numbers
    return facts


def _launch(problem, assignment) -> str:
    from kbsolve.plan.emit import fill_launch
    framework = problem.kb.frameworks[problem.framework]
    for launch in framework.launches:
        if launch.condition is None or problem.evaluator.run(launch.condition, assignment):
            return fill_launch(problem.kb, framework, launch.command)
    return ""


def _core(problem, core: list[str]) -> list[Reason]:
    reasons = []
    for part in core:
        kind, _, name = part.partition(":")
        if kind == "rule":
            reasons.append(report.reason(problem.rule(name), detail=consent_detail(
                problem.kb, problem.framework, name)))
        elif kind == "pin":
            option = problem.kb.options[name]
            reasons.append(Reason(rule=f"pin:{option.name}", detail=problem.pin_detail(name)))
        elif kind == "when":
            option = problem.kb.options[name]
            reasons.append(Reason(rule=f"when:{option.name}", location=str(option.meta.span),
                                  detail=f"{option.name} only applies in some configs"))
        elif kind == "memory" and name == "host_fit":
            per_node = problem.facts.get("query.gpus_per_node", 1)
            gib = report.gib(problem.host_budget_bytes * per_node)
            given = problem.host_budget_source
            reasons.append(Reason(rule="memory:host_fit", detail=f"the CPU RAM per node must "
                                                                 f"fit {gib} GiB ({given})"))
        else:
            gib = report.gib(problem.budget_bytes)
            reasons += refused_on_memory(problem, f"the memory per GPU must fit {gib} GiB "
                                                  f"(GPU minus headroom)")
    return reasons


GLOBAL_BATCH_TRIES = 4  # multiples of the GPU count tried for a default batch too small


def _global_batch_fix(kb: KnowledgeBase, resolved: Resolved, core: list[str]) -> list[Fix]:
    """When the framework's default global batch is in the core (smaller than the
    data-parallel ranks can split): the smallest multiple of the GPU count that
    gives a plan, as a recipe change the user passes with --global-batch."""
    from kbsolve.dsl import ir
    from kbsolve.program.evaluate import facts_read
    from kbsolve.solver.fixes import _feasible
    problem, query = resolved.problem, resolved.query
    target = roles.let(kb, problem.framework, "global_batch")
    rules = [problem.rule(part[5:]) for part in core if part.startswith("rule:")]
    if query.global_batch is not None or target is None or not any(
            "query.global_batch" in facts_read(kb, r.constraint) for r in rules):
        return []
    assignment = {**{o.key: o.default for o in problem.options}, **problem.fixed,
                  **problem.pinned}
    default = int(problem.evaluator.run(ir.LetRef(target.key, target.type), assignment))
    gpus = int(problem.facts["query.num_gpus"])
    for size in [gpus * k for k in range(1, GLOBAL_BATCH_TRIES + 1) if gpus * k > default]:
        try:
            candidate = resolve(kb, query.model_copy(update={"global_batch": size})).problem
        except Exception:  # a size the batch rules refuse outright is skipped
            continue
        if _feasible(candidate):
            return [Fix(kind="global_batch", global_batch=size, description=(
                f"pass --global-batch {size}: a recipe change (the default global batch "
                f"{default} is smaller than {gpus} GPUs can split; {size} is the smallest "
                f"multiple of the GPU count that fits; scale the learning rate with it)"))]
    return []


def _host_ram_fix(problem, core: list[str]) -> list[Fix]:
    """When host RAM is in the core: the RAM per node the best plan without that
    limit needs, as `--host-ram`."""
    if "memory:host_fit" not in core:
        return []
    import copy
    unlimited = copy.copy(problem)
    unlimited.host_budget_bytes = None
    found = solve(unlimited)
    if found.metrics is None or found.status == "infeasible":
        return []
    per_node = problem.facts.get("query.gpus_per_node", 1)
    need = sum(found.metrics.host.values()) * per_node
    keep = 1 - Fraction(problem.kb.vocabulary.default("query.host_headroom_pct"), 100)
    gib = float(math.ceil(need / keep / 2**30))
    return [Fix(kind="host_ram", host_ram_gib=gib,
                description=f"pass --host-ram {gib:g} if the node has that much CPU RAM "
                            f"(the best plan offloads {report.gib(need)} GiB per node, and "
                            f"{float((1 - keep) * 100):g}% of the RAM stays free)")]


def _bigger(kb: KnowledgeBase, resolved: Resolved):
    """Hardware to try, cheapest first: more of the same GPU, then bigger GPUs."""
    query = resolved.query
    nodes, per_node, _ = parse_gpus(query.gpus)
    total = nodes * per_node
    candidates = []  # the shapes and limits: kb/core/roles.kb (none declared: no fix)
    most, per, kinds = (max(roles.values(kb, r), default=0) for r in (
        "hardware_fix_max_gpus", "hardware_fix_gpus_per_node", "hardware_fix_bigger_gpus"))
    for count in (k * total for k in roles.values(kb, "hardware_fix_multiples")):
        if count <= most:
            shape = f"{count // per}x{per}x{resolved.gpu.name}" if count > per else \
                f"{count}x{resolved.gpu.name}"
            candidates.append(shape)
    bigger = sorted((g for g in kb.catalog.gpus.values()
                     if g.memory_gib > resolved.gpu.memory_gib and g.vendor == resolved.gpu.vendor),
                    key=lambda g: g.memory_gib)
    same = len(candidates)
    candidates += [f"{nodes}x{per_node}x{g.name}" if nodes > 1 else f"{per_node}x{g.name}"
                   for g in bigger[:kinds]]
    # a catalog card replaces the --gpu-spec; more of the same card keeps it
    return [(c, lambda c=c, i=i: resolve(kb, query.model_copy(update={
        "gpus": c, **({} if i < same else {"gpu_spec": None})})).problem)
        for i, c in enumerate(candidates)]


def _alternatives(problem, outcome: Outcome, query: Query, explanations,
                  met: list) -> list[Alternative]:
    """The next best plans near the optimum (see plan/alternatives.py)."""
    deciding = [option.key for option, choice in zip(problem.options, explanations)
                if choice.kind in DECIDING_KINDS]
    best = outcome.metrics
    found = []
    for changes, other in runner_ups(best, met, deciding, query.top):
        slower = float((other.time_per_work / best.time_per_work - 1) * 100) \
            if best.time_per_work else 0.0
        found.append(Alternative(
            changes={problem.program.name(k): report.plain(v)
                     for k, v in sorted(changes.items())},
            speed_delta_pct=round(slower, 2),
            memory_delta_gib=report.gib(other.levels["device"] - best.levels["device"])))
    return found


def estimate(kb: KnowledgeBase, query: Query, settings: dict[str, str]) -> Estimate:
    """One configuration, no optimisation: unset options take their defaults. Its
    global batch is the one the configuration makes, unless --global-batch says."""
    resolved = resolve(kb, query, consent=False)
    texts = [f"{k}={v}" for k, v in settings.items()]
    _, kept = route_pins(kb, resolved.framework, query, texts)
    if len(kept) < len(texts):  # settings bound to query facts set them, as --set does
        query = query.model_copy(update={"set": query.set + [t for t in texts
                                                             if t not in kept]})
        settings = dict(t.split("=", 1) for t in kept)
        resolved = resolve(kb, query, consent=False)
    if query.global_batch is None:
        from kbsolve.program.problem import parse_pin
        from kbsolve.program.batch import geometry_of
        config = dict(parse_pin(kb, resolved.framework, f"{k}={v}") for k, v in settings.items())
        made = geometry_of(kb, resolved.framework, resolved.problem.facts, config)
        if made is not None and made == int(made):
            resolved = resolve(kb, query.model_copy(update={"global_batch": int(made)}),
                               consent=False)
    problem = resolved.problem
    from kbsolve.program.problem import parse_pin, unset_values
    assignment = {**problem.fixed, **unset_values(problem), **problem.pinned}
    given = dict(parse_pin(kb, problem.framework, f"{k}={v}") for k, v in settings.items())
    assignment = {**settle(problem, {**assignment, **given}), **given}  # a setting wins its `from`
    metrics = measure(problem, assignment)
    broken = [report.reason(problem.rule(k)) for k in metrics.broken]
    return Estimate(framework=problem.framework, query=query.model_dump(),
                    gpu=resolved.gpu.name, model=resolved.model.name,
                    model_facts=model_facts(problem, resolved.model),
                    config=report.config(problem, assignment, applying_only=True),
                    feasible=metrics.feasible, broken=broken, notes=resolved.notes,
                    memory=report.memory(problem, metrics, assignment),
                    speed=report.speed(problem, metrics, assignment),
                    warnings=report.warnings(problem, metrics))


__all__ = ["plan", "estimate", "Query"]
