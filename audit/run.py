"""Audit a project: detect, read, judge, score, find errors, check the fit."""

from __future__ import annotations

from pathlib import Path

from kbsolve.audit import findings as find
from kbsolve.audit.assess import Context, build_context
from kbsolve.audit.audit_data import (advice_apart, logged_apart, notes_apart,
                                      outside_fix_scope)
from kbsolve.audit.code_patterns import scan
from kbsolve.audit.consent import allowed_keys, check_allow
from kbsolve.audit.effects import Estimator
from kbsolve.audit.fit import fit_check
from kbsolve.audit.flags import Flags
from kbsolve.audit.hardware import Hardware, from_count, nvidia_smi
from kbsolve.audit.judge import code_checks, config_checks, judge_code_unit, judge_config
from kbsolve.audit.mapping import Reading, plain, read_options
from kbsolve.results.audit import AuditReport, UnitReport
from kbsolve.audit.model_lookup import model_folders, model_for
from kbsolve.audit.new_files import ground_paths
from kbsolve.audit.read_launches import main_file
from kbsolve.audit.read_project import Unit, read_project
from kbsolve.audit.recommend import changes, choose, cure_or_repairs, repair, repair_note, sound
from kbsolve.audit.score import by_priority, score
from kbsolve.audit.verdicts import weigh
from kbsolve.audit.walk import walk
from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase

AUTO_PRIORITIES = ("P0", "P1")  # P2 items need testing: listed, never written by --fix


def audit_project(kb: KnowledgeBase, path: str, gpus: str | None = None,
                  with_plan: bool = False, allow: tuple[str, ...] = (),
                  flags: Flags | None = None) -> AuditReport:
    allow = check_allow(kb, allow)
    flags = (flags or Flags()).resolve(kb, gpus)
    fixed = flags.fixed
    tree = walk(path)
    project = read_project(kb, tree)
    report = AuditReport(path=str(project.root), files=project.files,
                         notes=flags.notes + project.notes, allow=list(allow))
    for sign in project.signs:
        report.frameworks.setdefault(sign.framework, []).append(
            f"{sign.kind} {sign.what} ({sign.where})")
    report.not_audited, report.not_configs = project.not_audited, project.not_configs
    report.notes += project.not_audited
    if project.not_configs:
        report.notes.append(f"{project.not_configs} YAML file(s) are no training config: "
                            f"skipped")
    if not project.units and project.unparsed and not project.not_audited:
        raise KbError(Diagnostic(project.unparsed[0] + (
            f" (and {len(project.unparsed) - 1} more unparsable files)"
            if len(project.unparsed) > 1 else "")))
    if not project.units and not project.not_audited:
        raise KbError(Diagnostic(f"{path}: no training config or script of a known framework "
                                 f"found ({project.files} files read)"))
    for unit in project.units:  # a config's own signs (a script's imports are listed)
        if unit.kind == "code":
            continue
        signs = report.frameworks.setdefault(unit.framework, [])
        mine = ", ".join(unit.signs) if unit.signs else "its keys"
        signs.append(f"{unit.kind} {unit.rel}: {mine}")
    for unit in project.units:
        if unit.kind == "code":
            report.units.append(_code_report(kb, unit))
        elif unit.kind == "keys":
            report.units.append(_keys_report(kb, unit, flags, project.root))
        else:
            report.units.append(_config_report(kb, unit, flags, with_plan, allow,
                                               project.root,
                                               project.versions.get(unit.framework))[0])
    shared = fixed or nvidia_smi(kb)
    if shared is not None:
        report.hardware, report.hardware_source = shared.spec, shared.source
    else:
        report.hardware, report.hardware_source = "per config", ""
    return report


