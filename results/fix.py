"""What `kbsolve fix` answers (its `--format json`), as pydantic models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kbsolve.results.audit import Fit


class Suggested(BaseModel):
    changes: dict[str, Any] = Field(description="config key -> new value")
    device_gib: float
    budget_gib: float
    speed_delta_pct: float
    saved_gib: float = Field(0.0, description="peak device memory saved; + is less")
    reasons: list[str]
    fits: bool = Field(True, description="the config fits after it (oom: it cures the OOM)")


class NeedsAllow(BaseModel):
    """A cure withheld because it changes what the user did not allow."""
    changes: dict[str, Any] = Field(description="config key -> new value")
    allow: str = Field(description="the optins (group) that --allow would name")
    effect: str


class FixResult(BaseModel):
    config: str
    symptom: str
    framework: str
    before: Fit
    suggestions: list[Suggested] = Field(default_factory=list)
    needs_allow: list[NeedsAllow] = Field(default_factory=list)
    written: list[str] = Field(default_factory=list)
    backup: str = Field("", description="the original's copy (.bak, .bak.1, ...)")
    created: list[str] = Field(default_factory=list, description="new files beside it")
    manual: list[str] = Field(default_factory=list, description="changes outside the config")
    after: Fit | None = None
    errors_after: list[str] = Field(default_factory=list)
