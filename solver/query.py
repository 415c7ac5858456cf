"""The user's question, and its resolution against the catalogs and the KB."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kbsolve.catalog import model_from_hf_config
from kbsolve.catalog.schema import model_class, query_facts
from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.facts import collect_facts, parse_gpus
from kbsolve.program.batch import batch_options, geometry_of
from kbsolve.program.consent import allowed, consent_rules
from kbsolve.program.problem import (Problem, build_problem, check_satisfiable, fact_binding,
                                    parse_pin)


class Query(BaseModel):
    """What the user asks; every field has a CLI flag of the same name."""

    model_config = ConfigDict(extra="forbid")

    gpus: str = Field(description="COUNTxGPU or NODESxCOUNTxGPU, e.g. 8xA100, 2x8xH100")
    model: str = Field(description="catalog name or alias, a config.json path, or a YAML spec")
    framework: str | None = None
    task: str | None = None
    network: str | None = None
    seq_len: int | None = Field(default=None, ge=1)
    resolution: str | None = Field(default=None, description="HxW, e.g. 480x832")
    frames: int | None = Field(default=None, ge=1)
    global_batch: int | None = Field(default=None, ge=1,
                                     description="default: the framework's, in the KB")
    set: list[str] = Field(default_factory=list, description="pins, key=value")
    allow: list[str] = Field(default_factory=list,
                             description="optins or groups the plan may use (--allow)")
    objective: Literal["speed", "memory"] = "speed"
    headroom: float | None = Field(default=None, ge=0, lt=1,
                                   description="default: query.headroom_pct of the KB")
    host_ram: float | None = Field(default=None, gt=0, description="CPU RAM per node, GiB")
    top: int = Field(default=2, ge=0, le=10)
    timeout: float = Field(default=10.0, gt=0)


@dataclass
class Resolved:
    query: Query
    problem: Problem
    gpu: Any
    model: Any  # a catalog model entry
    network: Any
    notes: list[str]

    @property
    def framework(self) -> str:
        return self.problem.framework


def resolve(kb: KnowledgeBase, query: Query, consent: bool = True) -> Resolved:
    """The query's problem; `consent=False` (an estimate of the user's own config)
    adds no rules for optins."""
    notes: list[str] = []
    nodes, per_node, gpu_name = parse_gpus(query.gpus)
    gpu = kb.catalog.gpu(gpu_name)
    note = kb.catalog.resolved_alias_note(gpu_name, "gpu")
    if note:
        notes.append(f"GPU '{gpu_name}' taken as {gpu.name}: {note}")
    model = _model(kb, query.model)
    network = kb.catalog.network(query.network) if query.network else None
    framework = _framework(kb, query.framework, model)
    routed, kept = route_pins(kb, framework, query, query.set, notes)
    facts_in = _query_facts(kb, query, nodes, per_node, model, notes, routed)
    facts = collect_facts(kb, gpu, model, facts_in, network)
    pins = dict(parse_pin(kb, framework, text) for text in kept)
    through = [kb.options[k] for k in pins if kb.options[k].passthrough]
    if through:
        notes.append("passed through as given, not modelled: " + ", ".join(
            o.name for o in through) + " (no memory, speed, rule or warning reads them)")
    task_option = kb.frameworks[framework].task_option
    if query.task is not None:
        if not task_option:
            raise KbError(Diagnostic(f"--task: {framework} has no task option"))
        key, value = parse_pin(kb, framework, f"{task_option}={query.task}")
        pins.setdefault(key, value)
    defaulted = set()
    if query.task is None and task_option:
        option = kb.options[f"{framework}.{task_option}"]
        if option.key not in pins:
            pins[option.key] = option.default
            defaulted.add(option.key)
    if query.global_batch is None:
        _batch_from_pins(kb, framework, facts, pins, notes)
    problem = build_problem(kb, framework, facts, pins)
    problem.defaulted = frozenset(defaulted)
    problem.objective = query.objective
    if consent:
        problem.consent = consent_rules(kb, framework, problem.evaluator, pins,
                                        allowed(kb, framework, query.allow))
    host_ram = _host_ram(query, gpu, nodes, notes)
    if host_ram is not None:  # host terms are per GPU process, after the host headroom
        keep = 1 - Fraction(kb.vocabulary.default("query.host_headroom_pct"), 100)
        problem.host_budget_bytes = host_ram * keep * 2**30 / per_node
        share = f"{100 - kb.vocabulary.default('query.host_headroom_pct')}% of "
        problem.host_budget_source = share + (f"--host-ram {float(host_ram):g}"
                                              if query.host_ram is not None else
                                              f"the assumed node's {float(host_ram):g} GiB")
    if query.global_batch is not None:
        check_satisfiable(problem, "query.global_batch", f"--global-batch {query.global_batch}")
    return Resolved(query, problem, gpu, model, network, notes)


def route_pins(kb: KnowledgeBase, framework: str, query: Query, texts: list[str],
               notes: list[str] | None = None) -> tuple[dict[str, int], list[str]]:
    """A --set of an option bound to a query fact (`from query.F`: cutoff_len,
    height, num_frames, ...) sets the fact, as its flag would (said in `notes`); a
    flag that says otherwise, or a fact only --gpus sets, is exit 2 naming the flag.
    Returns the query fields so set and the --set texts left as pins."""
    nodes, per_node, _ = parse_gpus(query.gpus)
    derived = {"num_gpus": nodes * per_node, "nodes": nodes, "gpus_per_node": per_node}
    flags = {"seq_len": query.seq_len, "frames": query.frames}
    if query.resolution is not None:
        match = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", query.resolution)
        if match:
            flags["height"], flags["width"] = int(match.group(1)), int(match.group(2))
    routed: dict[str, int] = {}
    kept: list[str] = []
    for text in texts:
        key, value = parse_pin(kb, framework, text)
        option = kb.options[key]
        fact = fact_binding(kb, option)
        field = fact.split(".", 1)[1] if fact else None
        if field is None or not _shape_option(kb, framework, fact, option) or \
                (field not in derived and field not in _SHAPE_FLAGS):
            kept.append(text)
            continue
        name, shown = option.name, int(value)
        if field in derived:
            if shown != derived[field]:
                raise KbError(Diagnostic(f"--set {text.strip()}: {name} follows --gpus "
                                         f"({query.gpus} gives {derived[field]}); change "
                                         f"--gpus instead"))
            continue
        flag = _SHAPE_FLAGS[field]
        if flags.get(field) is not None and flags[field] != shown:
            raise KbError(Diagnostic(f"--set {text.strip()}: {name} follows {flag}, which "
                                     f"gives {flags[field]}; give one of them"))
        if routed.get(field, shown) != shown:
            raise KbError(Diagnostic(f"--set {text.strip()}: another --set gives {field} "
                                     f"{routed[field]}"))
        routed[field] = shown
        if notes is not None:
            notes.append(f"--set {name}={shown} is taken as {flag} (query.{field} = {shown}): "
                         f"memory and speed follow it")
    return routed, kept


def _shape_option(kb: KnowledgeBase, framework: str, fact: str, option) -> bool:
    """Whether `option` is the one a --set routes to `fact`: the only option bound to
    it, or, when several are (training and evaluation frames), the one the KB's audit
    data names as the training shape (kb/<framework>/audit.yaml `shape`)."""
    bound = [o for o in kb.options_of(framework) if fact_binding(kb, o) == fact]
    if len(bound) == 1:
        return True
    from kbsolve.audit.audit_data import audit_data
    return audit_data(kb, framework).shape.get(fact) == option.key


def _batch_from_pins(kb, framework, facts, pins, notes) -> None:
    """Pins of every batch option (--set, an audited config) are the recipe's batch."""
    options = batch_options(kb, framework)
    if not options or not options <= set(pins) or "query.global_batch" not in kb.facts:
        return
    value = geometry_of(kb, framework, facts, pins)
    facts["query.global_batch"] = Fraction(value)
    names = ", ".join(sorted(k.split(".", 1)[1] for k in options))
    notes.append(f"global batch {value}: from your {names} (--global-batch changes it)")