def _code_report(kb: KnowledgeBase, unit: Unit) -> UnitReport:
    out = UnitReport(framework=unit.framework, kind="code", path=unit.rel, signs=unit.signs)
    fw = kb.frameworks[unit.framework]
    out.basic = {"framework": f"{unit.framework} {fw.version}".strip(), "script": unit.rel,
                 "signs": ", ".join(unit.signs)}
    uses, problem = scan(unit.code, unit.rel)
    if uses is None:
        out.notes.append(problem)
        return out
    out.checks = judge_code_unit(kb, unit.framework, uses, unit.rel)
    others = {c.id for c in config_checks(kb, unit.framework)}
    out.categories, out.score, out.points = score(kb, unit.framework, out.checks, others)
    out.recommendations = by_priority(out.checks)
    return out


def _keys_report(kb: KnowledgeBase, unit: Unit, flags: Flags, root: Path | None) -> UnitReport:
    """A file of a kind the KB does not audit (an eval or chat config): only the
    keys its own parser refuses (file_kinds.yaml `keys`), as errors, and the KB
    warnings the kind names (`warnings`: the chat template of another family)."""
    main_name = main_file(kb, unit.framework, "config")
    main = unit.files[main_name]
    out = UnitReport(framework=unit.framework, kind="keys", path=unit.rel,
                     file_kind=unit.file_kind, files={main_name: main.rel}, signs=unit.signs,
                     notes=[f"not audited: {unit.file_kind}; only the keys its parser refuses "
                            f"are checked"])
    out.errors, _ = find.refused_keys(kb, unit.framework, main, unit.accepted, unit.launch.env)
    if unit.warnings:
        reading = read_options(kb, unit.framework, unit.files)
        model, _ = model_for(kb, main.values, model_folders(unit, root), flags.forced)
        ctx = build_context(kb, unit.framework, reading.values, Hardware(), model,
                            {key for key, _, _ in reading.odd}, flags.host_ram)
        out.silent = [f for f in find.value_findings(ctx, reading, unit.files, main_name)
                      if f.kind == "warning" and f.id in unit.warnings]
    return out


def hardware_for(kb: KnowledgeBase, unit: Unit, reading: Reading, fixed) -> Hardware:
    """The flags' GPUs (`fixed`), else the config's or the launch's count, of the
    flags' GPU type (--gpu-spec alone) or nvidia-smi's."""
    if fixed is not None and fixed.per_node is not None:
        return fixed
    card = fixed.gpu if fixed is not None else None
    if unit.launch.flagged and unit.launch.gpus:  # the launcher's flag beats its config file
        return from_count(kb, unit.launch.gpus, unit.launch.nodes, "launch script", card)
    declared = {option.source_expr.path: int(reading.values[option.key])
                for option in kb.options_of(unit.framework)
                if isinstance(option.source_expr, ir.FactRef) and option.key in reading.values
                and option.source_expr.path in ("query.num_gpus", "query.nodes")}
    if declared.get("query.num_gpus"):
        return from_count(kb, declared["query.num_gpus"], declared.get("query.nodes"), "config",
                          card)
    counts = [(f.values.get(k), f.values.get(k.replace("num_processes", "num_machines")))
              for f in unit.files.values() for k in f.values
              if k.rsplit(".", 1)[-1] == "num_processes"]  # accelerate's own keys
    for processes, machines in counts:
        if isinstance(processes, int) and processes > 0:
            return from_count(kb, processes, machines if isinstance(machines, int) else None,
                              "config", card)
    if unit.launch.gpus:
        return from_count(kb, unit.launch.gpus, unit.launch.nodes or declared.get("query.nodes"),
                          "launch script", card)
    if fixed is not None:  # --gpu-spec alone, no count anywhere: one GPU, as the planner
        return Hardware(fixed.gpu, 1, 1, f"{fixed.source} (one GPU: no count in the config "
                                         f"or its launch)")
    return nvidia_smi(kb) or Hardware()


