"""The `explain` tool: why a plan chose an option's value, and what each other
value of the option costs with everything else as planned (one estimate per
value, by the same model the plan used)."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, Field

from kbsolve import api
from kbsolve.diagnostics import did_you_mean
from kbsolve.render import render
from kbsolve.results.plan import Alternative, Kind, Reason, Status

MOST_VALUES = 12  # values costed per option, nearest the plan's first


class ValueCost(BaseModel):
    value: Any
    feasible: bool = Field(description="every hard rule holds and the memory fits")
    fits: bool = Field(description="the memory fits (at the error band's upper end)")
    device_gib: float = Field(description="memory per GPU (device level, band included)")
    memory_delta_gib: float = Field(description="device_gib minus the plan's")
    slower_pct: float = Field(description="time per unit of work against the plan's, in %; "
                                          "negative is faster")
    broken: list[str] = Field(default_factory=list, description="the rules it breaks")


class OptionExplanation(BaseModel):
    status: Status = Field(description="the plan's status")
    option: str
    key: str = Field(description="the framework's real key")
    value: Any
    kind: Kind
    reasons: list[Reason]
    alternatives: list[ValueCost] = Field(default_factory=list, description="each other "
                                          "value of the option's domain, the rest as planned")
    runner_ups: list[Alternative] = Field(default_factory=list, description="the plan's "
                                          "alternatives that change this option")
    text: str = Field(description="the CLI's `--explain OPTION` text")


def explain(kb, query: dict[str, Any], option: str, plan=None) -> OptionExplanation:
    plan = plan or api.solve(query, kb)
    choices = {c.option: c for c in plan.explanation} | {c.key: c for c in plan.explanation}
    if option not in choices:
        raise api.KbError(api.Diagnostic(
            f"explain: no option '{option}' in this plan"
            f"{did_you_mean(option, [c.option for c in plan.explanation])}"))
    choice = choices[option]
    return OptionExplanation(
        status=plan.status, option=choice.option, key=choice.key, value=choice.value,
        kind=choice.kind, reasons=choice.reasons,
        alternatives=_costs(kb, query, plan, choice) if plan.memory else [],
        runner_ups=[a for a in plan.alternatives if choice.option in a.changes],
        text=render(plan, "explain", option=option))


def _costs(kb, query: dict[str, Any], plan, choice) -> list[ValueCost]:
    spec = kb.options.get(f"{plan.framework}.{choice.option}")
    if spec is None or spec.domain is None:
        return []
    others = [_plain(v) for v in spec.domain if _plain(v) != choice.value]
    others.sort(key=lambda v: _distance(v, choice.value))
    pinned = {c.option: _setting(c.value) for c in plan.explanation if c.value is not None}
    base = dict(query, set=[])
    costs = []
    for value in others[:MOST_VALUES]:
        try:
            estimate = api.estimate(base, pinned | {choice.option: _setting(value)}, kb)
        except api.KbError:  # a value the query's own checks refuse
            continue
        costs.append(ValueCost(
            value=value, feasible=estimate.feasible, fits=estimate.memory.fits,
            device_gib=estimate.memory.per_gpu_gib.device,
            memory_delta_gib=round(estimate.memory.per_gpu_gib.device
                                   - plan.memory.per_gpu_gib.device, 3),
            slower_pct=round((_time_per_work(estimate.speed) / _time_per_work(plan.speed) - 1)
                             * 100, 2),
            broken=[reason.rule for reason in estimate.broken]))
    return sorted(costs, key=lambda c: (not c.feasible, c.slower_pct, c.device_gib))


def _time_per_work(speed) -> float:
    for rate in (speed.tokens_per_s, speed.samples_per_s):
        if rate:
            return 1 / rate
    return speed.step_time_s or 1.0


def _plain(value: Any) -> Any:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


def _setting(value: Any) -> str:
    """A value as `--set` takes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(_plain(value))


def _distance(value: Any, chosen: Any) -> float:
    if isinstance(value, (int, float)) and isinstance(chosen, (int, float)) \
            and not isinstance(value, bool):
        return abs(value - chosen)
    return 0.0
