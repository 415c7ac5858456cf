"""`kbsolve fix CONFIG --symptom S` and `kbsolve audit --fix`: find the changes,
write them only when asked, and re-audit the written file as proof."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from kbsolve import roles
from kbsolve.audit.assess import build_context
from kbsolve.audit.consent import allowed_keys, check_allow
from kbsolve.audit.fix import apply_changes
from kbsolve.audit.audit_data import config_value, outside_fix_scope, reference_change
from kbsolve.audit.mapping import plain, read_options
from kbsolve.audit.flags import Flags
from kbsolve.audit.model_lookup import model_folders, model_for
from kbsolve.audit.new_files import ground_paths
from kbsolve.audit.read_project import read_project
from kbsolve.audit.run import audit_project, hardware_for
from kbsolve.audit.fit import fit_check
from kbsolve.audit.symptom import suggest
from kbsolve.audit.walk import walk
from kbsolve.diagnostics import Diagnostic, KbError
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.results.audit import AuditReport, Change, Fit, Written
from kbsolve.results.fix import FixResult, NeedsAllow, Suggested


def fix_config(kb: KnowledgeBase, config: str, symptom: str, gpus: str | None,
               write: bool, allow: tuple[str, ...] = (), flags: Flags | None = None
               ) -> FixResult:
    allow = check_allow(kb, allow)
    flags = (flags or Flags()).resolve(kb, gpus)
    path = Path(config)
    if not path.is_file():
        raise KbError(Diagnostic(f"{config}: no such config file"))
    tree = walk(path.resolve().parent)
    rel = path.resolve().name
    project = read_project(kb, tree)
    unit = next((u for u in project.units if u.kind == "config" and u.rel == rel), None)
    if unit is None:
        kind = next((line.split(": ", 1)[1] for line in project.not_audited
                     if line.startswith(rel + ": ")), "not a training config of a framework "
                                                       "kbsolve knows")
        raise KbError(Diagnostic(f"{config}: {kind}"))
    main_name = next(f.name for f in kb.frameworks[unit.framework].files if f.kind == "yaml")
    scope = outside_fix_scope(kb, unit.framework, unit.files[main_name].values)
    if scope is not None:
        raise KbError(Diagnostic(f"{config}: not a training config by its keys, so kbsolve fix "
                                 f"changes nothing in it ({scope.because})"))
    reading = read_options(kb, unit.framework, unit.files)
    hardware = hardware_for(kb, unit, reading, flags.fixed)
    model, _ = model_for(kb, unit.files[main_name].values, model_folders(unit, tree.root),
                         flags.forced)
    ctx = build_context(kb, unit.framework, reading.values, hardware, model,
                        host_ram=flags.host_ram)
    before, _ = fit_check(ctx)
    if before.status == "undecided":
        raise KbError(Diagnostic(f"{config}: cannot judge memory and speed ({before.reason}); "
                                 f"give --gpus (or --gpu-spec) and --model when the config's "
                                 f"model is not in the catalog"))
    _, found, held = suggest(ctx, symptom, allowed_keys(kb, unit.framework, allow),
                             recipe_allowed=roles.value(kb, "recipe_group") in allow)
    result = FixResult(config=str(path), symptom=symptom, framework=unit.framework,
                       before=before)
    for s in found:
        result.suggestions.append(Suggested(changes=_shown(kb, main_name, s.changes, ctx),
                                            device_gib=s.device_gib,
                                            budget_gib=s.budget_gib,
                                            speed_delta_pct=s.speed_delta_pct,
                                            saved_gib=s.saved_gib, reasons=s.reasons,
                                            fits=s.fits))
    for h in held:
        result.needs_allow.append(NeedsAllow(changes=_shown(kb, main_name, h.changes, ctx),
                                             allow=h.needs, effect=h.summary))
    if write and found:
        best = found[0].changes
        changes = []
        for key, value in best.items():
            option = kb.options[key]
            home = next((e.key for e in option.emits if e.target == main_name), None)
            moved = reference_change(kb, unit.framework, main_name, key,
                                     ctx.with_changes(best)) if home is None else None
            if moved is not None:  # the framework's own file for the new values
                if not any(c.key == moved[0] for c in changes):
                    changes.append(Change(key=moved[0], new=moved[1]))
                continue
            if home is None:  # an environment variable or another file's key: the user's
                result.manual.append(f"{option.name}: {_plain_text(value)} (not a key of "
                                     f"{path.name}; set it where the run is launched)")
                continue
            written = config_value(kb, option, main_name, value)
            changes.append(Change(key=home, new=written[1] if written else None,
                                  removed=written is None))
        changes = ground_paths(ctx, main_name, changes, path.resolve().parent, path.resolve())
        result.written, result.backup, result.created = apply_changes(path, changes)
        again = audit_project(kb, str(path), allow=allow, flags=flags).units[0]
        result.after = again.fit
        result.errors_after = [f.message for f in again.errors]
    return result


def _plain_text(value: Any) -> str:
    value = plain(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _shown(kb: KnowledgeBase, main_name: str, changes: dict[str, Any],
           ctx=None) -> dict[str, Any]:
    """Option changes as the config's keys and values."""
    keys = {}
    for key, value in changes.items():
        moved = reference_change(kb, kb.options[key].framework, main_name, key,
                                 ctx.with_changes(changes)) if ctx is not None else None
        if moved is not None and not any(e.target == main_name
                                         for e in kb.options[key].emits):
            keys[moved[0]] = moved[1]
            continue
        written = config_value(kb, kb.options[key], main_name, value)
        keys[written[0] if written else kb.options[key].name] = \
            written[1] if written else plain(value)
    return keys


def fix_project(kb: KnowledgeBase, report: AuditReport) -> dict[str, Written]:
    """Apply each config's recommended changes (`kbsolve audit --fix`)."""
    written = {}
    root = Path(report.path)
    for unit in report.units:
        if unit.kind != "config" or not unit.changes:
            continue
        target = root / unit.path if root.is_dir() else root
        keys, backup, created = apply_changes(target, unit.changes)
        if keys:
            written[posixpath.normpath(unit.path)] = Written(keys=keys, backup=backup,
                                                             created=created)
    return written