def _config_report(kb: KnowledgeBase, unit: Unit, flags: Flags, with_plan: bool = False,
                   allow: tuple[str, ...] = (), root: Path | None = None,
                   version=None) -> tuple[UnitReport, Hardware]:
    fw = kb.frameworks[unit.framework]
    main_name = main_file(kb, unit.framework, unit.kind)
    main = unit.files[main_name]
    out = UnitReport(framework=unit.framework, kind=unit.kind, path=unit.rel,
                     file_kind=unit.file_kind, files={name: f.rel for name, f in unit.files.items()},
                     signs=unit.signs, notes=list(unit.notes))
    reading = read_options(kb, unit.framework, unit.files)
    hardware = hardware_for(kb, unit, reading, flags.fixed)
    model, model_source = model_for(kb, main.values, model_folders(unit, root), flags.forced)
    unseen = {o.key for o in kb.options_of(unit.framework)
              if o.emits and not any(e.target in unit.files for e in o.emits)}
    refused = {key for key, _, _, _ in reading.effects}  # what reads them is undecided
    refused |= {option for option, (_, key) in reading.where.items()
                if key in unit.missing or key in unit.outside}
    key_found, out.unknown_keys = find.key_findings(kb, unit.framework, main_name, main,
                                                    reading, unit.accepted, unit.launch.env)
    refused |= find.meant_options(kb, unit.framework, main_name, [  # Lora_target: lora_target
        f.id for f in key_found if f.kind == "refused"]) - reading.where.keys()
    ctx = build_context(kb, unit.framework, reading.values, hardware, model,
                        {key for key, _, _ in reading.odd} | unseen | refused, flags.host_ram)
    ctx.allowed = allowed_keys(kb, unit.framework, allow)
    ctx.odd = {key for key, _, _ in reading.odd} | refused
    out.fit, _ = fit_check(ctx)
    estimator = Estimator.for_context(ctx, ctx.allowed) \
        if out.fit.status != "undecided" and not out.fit.unknowns else None  # no cure on a guess
    out.checks = judge_config(ctx)
    scope = outside_fix_scope(kb, unit.framework, main.values)
    if scope is not None:  # an inference, export or v1 file: no training advice, no edit
        out.notes.append(f"not a training config by its keys: nothing is recommended or "
                         f"written ({scope.because})")
        for result in out.checks:
            if result.status == "recommended":
                result.status, result.reason = "not_applicable", "not a training config"
    out.needs_allow = weigh(ctx, out.checks, estimator)
    others = {c.id for c in code_checks(kb, unit.framework)}
    out.categories, out.score, out.points = score(kb, unit.framework, out.checks, others)
    out.recommendations = by_priority(out.checks)
    rejected = fw.unknown_keys == "error"
    enforced, advised = advice_apart(kb, unit.framework,
                                     find.rule_errors(ctx, reading, unit.files, version))
    refusals, ignored = find.effect_findings(kb, reading, unit.files)
    refusals += find.launch_findings(unit, hardware) + find.missing_keys(kb, unit.framework, main)
    refusals += find.unreadable_files(unit) + find.launcher_findings(kb, unit, main)
    refusals += find.override_findings(kb, unit) + find.misplaced_paths(unit)
    refusals += find.min_version_findings(unit, root)
    media = find.media_findings(kb, unit, main, root)  # dropped media: silent; refused: error
    refusals += find.missing_files(kb, unit.framework, unit.missing, main, unit.launch.directory,
                                   [e.rel for e in tree_files(root)] if unit.missing else [])
    quiet = ("no_op", "dropped")  # no_op: parsed, not read; dropped: a near miss, ignored
    refused_keys = [f for f in key_found if f.kind not in quiet]  # (or refused by newer versions)
    refusals += [f for f in media if f.kind == "media_template"]
    out.errors = enforced + (refused_keys if rejected else []) + refusals
    out.silent = ([f for f in key_found if f.kind in quiet] if rejected else key_found) + \
        ignored + [f for f in media if f.kind == "media_dropped"] + \
        find.value_findings(ctx, reading, unit.files, main_name) + advised
    out.silent, logged = logged_apart(kb, unit.framework, out.silent)
    if logged:  # not silent: the framework says them when the run starts
        out.notes.append(f"{unit.framework} warns at start-up: " +
                         "; ".join(f"{f.id} ({f.message})" for f in logged))
    for section, heading in (("estimate_caveats", "the estimate"),
                             ("environment_tips", "if your cluster")):
        out.silent, noted = notes_apart(kb, unit.framework, out.silent, section)
        if noted:  # about the estimate or the environment, not the config: one line
            out.notes.append(f"{heading}: " + "; ".join(f"{f.id} ({f.message})" for f in noted))
    out.silent, tips = notes_apart(kb, unit.framework, out.silent, "advice_tips")
    out.tips = [f"{f.id} ({f.message})" for f in tips]  # advice, no gain estimated: the tips line
    ordered = [r for p in AUTO_PRIORITIES for r in out.recommendations[p] if r.points > 0]
    broken = [f.id for f in out.errors if f.kind == "rule"]
    fixes = repair(ctx, broken, estimator)
    if broken and not fixes:  # a repair that changes what the user chose: named, not written
        out.notes += repair_note(ctx, broken, repair(ctx, broken, estimator, consent=False))
    chosen = choose(ctx, ordered, must_fit=out.fit.status == "fits", base=fixes, est=estimator)
    why = {key: "repairs " + ", ".join(f.id for f in out.errors if f.kind == "rule")
           for key in fixes}
    if out.fit.status == "oom" and estimator is not None:
        chosen, cured = cure_or_repairs(ctx, fixes, estimator, main_name)
        why.update({key: cured for key in chosen if cured and key not in fixes})
        if cured.startswith("the repair"):
            out.notes.append(f"{', '.join(broken)}: {cured}; nothing else is changed")
    for r in ordered:
        for name, _ in kb.checks[f"{unit.framework}.{r.id}"].recommend:
            why.setdefault(f"{unit.framework}.{name}", f"{r.priority} {r.id}: {r.title_en}")
    out.changes = [] if scope is not None else \
        changes(ctx, main_name, main, out.errors + out.silent, chosen, why)
    if root is not None and out.changes:  # paths from where the run starts: the root
        out.changes = ground_paths(ctx, main_name, out.changes, Path(root),
                                   Path(root) / unit.rel)
    out.changes_proven = bool(out.changes) and sound(
        ctx, chosen, must_fit=out.fit.status == "fits", consent=False, est=estimator)
    out.basic = _basic(kb, unit, ctx, reading, hardware, model)
    out.basic["framework"] = _follows(kb, unit.framework, version)
    if model is not None and model_source != "catalog":
        out.basic["model"] += f", from {model_source}"
    if with_plan:
        from kbsolve.audit.best_plan import best_plan, plan_query  # loads Z3
        out.plan = best_plan(ctx, plan_query(hardware, flags, model, model_source))
    out.undecided = _undecided(out, ctx, None if model is not None else model_source)
    through = sorted(reading.where[k][1] for k in reading.values
                     if kb.options[k].passthrough and k in reading.where)
    if through:  # one line, not a finding each: real keys the KB does not reason about
        out.notes.append("pass-through keys (kept as written, not modelled): "
                         + ", ".join(through))
    for key, candidates in reading.ambiguous:
        if key in ctx.odd:
            continue  # not judged at all (a missing file, a refused value)
        out.notes.append(f"{key.split('.', 1)[1]}: could be any of "
                         f"{', '.join(str(plain(c)) for c in candidates)}; "
                         f"taken as {plain(reading.values[key])}")
    for key, seen in reading.disagree:
        out.notes.append(f"{key.split('.', 1)[1]}: the files disagree ({'; '.join(seen)}); "
                         f"read as the first, {plain(reading.values[key])}")
    for key, yaml_key, raw in reading.outside:
        domain = kb.options[key].domain
        out.notes.append(f"{reading.span(unit.files, key) or unit.rel}: {yaml_key}: {raw!r} is "
                         f"outside the values the planner searches"
                         + (f" ({', '.join(str(plain(v)) for v in domain)})" if domain else "")
                         + "; judged as written")
    for key, yaml_key, raw in reading.odd:
        out.notes.append(f"{reading.span(unit.files, key) or unit.rel}: {yaml_key}: {raw!r} "
                         f"is not a value kbsolve knows; what reads it is undecided")
    return out, hardware


