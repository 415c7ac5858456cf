"""The tools' arguments as pydantic models: their JSON schemas are the tools'
input schemas, and a bad argument becomes one error line, as a bad flag does
in the CLI (exit 2). Names and meanings follow the CLI's flags."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kbsolve.api import Diagnostic, KbError
from kbsolve.diagnostics import did_you_mean

PATH_NOTE = " (a relative path is read from the server's working directory)"


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kb: list[str] = Field(default_factory=list, description="rule packs laid over the shipped "
                          "KB, as `--kb DIR` (default: the packs the server started with)")


class QueryArguments(Arguments):
    gpus: str = Field(description="COUNTxGPU or NODESxCOUNTxGPU (8xA100, 2x8xH100); "
                                  "COUNTxMEMORY (2x16GB) for a card the catalog lacks")
    model: str = Field(description="catalog name or alias, or the path of a Hugging Face "
                                   "config.json or a YAML model spec" + PATH_NOTE)
    framework: str | None = Field(None, description="override the framework")
    task: str | None = Field(None, description="stage or trainer (sft, dpo, grpo, ...)")
    network: str | None = Field(None, description="inter-node network (ib-400, ...)")
    seq_len: int | None = Field(None, ge=1, description="sequence length in tokens")
    resolution: str | None = Field(None, description="HxW, e.g. 480x832")
    frames: int | None = Field(None, ge=1, description="video frames")
    global_batch: int | None = Field(None, ge=1, description="the recipe's global batch")
    set: list[str] = Field(default_factory=list, description="pinned options, each KEY=VALUE "
                                                             "(as --set)")
    headroom: float | None = Field(None, ge=0, lt=1, description="fraction of GPU memory "
                                                                 "kept free")
    host_ram: float | None = Field(None, gt=0, description="CPU RAM per node, GiB")
    gpu_spec: str | None = Field(None, description="a YAML of a GPU the catalog lacks"
                                 + PATH_NOTE)

    def query(self) -> dict[str, Any]:
        """The api's query fields, as the CLI builds them."""
        return dict(gpus=self.gpus, model=self.model, framework=self.framework,
                    task=self.task, network=self.network, seq_len=self.seq_len,
                    resolution=self.resolution, frames=self.frames, set=list(self.set),
                    headroom=self.headroom, host_ram=self.host_ram,
                    global_batch=self.global_batch, gpu_spec=self.gpu_spec)


class SearchArguments(QueryArguments):
    objective: Literal["speed", "memory"] = Field("speed", description="the fastest plan, or "
                                                  "the smallest that fits")
    top: int = Field(2, ge=0, le=10, description="alternatives to show")
    timeout: float | None = Field(None, ge=0.01, description="an outer guard in seconds "
                                  "(none by default: the counted budgets bound the search); "
                                  "past it the best plan so far, status timed_out (exit 3)")
    allow: list[str] = Field(default_factory=list, description="optins or groups the plan "
                             "may change (numerics, recipe, library; the `list optins` tool)")

    def query(self) -> dict[str, Any]:
        return super().query() | dict(objective=self.objective, top=self.top,
                                      timeout=self.timeout, allow=list(self.allow))


class PlanArguments(SearchArguments):
    write: str | None = Field(None, description="a directory to write the framework's files "
                              "into (as --emit DIR); nothing is written without it")


class EstimateArguments(QueryArguments):
    pass


class ExplainArguments(SearchArguments):
    option: str = Field(description="an option of the plan (its name or the framework's key)")


class CheckConfigArguments(Arguments):
    text: str | None = Field(None, description="the config file's text (give text or path)")
    path: str | None = Field(None, description="the config file's path" + PATH_NOTE)
    filename: str = Field("train.yaml", description="the file name the text is audited under "
                          "(its extension and name decide what kind of file it is)")
    gpus: str | None = Field(None, description="COUNTxGPU, e.g. 8xA100; else from the config")


class AuditArguments(Arguments):
    path: str = Field(description="a training project's folder, or one config" + PATH_NOTE)
    gpus: str | None = Field(None, description="COUNTxGPU, e.g. 8xA100; else per config")
    plan: bool = Field(False, description="add the solver's best plan per config")
    allow: list[str] = Field(default_factory=list, description="optins or groups a "
                             "recommendation may change")


class FixArguments(Arguments):
    config: str = Field(description="the config file's path" + PATH_NOTE)
    symptom: Literal["oom", "slow", "unstable"]
    gpus: str | None = Field(None, description="COUNTxGPU, e.g. 8xA100")
    allow: list[str] = Field(default_factory=list, description="optins or groups a cure may "
                             "change")
    write: bool = Field(False, description="write the first change into the config (a .bak "
                        "is kept); nothing is written without it")


class ListArguments(Arguments):
    what: Literal["gpus", "models", "options", "rules", "checks", "optins"]
    framework: str | None = Field(None, description="only this framework's entries")


def parse(model: type[Arguments], arguments: dict[str, Any] | None) -> Arguments:
    """The arguments checked, or KbError with one line naming the first bad one."""
    try:
        return model.model_validate(arguments or {})
    except ValidationError as error:
        problems = sorted(error.errors(), key=lambda p: p["type"] != "extra_forbidden")
        raise KbError(Diagnostic(_message(model, problems[0]))) from None  # a typo first


def _message(model: type[Arguments], problem: dict) -> str:
    name = ".".join(str(part) for part in problem["loc"]) or "arguments"
    kind = problem["type"]
    if kind == "extra_forbidden":
        return f"unknown argument '{name}'{did_you_mean(name, model.model_fields)}"
    if kind == "missing":
        description = model.model_fields[name].description or ""
        return f"missing argument '{name}'" + (f" ({description})" if description else "")
    shown = repr(problem.get("input"))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"argument '{name}' = {shown}: {problem['msg'][0].lower()}{problem['msg'][1:]}"