def _host_ram(query: Query, gpu, nodes: int, notes: list[str]) -> Fraction | None:
    """GiB of CPU RAM per node: --host-ram, else the catalog's usual node for the GPU
    (stated as an assumption)."""
    if query.host_ram is not None:
        return Fraction(str(query.host_ram))
    assumed = getattr(gpu, "node_host_ram_gib", None)
    if assumed is None:
        notes.append(f"host RAM is not checked: the catalog has no usual node for {gpu.name}; "
                     f"pass --host-ram GIB")
        return None
    notes.append(f"assumed host RAM: {assumed:g} GiB per node, the usual node for {gpu.name} "
                 f"(kb/catalog/gpus.yaml); pass --host-ram GIB for yours")
    return Fraction(str(assumed))


def _query_facts(kb: KnowledgeBase, query: Query, nodes: int, per_node: int, model=None,
                 notes: list[str] | None = None,
                 routed: dict[str, int] | None = None) -> dict[str, Any]:
    """The query facts: the flags, else the model's training shape from the catalog
    (a field train_F gives the default of query field F; said in `notes`), else the
    vocabulary's defaults."""
    values: dict[str, Any] = {"num_gpus": nodes * per_node, "nodes": nodes,
                              "gpus_per_node": per_node}
    if query.headroom is not None:
        values["headroom_pct"] = int(round(query.headroom * 100))
    if query.global_batch is not None:
        values["global_batch"] = query.global_batch
    if query.seq_len is not None:
        values["seq_len"] = query.seq_len
    if query.frames is not None:
        values["frames"] = query.frames
    if query.resolution is not None:
        match = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", query.resolution)
        if not match or min(int(match.group(1)), int(match.group(2))) < 1:
            raise KbError(Diagnostic(f"--resolution '{query.resolution}' is not HxW "
                                     f"(for example 480x832)"))
        values["height"], values["width"] = int(match.group(1)), int(match.group(2))
    values.update(routed or {})  # --set of options bound to these facts (route_pins)
    shape = {name: getattr(model, f"train_{name}", None) for name in _SHAPE_FLAGS}
    shape = {name: value for name, value in shape.items()
             if value is not None and name not in values}
    values.update(shape)
    if shape and notes is not None:
        notes.append(_shape_note(model, shape))
    return query_facts(values, kb.vocabulary)