def tree_files(root: Path | None):
    """The project's files, for a "did you mean" (walked again only when needed)."""
    return walk(root).files if root is not None else []


def _follows(kb, framework: str, version) -> str:
    """Which version the verdicts follow: the KB's, and the project's when it says."""
    described = kb.frameworks[framework].version
    line = f"{framework} {described}".strip() + " (verdicts follow the KB's rules of this version)"
    if version is not None:
        kind = "pins" if version.pinned else "requires"
        line += f"; the project {kind} {version.version} ({version.where})"
        if version.pinned and version.version != described:
            line += ": rules limited to other versions are left out"
    return line


def _basic(kb, unit: Unit, ctx: Context, reading: Reading, hardware: Hardware, model) -> dict:
    fw = kb.frameworks[unit.framework]
    basic: dict = {"framework": f"{unit.framework} {fw.version}".strip()}
    basic["model"] = f"{model.name} ({model.params_b:g}B)" if model is not None else \
        "unknown (see Undecided)"
    if fw.task_option:
        key = f"{unit.framework}.{fw.task_option}"
        basic["task"] = f"{fw.task_option}: {plain(ctx.assignment.get(key))}"
    if hardware.gpu is not None:
        count = hardware.count or "?"
        basic["hardware"] = f"{hardware.gpu.name} x {count} ({hardware.gpu.memory_gib:g} GB), " \
                            f"from {hardware.source}"
    elif hardware.count:
        basic["hardware"] = f"{hardware.count} GPUs of unknown type, from {hardware.source}"
    else:
        basic["hardware"] = "unknown (give --gpus)"
    for option in kb.options_of(unit.framework):
        if isinstance(option.source_expr, ir.FactRef) and option.key in reading.values:
            basic[reading.where[option.key][1]] = plain(reading.values[option.key])
    if unit.launch.scripts:
        basic["launch"] = ", ".join(unit.launch.scripts)
    if unit.launch.env:
        basic["environment"] = " ".join(f"{k}={v}" for k, v in sorted(unit.launch.env.items()))
    return basic


