"""The plan: what `kbsolve` answers, as a pydantic model (its JSON schema is
published in docs/plan.schema.json).

No `from __future__ import annotations`: each field's type is an object when its class is
built, so pydantic evaluates no string annotation on a cold plan (issue 25; every class
names only classes above it)."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Default factories as Python functions: building a class, pydantic asks each factory's
# signature (does it take the validated data?), and a builtin's (list, dict) is parsed from
# its text signature with tokenize, ~0.2 ms a field on every cold plan (issue 25)
def _list() -> list:
    return []


def _dict() -> dict:
    return {}


Status = Literal["optimal", "feasible", "infeasible", "unknown", "timed_out"]  # docs/solver.md
Kind = Literal["forced", "speed", "memory", "preference", "optimum", "default", "pinned", "fact",
               "recipe", "tie", "n/a"]


class Reason(BaseModel):
    rule: str = Field(description="rule, term or pin id")
    because: str = ""
    source: str = ""
    location: str = Field("", description="kb file:line:col")
    detail: str = ""
    optin_group: str = Field("", description="for a consent rule (ALLOW_NAME): its optin's "
                                             "group (numerics, recipe, library)")


class Choice(BaseModel):
    option: str
    key: str = Field(description="the framework's real key")
    value: Any
    kind: Kind
    reasons: list[Reason]
    is_default: bool = Field(False, description="the value is the option's default")


class MemoryItem(BaseModel):
    term: str
    gib: float
    level: str
    location: str = Field(description="gpu or host")
    rule: str
    because: str = ""
    source: str = ""


class PerGpu(BaseModel):
    allocated: float
    reserved: float
    device: float


class MemoryBand(BaseModel):
    """How uncertain the memory figures are: the KB's `error_band` term, the model's
    error band for this class of run (docs/dsl.md 5.10)."""
    share: float = Field(description="the band as a share of the memory below its level "
                                     "(the reserved total): how much more than predicted a run "
                                     "of this class may use, per the term's because")
    gib: float = Field(description="the band per GPU (its row in the breakdown)")
    level: str = Field(description="the memory level the band is added at")
    predicted_gib: PerGpu = Field(description="each level as the model predicts it, without "
                                              "the band")
    upper_gib: PerGpu = Field(description="each level's upper end: the prediction plus the "
                                          "band's share; the device upper end is "
                                          "per_gpu_gib.device, the figure the fit is checked on")
    fits_without_band: bool = Field(description="the predicted device figure, without the "
                                                "band, fits the budget")
    rule: str
    because: str = ""
    source: str = ""
    location: str = Field("", description="kb file:line:col")


class Memory(BaseModel):
    per_gpu_gib: PerGpu = Field(description="each level's sum of the KB's GPU terms; the "
                                            "device level includes the error band (band), so "
                                            "it is the figure's upper end that the fit checks")
    budget_gib: float
    gpu_gib: float
    headroom: float
    host_gib: float
    host_node_gib: float = Field(default=0, description="host RAM per node: host_gib x GPUs per node")
    host_budget_gib: float | None = Field(default=None, description="--host-ram, per node")
    host_budget_source: str | None = Field(
        default=None, description="where host_budget_gib comes from: --host-ram, or the "
                                  "assumed node (the GPU catalog's node_host_ram_gib)")
    host_fits: bool = True
    fits: bool = Field(description="per_gpu_gib.device, the error band's upper end, is at "
                                   "most budget_gib")
    breakdown: list[MemoryItem]
    band: MemoryBand | None = Field(default=None, description="the model's error band; none "
                                    "where the framework's KB states no error_band term")


class Speed(BaseModel):
    step_time_s: float
    step: str = Field(default="", description="what one step is (the KB's doc of the "
                      "framework's main work term): an optimizer step, or one micro-batch "
                      "per rank")
    tokens_per_s: float | None = None
    samples_per_s: float | None = None
    throughput: dict[str, float] = Field(default_factory=_dict)
    mfu: float | None = None
    terms: dict[str, float] = Field(default_factory=_dict)


class Fix(BaseModel):
    kind: Literal["drop_pins", "allow", "global_batch", "host_ram", "hardware"]
    description: str
    drop: list[str] = Field(default_factory=_list)
    allow: list[str] = Field(default_factory=_list)
    host_ram_gib: float | None = None
    global_batch: int | None = None
    gpus: str | None = None


class Alternative(BaseModel):
    changes: dict[str, Any]
    speed_delta_pct: float
    memory_delta_gib: float


class Warning_(BaseModel):
    id: str
    because: str
    source: str
    location: str
    accepted: str | None = Field(
        default=None, description="a plan's own choice fired it: why the plan keeps it")


class GlobalBatch(BaseModel):
    """The recipe's global batch and how the plan meets it."""
    value: int
    unit: str = Field(description="what one unit is, the KB's doc of batch_geometry")
    origin: str = Field(description="--global-batch, the user's pins, or the KB default")
    factors: list[str] = Field(default_factory=_list,
                               description="'VALUE NAME' per factor of the geometry")


MODEL_FACTS = ("the model as the KB reads it: its catalog (or config.json) fields that apply "
               "to its kind (layers, hidden, heads, kv_heads, head_dim, vocab, experts, ...) "
               "and the KB's parameter counts (params, active_params)")


class Plan(BaseModel):
    status: Status
    framework: str
    query: dict[str, Any]
    gpu: str
    model: str
    notes: list[str] = Field(default_factory=_list)
    config: dict[str, Any] = Field(default_factory=_dict)
    memory: Memory | None = None
    speed: Speed | None = None
    explanation: list[Choice] = Field(default_factory=_list)
    warnings: list[Warning_] = Field(default_factory=_list)
    core: list[Reason] = Field(default_factory=_list)
    fixes: list[Fix] = Field(default_factory=_list)
    alternatives: list[Alternative] = Field(default_factory=_list)
    launch: str = ""
    timed_out: bool = Field(default=False, description="the --timeout wall-clock guard "
                            "expired (the counted search budgets did not); the status is "
                            "then timed_out")
    global_batch: GlobalBatch | None = None
    model_facts: dict[str, Any] | None = Field(default=None, description=MODEL_FACTS)


class Estimate(BaseModel):
    # built when first used (`kbsolve estimate`): a plan never validates one, and building
    # its validator and serializer with the module cost ~0.5 ms of every cold plan (issue 25)
    model_config = ConfigDict(defer_build=True)

    framework: str
    query: dict[str, Any]
    gpu: str
    model: str
    config: dict[str, Any]
    feasible: bool
    notes: list[str] = Field(default_factory=_list)
    broken: list[Reason] = Field(default_factory=_list)
    memory: Memory
    speed: Speed
    warnings: list[Warning_] = Field(default_factory=_list)
    model_facts: dict[str, Any] | None = Field(default=None, description=MODEL_FACTS)
