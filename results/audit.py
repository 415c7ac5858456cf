"""The audit report, as pydantic models (what `--format json` prints)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Status = Literal["enabled", "not_enabled", "recommended", "not_applicable", "undecided"]


class CheckResult(BaseModel):
    id: str
    category: str
    title_en: str
    title_zh: str
    points: int
    priority: str
    status: Status
    reason: str = ""
    advice_en: str = ""
    advice_zh: str = ""
    changes: dict[str, Any] = Field(default_factory=dict, description="config key -> value")
    evidence: list[str] = Field(default_factory=list)
    source: str = ""
    effect: str = Field("", description="by the estimate on this config: memory, speed")
    note: str = Field("", description="why the priority differs from the KB's")
    tip: bool = Field(False, description="recommended by the KB, but no estimate of this "
                      "config backs it: listed in one line, never written by --fix")


class CategoryScore(BaseModel):
    id: str
    title_en: str
    title_zh: str
    points: int
    score: int
    enabled: list[str] = Field(default_factory=list)
    recommended: list[str] = Field(default_factory=list)


class Finding(BaseModel):
    kind: str  # rule | nokey | alias | wrong_section | value_alias | no_op | warning | odd_value
    id: str
    message: str
    message_zh: str = ""
    because: str = ""
    source: str = ""
    location: str = ""
    fix: dict[str, Any] = Field(default_factory=dict)


class MemoryTerm(BaseModel):
    term: str
    gib: float
    because: str = ""


class Fit(BaseModel):
    status: Literal["fits", "oom", "undecided"] = Field(
        description="fits: device_gib, the error band's upper end where the KB states a band, "
                    "is at most budget_gib")
    device_gib: float | None = None
    predicted_gib: float | None = Field(
        default=None, description="the device figure without the error band (none: no band)")
    band_share: float | None = Field(
        default=None, description="the model's error band as a share of the reserved memory")
    band_because: str = ""
    budget_gib: float | None = None
    over_gib: float | None = None
    largest_term: str = ""
    host_gib: float | None = Field(None, description="CPU RAM per node the host terms need")
    host_budget_gib: float | None = Field(
        None, description="--host-ram after the host headroom; none: host RAM not judged")
    breakdown: list[MemoryTerm] = Field(default_factory=list)
    reason: str = ""
    unknowns: list[str] = Field(
        default_factory=list, description="options written as values the KB lacks: the "
        "verdict held at every value the KB knows, and the figures are the config's best case")


class Change(BaseModel):
    key: str
    old: Any = None
    new: Any = None
    removed: bool = False
    reason: str = ""
    new_file: str = Field("", description="a file this change creates beside the config "
                          "(its name), which `new` names from where the run starts")
    content: str = Field("", description="the new file's text")


class Written(BaseModel):
    """What `--fix` or `fix --write` wrote into one file."""
    keys: list[str]
    backup: str = Field(description="the original's copy, beside the file (.bak, .bak.1, ...)")
    created: list[str] = Field(default_factory=list, description="new files beside it")


class PlanChange(BaseModel):
    key: str
    old: Any = None
    new: Any = None
    reason: str = ""


class BestPlan(BaseModel):
    status: str
    changes: list[PlanChange] = Field(default_factory=list)
    speedup: float | None = Field(None, description="config step time per work / the plan's")
    reason: str = ""


class UnitReport(BaseModel):
    framework: str
    kind: Literal["config", "launch", "code", "keys"]  # keys: only refused keys checked
    path: str
    file_kind: str = Field("", description="the KB's file kind, when one matched")
    files: dict[str, str] = Field(default_factory=dict)
    signs: list[str] = Field(default_factory=list)
    basic: dict[str, Any] = Field(default_factory=dict)
    checks: list[CheckResult] = Field(default_factory=list)
    categories: list[CategoryScore] = Field(default_factory=list)
    score: int = 0
    points: int = 0
    recommendations: dict[str, list[CheckResult]] = Field(default_factory=dict)
    needs_allow: list[CheckResult] = Field(
        default_factory=list, description="recommendations that change the recipe, the "
        "numerics or a library: offered only with --allow (the reason names it)")
    changes: list[Change] = Field(default_factory=list)
    changes_proven: bool = False
    errors: list[Finding] = Field(default_factory=list)
    silent: list[Finding] = Field(default_factory=list)
    unknown_keys: list[str] = Field(default_factory=list)
    fit: Fit | None = None
    plan: BestPlan | None = None
    undecided: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    tips: list[str] = Field(default_factory=list, description="KB advice with no estimate of "
                            "this config behind it (audit.yaml advice_tips): 'ID (why)', shown "
                            "in the one tips line, never a finding, never written by --fix")


class AuditReport(BaseModel):
    path: str
    files: int
    frameworks: dict[str, list[str]] = Field(default_factory=dict, description="signs found")
    allow: list[str] = Field(default_factory=list, description="--allow: optins or groups")
    hardware: str = "unknown"
    hardware_source: str = Field("", description="--gpus or nvidia-smi; empty: per config")
    units: list[UnitReport] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    not_audited: list[str] = Field(
        default_factory=list, description="configs of a kind the KB does not audit (inference, "
        "export, another framework's look-alike): 'path: not audited: kind (why)'")
    not_configs: int = Field(0, description="YAML files read that are no config: skipped")
