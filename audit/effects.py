"""What a change does to the user's config, by the estimate (the reference
evaluator over the KB's memory, speed and work terms, program/metrics.py):
peak device memory, time per unit of work, fit, the rules and warnings it
breaks or fires, and the consent it needs. `fix --symptom` and the audit's
priorities both read these effects, so the two never disagree."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.audit.assess import Context, needs
from kbsolve.audit.consent import needing_consent
from kbsolve.diagnostics import KbError
from kbsolve.program.metrics import Metrics, measure, memory_levels
from kbsolve.plan.report import band_key, gib

VISIBLE_BYTES = Fraction(2**20)  # a change under 1 MiB is not a change the report shows
VISIBLE_TIME = Fraction(1, 2000)  # nor one under 0.05 % of the step


@dataclass
class Effect:
    changes: dict[str, Any]  # option key -> value
    metrics: Metrics
    base: Metrics
    peak: Fraction  # device memory at the KB's top memory level, after, at the base's band share
    base_peak: Fraction
    device: Fraction = Fraction(0)  # the same, at the band of the config after (what fits reads)
    broken: list[str] = field(default_factory=list)  # rules it breaks, or leaves broken
    warnings: list[str] = field(default_factory=list)  # warnings it makes fire
    consent: list = field(default_factory=list)  # the OptIns it needs, not allowed
    task_changed: bool = False  # it changes the framework's task option

    @property
    def saved(self) -> Fraction:
        """Bytes of peak device memory saved (negative: more memory), both sides at the
        base config's error-band share: a change that moves the config to another band
        class (quantization on or off, LoRA or full) changes the uncertainty, not the
        memory the run uses."""
        return self.base_peak - self.peak

    @property
    def lowers_memory(self) -> bool:
        return self.saved >= VISIBLE_BYTES

    @property
    def raises_memory(self) -> bool:
        return -self.saved >= VISIBLE_BYTES

    @property
    def speed_ratio(self) -> Fraction:
        """Base time per work over the new one: above 1 is faster."""
        mine = self.metrics.time_per_work
        return self.base.time_per_work / mine if mine else Fraction(1)

    @property
    def faster(self) -> bool:
        return self.speed_ratio - 1 >= VISIBLE_TIME

    @property
    def slower(self) -> bool:
        return 1 - self.speed_ratio >= VISIBLE_TIME

    @property
    def speed_pct(self) -> float:
        return round(float((self.speed_ratio - 1) * 100), 1)

    @property
    def fits(self) -> bool:
        return self.metrics.fits and self.metrics.host_fits

    @property
    def allowed(self) -> bool:
        """The change keeps the rules, the recipe and the numerics (or the user
        allowed what it changes) and the task."""
        return not self.broken and not self.consent and not self.task_changed \
            and not self.metrics.irrelevant_changed

    def summary(self) -> str:
        """'-2.318 GiB, +21.6% speed' (what the report shows beside an item)."""
        return f"{(-gib(self.saved)) + 0.0:+} GiB, {self.speed_pct + 0.0:+}% speed"


class Estimator:
    """The estimate of one config and of changes to it; None from `for_context`
    when a fact it needs (the GPU, the model) is unknown."""

    def __init__(self, ctx: Context, allowed: frozenset[str]):
        self.ctx = ctx
        self.allowed = allowed
        self.problem = ctx.problem()
        self.top = memory_levels(ctx.kb)[-1]
        self.base = measure(self.problem, ctx.assignment)
        self.band_key = band_key(self.problem)
        self.band_below = self._below()
        base_below = self.base.levels[self.band_below] if self.band_below else Fraction(0)
        self.band_share = (Fraction(self.base.memory.get(self.band_key, 0)) / base_below
                           if self.band_key and base_below else Fraction(0))
        fw = ctx.kb.frameworks[ctx.framework]
        self.task = f"{ctx.framework}.{fw.task_option}" if fw.task_option else ""
        self._cache: dict[tuple, Effect] = {}

    @classmethod
    def for_context(cls, ctx: Context, allowed: frozenset[str]) -> "Estimator | None":
        try:
            return cls(ctx, allowed)
        except KbError:
            return None

    @property
    def base_peak(self) -> Fraction:
        return self.base.levels[self.top]

    @property
    def base_fits(self) -> bool:
        return self.base.fits and self.base.host_fits

    def effect(self, changes: dict[str, Any]) -> Effect:
        slot = tuple(sorted((k, str(v)) for k, v in changes.items()))
        if slot not in self._cache:
            self._cache[slot] = self._effect(changes)
        return self._cache[slot]

    def _below(self) -> str | None:
        """The memory level the error band is a share of (the one below its own)."""
        if self.band_key is None:
            return None
        order = memory_levels(self.ctx.kb)
        below = order[:order.index(self.ctx.kb.memory[self.band_key].level)]
        return below[-1] if below else None

    def at_base_band(self, metrics: Metrics) -> Fraction:
        """Device memory of `metrics` with the error band at the base config's share: the
        prediction compared with the base's like for like (the same for a change that
        keeps the band's class)."""
        device = metrics.levels[self.top]
        if not self.band_key or not self.band_below:
            return device
        return device - Fraction(metrics.memory.get(self.band_key, 0)) + \
            self.band_share * metrics.levels[self.band_below]

    def _effect(self, changes: dict[str, Any]) -> Effect:
        metrics = measure(self.problem, self.ctx.with_changes(changes))
        before_broken, before_warned = set(self.base.broken), set(self.base.warnings)
        return Effect(
            changes=dict(changes), metrics=metrics, base=self.base,
            peak=self.at_base_band(metrics), base_peak=self.base_peak,
            device=metrics.levels[self.top],
            broken=[r for r in metrics.broken if r not in before_broken
                    or self._reads(r) & changes.keys()],
            warnings=[w for w in metrics.warnings if w not in before_warned],
            consent=needing_consent(self.ctx, changes, self.allowed),
            task_changed=bool(self.task) and self.task in changes)

    def _reads(self, rule_key: str) -> set[str]:
        """The options a rule reads (a rule the config already breaks stays a fault
        of any change to those options: a cure may not move from one violation to
        another)."""
        rule = self.ctx.kb.rules.get(rule_key)
        return needs(self.ctx.kb, rule.expr)[1] if rule is not None else set()

    def modeled(self, keys) -> bool:
        """Whether the KB's memory or speed terms read any of these options."""
        if not hasattr(self, "_read"):
            kb, fw = self.ctx.kb, self.ctx.framework
            self._read: set[str] = set()
            for table in (kb.memory, kb.speed, kb.work):
                for term in table.values():
                    if term.framework == fw:
                        self._read |= needs(kb, term.expr)[1]
        return bool(self._read & set(keys))
