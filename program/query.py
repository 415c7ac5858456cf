"""The user's question, and its resolution against the catalogs and the KB."""

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
from kbsolve.program.facts import collect_facts, gpu_by_name, parse_gpus
from kbsolve.program.batch import batch_options, geometry_of
from kbsolve.program.consent import allowed, consent_rules
from kbsolve.program.program import link
from kbsolve.program.problem import (Problem, build_problem, check_satisfiable, fact_binding,
                                    parse_pin, pin_note)


def _list() -> list:
    """A default factory whose signature pydantic reads cheaply (results/plan.py _list)."""
    return []


class Query(BaseModel):
    """What the user asks; every field has a CLI flag of the same name."""

    model_config = ConfigDict(extra="forbid")

    gpus: str = Field(description="COUNTxGPU or NODESxCOUNTxGPU, e.g. 8xA100, 2x8xH100; "
                                  "COUNTxMEMORY (2x16GB) for a card the catalog lacks")
    gpu_spec: str | None = Field(default=None, description="a YAML file of GPU fields "
                                 "(the catalog's); --gpus then gives the count")
    model: str = Field(description="catalog name or alias, a config.json path, or a YAML spec")
    framework: str | None = None
    task: str | None = None
    network: str | None = None
    seq_len: int | None = Field(default=None, ge=1)
    resolution: str | None = Field(default=None, description="HxW, e.g. 480x832")
    frames: int | None = Field(default=None, ge=1)
    global_batch: int | None = Field(default=None, ge=1,
                                     description="default: the framework's, in the KB")
    set: list[str] = Field(default_factory=_list, description="pins, key=value")
    allow: list[str] = Field(default_factory=_list,
                             description="optins or groups the plan may use (--allow)")
    objective: Literal["speed", "memory"] = "speed"
    headroom: float | None = Field(default=None, ge=0, lt=1,
                                   description="default: query.headroom_pct of the KB")
    host_ram: float | None = Field(default=None, gt=0, description="CPU RAM per node, GiB")
    top: int = Field(default=2, ge=0, le=10)
    timeout: float | None = Field(default=None, gt=0, description="an optional wall-clock "
                                  "guard, seconds; default none: the counted budgets bound "
                                  "the work")


@dataclass
class Resolved:
    """A query resolved against the catalogs: its problem, GPU, model, network and notes."""
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
    nodes, per_node, gpu = _gpu(kb, query, notes)
    model = _model(kb, query.model, notes)
    network = kb.catalog.network(query.network) if query.network else None
    framework = _framework(kb, query.framework, model)
    routed, kept = route_pins(kb, framework, query, query.set, notes)
    facts_in = _query_facts(kb, query, nodes, per_node, model, notes, routed)
    facts = collect_facts(kb, gpu, model, facts_in, network)
    pins = dict(parse_pin(kb, framework, text) for text in kept)
    notes.extend(note for note in (pin_note(kb, framework, t) for t in kept) if note)
    through = [kb.options[k] for k in pins if kb.options[k].passthrough]
    if through:
        notes.append("passed through as given, not modelled: " + ", ".join(
            o.name for o in through) + " (no memory, speed, rule or warning reads them)")
    task_option = kb.frameworks[framework].task_option
    by_task = None
    if query.task is not None:
        if not task_option:
            raise KbError(Diagnostic(f"--task: {framework} has no task option"))
        key, value = parse_pin(kb, framework, f"{task_option}={query.task}")
        if key not in pins:
            pins[key] = value
            by_task = key
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
    problem.by_task = by_task
    problem.objective = query.objective
    if consent:
        problem.consent = consent_rules(kb, framework, problem.evaluator, pins,
                                        allowed(kb, framework, query.allow))
    host_ram = _host_ram(query, gpu, nodes, notes)
    if host_ram is not None:  # host terms are per GPU process, after the host headroom
        problem.host_budget_bytes = host_budget(kb, host_ram, per_node)
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
    derived = gpu_count_facts(nodes, per_node)
    flags = {"seq_len": query.seq_len, "frames": query.frames,
             "inter_node_gbps": _network_gbps(kb, query)}
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
                (field not in derived and field not in _BOUND_FLAGS):
            kept.append(text)
            continue
        name, shown = option.name, int(value)
        if field in derived:
            if shown != derived[field]:
                raise KbError(Diagnostic(f"--set {text.strip()}: {name} follows --gpus "
                                         f"({query.gpus} gives {derived[field]}); change "
                                         f"--gpus instead"))
            continue
        flag = _BOUND_FLAGS[field]
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
    bound = [o for o in link(kb, framework).options if fact_binding(kb, o) == fact]
    if len(bound) == 1:
        return True
    from kbsolve.program.repo_files import audit_data
    return audit_data(kb, framework).shape.get(fact) == option.key