def _undecided(out: UnitReport, ctx: Context, unknown_model: str | None) -> list[str]:
    """What is left open, and by what; an unknown model is said once, with
    everything that waits on it."""
    on_model: list[str] = []
    items: list[str] = []
    for name, reason in [(r.id, r.reason) for r in out.checks if r.status == "undecided"] + \
            ([("fit check", out.fit.reason)] if out.fit and out.fit.status == "undecided"
             else []):
        if unknown_model is not None and _model_only(reason):
            on_model.append(name)
        else:
            items.append(f"{name} ({reason})")
    missing = sorted(p for p in ctx.missing
                     if unknown_model is None or not p.startswith("model."))
    if missing:
        items.append("unknown facts: " + ", ".join(missing))
    if unknown_model is not None:
        items.insert(0, f"the model is unknown ({unknown_model}; give --model NAME, a "
                        f"config.json or a YAML spec); no verdict rests on a guess of it"
                        + (f": {', '.join(on_model)}" if on_model else ""))
    return items


def _model_only(reason: str) -> bool:
    """A reason that names only model facts ("needs model.params_b", "unknown: model.x, ...")."""
    names = reason.split(":", 1)[-1] if reason.startswith("unknown:") else \
        reason[len("needs "):] if reason.startswith("needs ") else ""
    parts = [p.strip() for p in names.split(",") if p.strip()]
    return bool(parts) and all(p.startswith("model.") for p in parts)
