"""The tools the MCP server offers, independent of the SDK: each checks its
arguments, calls the api and answers with the same JSON the CLI prints for
the same query, the CLI's exit code, and on bad input the CLI's error text.
A tool never raises: every failure is an answer (`Answer.error`)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, Field

from kbsolve import api
from kbsolve.mcp_server import arguments as args
from kbsolve.render import render

EXIT_INTERNAL = 70  # as the CLI: a bug, said in one line


class Rows(BaseModel):
    rows: list[dict[str, Any]] = Field(description="the rows of `kbsolve list WHAT --format "
                                                   "json`")


@dataclass
class Answer:
    data: dict[str, Any] | None  # the structured result (None for an error)
    text: str  # the CLI's output (JSON) or its error message
    exit_code: int
    error: bool = False


@dataclass
class Session:
    """The server's state: its packs and the KB loaded once (warm)."""
    packs: list[str] = field(default_factory=list)
    _kb: Any = None

    def kb(self, extra: list[str]):
        if extra:
            return api.load_kb(self.packs + list(extra))
        if self._kb is None:
            self._kb = api.load_kb(self.packs)
        return self._kb


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[args.Arguments]
    result: Callable[[], type[BaseModel]]  # imported on first use: the schema's model
    run: Callable[[Session, Any], Answer]

    def input_schema(self) -> dict[str, Any]:
        """The arguments' schema, the common `kb` last."""
        schema = self.arguments.model_json_schema()
        properties = schema["properties"]
        properties["kb"] = properties.pop("kb")
        return schema

    def output_schema(self) -> dict[str, Any]:
        return self.result().model_json_schema()


def _plan(session: Session, a: args.PlanArguments) -> Answer:
    kb = session.kb(a.kb)
    plan = api.solve(a.query(), kb)
    text = render(plan, "json")
    if a.write and plan.status in ("optimal", "feasible"):
        api.emit(plan, a.write, kb)
    code = api.EXIT_UNKNOWN if plan.timed_out else {
        "optimal": api.EXIT_OK, "feasible": api.EXIT_UNKNOWN, "unknown": api.EXIT_UNKNOWN,
        "infeasible": api.EXIT_INFEASIBLE}[plan.status]
    return Answer(json.loads(text), text, code)


def _estimate(session: Session, a: args.EstimateArguments) -> Answer:
    query = a.query()
    settings = {}
    for pin in query.pop("set"):
        key, sep, value = pin.partition("=")
        if not sep:
            raise api.KbError(api.Diagnostic(f"set: '{pin}' is not key=value"))
        settings[key.strip()] = value.strip()
    result = api.estimate(dict(query, set=[]), settings, session.kb(a.kb))
    text = render(result, "json")
    return Answer(json.loads(text), text, api.EXIT_OK if result.feasible else
                  api.EXIT_INFEASIBLE)


def _explain(session: Session, a: args.ExplainArguments) -> Answer:
    from kbsolve.mcp_server.explain import explain
    result = explain(session.kb(a.kb), a.query(), a.option)
    text = result.model_dump_json(indent=2)
    return Answer(json.loads(text), text, api.EXIT_OK)


def _audit_answer(report) -> Answer:
    text = render(report, "json")
    return Answer(json.loads(text), text, api.EXIT_OK)


def _audit(session: Session, a: args.AuditArguments) -> Answer:
    report, _ = api.audit(a.path, a.gpus, session.kb(a.kb), plan=a.plan, allow=a.allow)
    return _audit_answer(report)


def _check_config(session: Session, a: args.CheckConfigArguments) -> Answer:
    if (a.text is None) == (a.path is None):
        raise api.KbError(api.Diagnostic("check_config: give the config's text or its path, "
                                         "one of them"))
    if a.path is not None:
        if not os.path.isfile(a.path):
            raise api.KbError(api.Diagnostic(f"{a.path}: no such config file"))
        return _audit_answer(api.audit(a.path, a.gpus, session.kb(a.kb))[0])
    name = os.path.basename(a.filename)
    if not name or name != a.filename:
        raise api.KbError(api.Diagnostic(f"argument 'filename' = {a.filename!r}: give a "
                                         f"file name without a folder"))
    with tempfile.TemporaryDirectory(prefix="kbsolve-check-") as folder:
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as out:
            out.write(a.text)
        answer = _audit_answer(api.audit(path, a.gpus, session.kb(a.kb))[0])
    answer.text = answer.text.replace(folder + os.sep, "").replace(folder, ".")
    answer.data = json.loads(answer.text)
    return answer


