"""The solver's best plan for the config's hardware, model and task: the
options it would change, each with its reason, and the predicted speed-up."""

from __future__ import annotations

from fractions import Fraction

from kbsolve.audit.assess import Context, needs
from kbsolve.audit.judge import shown_change
from kbsolve.results.audit import BestPlan, PlanChange
from kbsolve.diagnostics import KbError
from kbsolve.program.metrics import measure
from kbsolve.program.problem import build_problem
from kbsolve.program.query import Query
from kbsolve.plan.run import plan


def plan_query(hardware, flags, model, model_source: str) -> dict:
    """The query fields the audit's inputs give the planner: the GPUs (--gpu-spec's
    card by the spec), the model as found (its catalog name, config.json or
    --model), --host-ram; {} when the GPU or the model is unknown."""
    if hardware.gpu is None or hardware.count is None or model is None:
        return {}
    fields: dict = {"host_ram": flags.host_ram} if flags.host_ram is not None else {}
    if flags.gpu_spec is not None:
        prefix = f"{hardware.nodes}x" if hardware.nodes > 1 else ""
        fields.update(gpus=f"{prefix}{hardware.per_node}", gpu_spec=flags.gpu_spec)
    else:
        fields["gpus"] = hardware.spec
    fields["model"] = flags.model if model_source == "--model" else \
        model.name if model_source == "catalog" else model_source
    return fields


def best_plan(ctx: Context, query: dict, timeout: float | None = None) -> BestPlan:
    """`query`: plan_query's fields."""
    if not query:
        return BestPlan(status="undecided", reason="needs the GPU type and the model")
    fw = ctx.kb.frameworks[ctx.framework]
    task = ctx.assignment.get(f"{ctx.framework}.{fw.task_option}") if fw.task_option else None
    fields = dict(query, framework=ctx.framework,
                  task=str(task) if task is not None else None, timeout=timeout, top=0)
    fields.update(_recipe(ctx))
    try:
        result = plan(ctx.kb, Query(**fields))
    except KbError as error:
        return BestPlan(status="undecided", reason=error.diagnostics[0].message)
    if result.status not in ("optimal", "feasible"):
        return BestPlan(status=result.status, reason="no config satisfies the rules and fits")
    chosen = {}
    out = BestPlan(status=result.status)
    for choice in result.explanation:
        key = f"{ctx.framework}.{choice.option}"
        option = ctx.kb.options.get(key)
        if option is None or option.is_free or choice.kind in ("default", "pinned", "fact"):
            continue  # a minimal diff: only what the solver chose for a reason
        value = _as_option_value(choice.value)
        if value == ctx.assignment.get(key):
            continue
        chosen[key] = value
        shown_key, shown_new = shown_change(ctx.kb, option, value)
        _, shown_old = shown_change(ctx.kb, option, ctx.assignment.get(key))
        reason = next((r.because or r.detail for r in choice.reasons if r.because or r.detail),
                      choice.kind)
        out.changes.append(PlanChange(key=shown_key, old=shown_old, new=shown_new,
                                      reason=f"{choice.kind}: {reason}"))
    try:
        problem = build_problem(ctx.kb, ctx.framework, ctx.facts, {})
        mine = measure(problem, ctx.assignment).time_per_work
        theirs = measure(problem, ctx.with_changes(chosen)).time_per_work
        out.speedup = round(float(mine / theirs), 3) if theirs else None
    except KbError:
        pass
    return out


def _recipe(ctx: Context) -> dict:
    """What the plan keeps of the config: the options the KB's optins read that
    the config sets (pinned: the user's method, rank, precision, optimizer), the
    config's global batch, and what --allow allows."""
    from kbsolve.audit.consent import optins
    from kbsolve.audit.mapping import plain
    read: set[str] = set()
    for optin in optins(ctx.kb, ctx.framework):
        read |= needs(ctx.kb, optin.expr)[1]
    pins = []
    for key in sorted(read & ctx.user.keys()):
        value = plain(ctx.user[key])
        pins.append(f"{key.split('.', 1)[1]}="
                    f"{str(value).lower() if isinstance(value, bool) else value}")
    out: dict = {"set": pins} if pins else {}
    out.update(_shape(ctx))
    batch = ctx.facts.get("query.global_batch")
    if batch and Query.model_fields.get("global_batch") is not None:
        out["global_batch"] = int(batch)
    if ctx.allowed and Query.model_fields.get("allow") is not None:
        out["allow"] = sorted(k.split(".", 1)[1] for k in ctx.allowed)
    return out


def _shape(ctx: Context) -> dict:
    """The config's training shape as the query's flags (cutoff_len 20480 is
    --seq-len 20480), so that the plan solves the config's own problem."""
    from kbsolve.audit.assess import fact_options
    bound = fact_options(ctx.kb, ctx.framework, ctx.user)  # facts the config's options give
    facts = {path: value for path, value in ctx.facts.items() if path in bound}
    out = {name: int(facts[f"query.{name}"]) for name in ("seq_len", "frames")
           if f"query.{name}" in facts and name in Query.model_fields}
    if "query.height" in facts and "query.width" in facts:
        out["resolution"] = f"{int(facts['query.height'])}x{int(facts['query.width'])}"
    return out


def _as_option_value(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return Fraction(str(value))