def _batch_from_pins(kb, framework, facts, pins, notes) -> None:
    """Pins of every batch option (--set, an audited config) are the recipe's batch."""
    options = batch_options(kb, framework)
    if not options or not options <= set(pins) or "query.global_batch" not in kb.facts:
        return
    value = geometry_of(kb, framework, facts, pins)
    facts["query.global_batch"] = Fraction(value)
    names = ", ".join(sorted(link(kb, framework).name(k) for k in options))
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
    values: dict[str, Any] = gpu_count_facts(nodes, per_node)
    if query.headroom is not None:
        values["headroom_pct"] = int(round(query.headroom * 100))
    if query.global_batch is not None:
        values["global_batch"] = query.global_batch
    if query.seq_len is not None:
        values["seq_len"] = query.seq_len
    if query.frames is not None:
        values["frames"] = query.frames
    if query.network is not None:
        values["inter_node_gbps"] = _network_gbps(kb, query)
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


def gpu_count_facts(nodes: int, per_node: int) -> dict[str, Any]:
    """The query facts the GPU count gives: --gpus's (a plan's), the audited
    hardware's (an audit's)."""
    return {"num_gpus": nodes * per_node, "nodes": nodes, "gpus_per_node": per_node}


def host_budget(kb: KnowledgeBase, host_ram: Fraction, per_node: int) -> Fraction:
    """Bytes of CPU RAM per GPU process from GiB per node: the node's RAM after the
    KB's host headroom (query.host_headroom_pct), shared by its GPU processes."""
    keep = 1 - Fraction(kb.vocabulary.default("query.host_headroom_pct"), 100)
    return host_ram * keep * 2**30 / per_node


def config_facts(kb: KnowledgeBase, gpu, model, counts: tuple[int, int] | None,
                 given: dict[str, Any], bound: set[str]) -> dict[str, Any]:
    """The facts of an audited config's query (the audit's, `fix`'s): the KB's
    headroom, the hardware's GPU counts when known (`counts`: nodes, GPUs per
    node), the query fields the config's own options give (`given`; the hardware
    wins), and each training-shape field no option of the framework sets (`bound`
    lists those an option sets) at the vocabulary's value, as a plan takes it: the
    framework has no way to change it. Unlike a plan's query, every other query
    fact stays unknown: the audit says undecided rather than assume."""
    values: dict[str, Any] = {"headroom_pct": kb.vocabulary.default("query.headroom_pct")}
    if counts is not None:
        values.update(gpu_count_facts(*counts))
    for name, value in given.items():
        values.setdefault(name, value)
    defaults = query_facts({}, kb.vocabulary)
    for name in _SHAPE_FLAGS:
        if name not in values and name not in bound and defaults.get(name) is not None:
            values[name] = defaults[name]
    return collect_facts(kb, gpu, model, values)


_SHAPE_FLAGS = {"seq_len": "--seq-len", "frames": "--frames", "height": "--resolution",
                "width": "--resolution"}  # query field -> the flag that sets it
_BOUND_FLAGS = {**_SHAPE_FLAGS, "inter_node_gbps": "--network"}  # and the options bound to them


def _network_gbps(kb: KnowledgeBase, query: Query) -> int | None:
    """--network's bandwidth per node in Gbit/s (query.inter_node_gbps)."""
    if query.network is None:
        return None
    return int(kb.catalog.network(query.network).gbps)


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


def _gpu(kb: KnowledgeBase, query: Query, notes: list[str]) -> tuple[int, int, Any]:
    """(nodes, GPUs per node, the GPU entry): a catalog card, a generic one by its
    memory (2x16GB), or --gpu-spec's; what was assumed goes to `notes`."""
    if query.gpu_spec is None:
        nodes, per_node, name = parse_gpus(query.gpus)
        gpu, said = gpu_by_name(kb, name)
        notes.extend(said)
        return nodes, per_node, gpu
    nodes, per_node, name = parse_gpus(query.gpus)
    if name.isdigit() and nodes == 1:  # 2x8 with a spec: nodes x GPUs per node
        nodes, per_node, name = per_node, int(name), ""
    return nodes, per_node, _gpu_spec(kb, Path(query.gpu_spec), name, notes)