def _fix(session: Session, a: args.FixArguments) -> Answer:
    result = api.fix(a.config, a.symptom, a.gpus, session.kb(a.kb), write=a.write,
                     allow=a.allow)
    text = render(result, "json")
    return Answer(json.loads(text), text, api.EXIT_OK if result.suggestions else
                  api.EXIT_INFEASIBLE)


def _list(session: Session, a: args.ListArguments) -> Answer:
    rows = api.listing(session.kb(a.kb), a.what, a.framework)
    text = render(rows, "json", kind="listing")
    return Answer({"rows": json.loads(text)}, text, api.EXIT_OK)


def _plan_model():
    from kbsolve.results.plan import Plan
    return Plan


def _estimate_model():
    from kbsolve.results.plan import Estimate
    return Estimate


def _explain_model():
    from kbsolve.mcp_server.explain import OptionExplanation
    return OptionExplanation


def _audit_model():
    from kbsolve.results.audit import AuditReport
    return AuditReport


def _fix_model():
    from kbsolve.results.fix import FixResult
    return FixResult


TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool("plan", "The fastest (or smallest) training configuration that fits the GPUs, "
         "proven optimal, with every option's reason; the same JSON as `kbsolve --gpus G "
         "--model M --format json`. `write` emits the framework's files into a directory.",
         args.PlanArguments, _plan_model, _plan),
    Tool("estimate", "Memory per GPU term by term (with the model's error band), speed and "
         "the rules broken for one configuration; unset options take their defaults. As "
         "`kbsolve estimate ... --format json`.", args.EstimateArguments, _estimate_model,
         _estimate),
    Tool("check_config", "Audit one framework config (its text or its path): errors that "
         "crash at start-up, settings silently ignored, and whether it fits in memory. As "
         "`kbsolve audit FILE --format json`.", args.CheckConfigArguments, _audit_model,
         _check_config),
    Tool("audit", "Audit a training project folder: checklist scores, errors, silent "
         "failures, fit, recommended changes. As `kbsolve audit PATH --format json`.",
         args.AuditArguments, _audit_model, _audit),
    Tool("fix", "Changes that cure a symptom (oom, slow, unstable) of a config, ranked, each "
         "with its memory and speed effect and reason. As `kbsolve fix CONFIG --symptom S "
         "--format json`; `write` writes the first into the config (a .bak is kept).",
         args.FixArguments, _fix_model, _fix),
    Tool("explain", "Why a plan chose an option's value (rules, sources) and what each "
         "other value of the option costs with the rest as planned.",
         args.ExplainArguments, _explain_model, _explain),
    Tool("list", "What the KB knows: gpus, models, options, rules, checks or optins "
         "(optionally one framework's). As `kbsolve list WHAT --format json`, under `rows`.",
         args.ListArguments, lambda: Rows, _list),
)}


def call(session: Session, name: str, arguments: dict[str, Any] | None) -> Answer:
    """Run a tool; every failure is an error Answer with the CLI's text and exit code."""
    try:
        tool = TOOLS.get(name)
        if tool is None:
            from kbsolve.diagnostics import did_you_mean
            raise api.KbError(api.Diagnostic(f"unknown tool '{name}'"
                                             f"{did_you_mean(name, TOOLS)}"))
        with api.deep_recursion():
            return tool.run(session, args.parse(tool.arguments, arguments))
    except api.KbError as error:
        return Answer(None, error.render(), error.exit_code, error=True)
    except RecursionError:
        return Answer(None, "error: input nests too deeply", api.EXIT_USAGE, error=True)
    except MemoryError:
        return Answer(None, "error: out of memory reading the input", api.EXIT_USAGE,
                      error=True)
    except Exception as error:  # noqa: BLE001 - a bug: one line, and the server lives on
        return Answer(None, f"internal error: {type(error).__name__}: {error} (please "
                      f"report it)", EXIT_INTERNAL, error=True)