_SHAPE_FLAGS = {"seq_len": "--seq-len", "frames": "--frames", "height": "--resolution",
                "width": "--resolution"}  # query field -> the flag that sets it


def _shape_note(model, shape: dict[str, int]) -> str:
    parts = [f"frames {shape['frames']}" if name == "frames" else
             f"sequence length {shape['seq_len']}" if name == "seq_len" else
             f"resolution {shape.get('height', '?')}x{shape.get('width', '?')}"
             for name in dict.fromkeys("height" if n == "width" else n for n in shape)]
    flags = "/".join(dict.fromkeys(_SHAPE_FLAGS[name] for name in shape))
    where = getattr(model, "train_source", None)
    cited = f" ({where})" if where else ""
    return (f"{' and '.join(parts)}: {model.name}'s training shape from the catalog{cited}; "
            f"{flags} override{'s' if '/' not in flags else ''}")


def _model(kb: KnowledgeBase, text: str) -> Any:
    path = Path(text)
    if path.suffix == ".json" or path.is_dir() or (path.name == "config.json"):
        target = path / "config.json" if path.is_dir() else path
        if not target.exists():
            raise KbError(Diagnostic(f"--model: no such file '{target}'"))
        return model_from_hf_config(target, vocabulary=kb.vocabulary)
    if path.suffix in (".yaml", ".yml"):
        return _model_spec(kb, path)
    return kb.catalog.model(text)


def _model_spec(kb: KnowledgeBase, path: Path) -> Any:
    from kbsolve.catalog import load_yaml
    from pydantic import ValidationError
    if not path.is_file():
        raise KbError(Diagnostic(f"--model: no such file '{path}'"))
    data, positions = load_yaml(path)
    if not isinstance(data, dict):
        raise KbError(Diagnostic(f"--model {path}: a model spec is a mapping of fields"))
    data.setdefault("source", f"user spec {path}")
    try:
        return model_class("model", kb.vocabulary).model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "the spec"
        raise KbError(Diagnostic(f"--model {path}: {field}: {first['msg']}",
                                 positions.get((first["loc"][0],)) if first["loc"] else None)
                      ) from None


def _framework(kb: KnowledgeBase, wanted: str | None, model: Any) -> str:
    if wanted is not None:
        if wanted not in kb.frameworks:
            raise KbError(Diagnostic(f"--framework: unknown framework '{wanted}'"
                                     f"{did_you_mean(wanted, kb.frameworks)}"))
        fw = kb.frameworks[wanted]
        if fw.models and model.kind not in fw.models:
            raise KbError(Diagnostic(f"--framework {wanted} trains {', '.join(fw.models)} "
                                     f"models, but {model.name} is a {model.kind} model"))
        return wanted
    for name, fw in sorted(kb.frameworks.items()):
        if model.kind in fw.models:
            return name
    raise KbError(Diagnostic(f"no framework in the KB trains {model.kind} models like "
                             f"{model.name}"))