def _gpu_spec(kb: KnowledgeBase, path: Path, name: str, notes: list[str]) -> Any:
    """A GPU from a YAML file of the catalog's GPU fields; the fields it leaves out
    are the catalog's generic GPU's, said in a note. --gpus may name the card (the
    spec's name) or give its memory."""
    from kbsolve.catalog import load_yaml
    from kbsolve.program.facts import assumed_note, gpu_memory
    flag = f"--gpu-spec {path}"
    generic = kb.catalog.generic_gpu
    if not path.is_file():
        raise KbError(Diagnostic(f"--gpu-spec: no such file '{path}'"))
    if generic is None:
        raise KbError(Diagnostic(f"{flag}: the catalog has no generic GPU to fill in fields"))
    data, positions = load_yaml(path)
    if not isinstance(data, dict):
        raise KbError(Diagnostic(f"{flag}: a GPU spec is a mapping of fields"))
    given = dict(data)
    given.setdefault("name", path.stem)
    given.setdefault("source", f"user spec {path}")
    memory = gpu_memory(kb, name) if name else None
    if name and memory is None and name.lower() != str(given["name"]).lower():
        raise KbError(Diagnostic(f"--gpus names '{name}' but {flag} describes "
                                 f"'{given['name']}'; give --gpus COUNT (for example 2)"))
    if memory is not None:
        if "memory_gib" in given:
            raise KbError(Diagnostic(f"--gpus gives the memory ({name}) and {flag} too "
                                     f"(memory_gib {given['memory_gib']}); give one"))
        given["memory_gib"] = memory[0]
    if "memory_gib" not in given:
        raise KbError(Diagnostic(f"{flag}: memory_gib is missing (the one figure never "
                                 f"assumed); or give it in --gpus, e.g. 2x16GB"))
    try:
        gpu = generic.entry(given, kb.vocabulary)
    except KbError as error:
        raise KbError(Diagnostic(f"{flag}: {error.diagnostics[0].message}")) from None
    guessed = generic.assumed(given)
    said = f"GPU '{gpu.name}' from {flag}"
    notes.append(said + ("; " + assumed_note(generic, given, f"add them to {path.name}")
                         if guessed else ""))
    return gpu


def _model(kb: KnowledgeBase, text: str, notes: list[str] | None = None) -> Any:
    path = Path(text)
    if path.suffix == ".json" or path.is_dir() or (path.name == "config.json"):
        target = path / "config.json" if path.is_dir() else path
        if not target.exists():
            raise KbError(Diagnostic(f"--model: no such file '{target}'"))
        return model_from_hf_config(target, vocabulary=kb.vocabulary, table=kb.catalog.hf)
    if path.suffix in (".yaml", ".yml"):
        return _model_spec(kb, path)
    found = kb.catalog.find("model", text)
    if found is not None:
        return found
    suffixes = kb.vocabulary.enum_values("hub_variant")
    variant = kb.catalog.variant("model", text, suffixes)
    if variant is None:
        return kb.catalog.model(text)  # unknown: the error and its suggestions
    model, base, removed = variant
    if notes is not None:
        notes.append(f"model '{text}' read as {model.name}: a {''.join(removed)} variant of "
                     f"{base}, the same architecture (kb/core/vocabulary.kb enum hub_variant)"
                     + (f"; catalog note: {model.notes}" if getattr(model, "notes", None) else ""))
    return model


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
            able = sorted(n for n, f in kb.frameworks.items() if model.kind in f.models)
            raise KbError(Diagnostic(f"--framework {wanted} trains {', '.join(fw.models)} "
                                     f"models, but {model.name} is a {model.kind} model",
                                     hint=f"frameworks that train {model.kind} models: "
                                          f"{', '.join(able)}" if able else
                                     f"no framework in the KB trains {model.kind} models"))
        return wanted
    for name, fw in sorted(kb.frameworks.items(), key=lambda i: (getattr(i[1], "tier", 1), i[0])):
        if model.kind in fw.models:
            return name
    raise KbError(Diagnostic(f"no framework in the KB trains {model.kind} models like "
                             f"{model.name}"))


def framework_of(kb: KnowledgeBase, query: Query) -> str | None:
    """The framework `resolve` will plan the query with, read from the KB's frameworks
    and catalog alone (KnowledgeBase.scoped: the tables a plan reads); None when the
    query's model or framework does not resolve (resolve then says why)."""
    try:
        return _framework(kb, query.framework, _model(kb, query.model))
    except (KbError, OSError, ValueError):
        return None


def gpus_of(kb: KnowledgeBase, gpus: str | None, gpu_spec: str | None,
            notes: list[str]) -> tuple[int, int, Any]:
    """(nodes, GPUs per node, GPU entry) for --gpus and --gpu-spec, as a query reads
    them (the audit's flags); --gpu-spec without --gpus is one GPU."""
    return _gpu(kb, Query.model_construct(gpus=gpus or "1", gpu_spec=gpu_spec), notes)


def model_of(kb: KnowledgeBase, text: str, notes: list[str] | None = None) -> Any:
    """The model --model names: a catalog name or alias, a config.json or its folder,
    or a YAML spec; an unknown name is exit 2 with suggestions."""
    return _model(kb, text, notes)
