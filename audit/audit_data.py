"""The KB's audit data (kb/<framework>/audit.yaml, next to the framework's
declaration), as the audit writes and reads it: the table itself is read by
program/repo_files.py, which --set shares."""

from __future__ import annotations

from typing import Any

from kbsolve.audit.mapping import FlatFile, plain, written_value
from kbsolve.diagnostics import KbError
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.repo_files import (FILE_NAME, AuditData, FixScope, MultiKey,  # noqa: F401
                                        RepoFile, audit_data, repository_file)


def as_file(kb: KnowledgeBase, framework: str, target: str, entry: RepoFile,
            rel: str, facts: dict[str, Any] | None = None) -> FlatFile:
    """The keys the entry's option values write into `target` (their emits and the
    top-level emits they decide), plus its settings: what `--emit` would write.
    A value that needs a fact (the model's bucket sizes) is None unless `facts`
    has it."""
    values: dict[str, Any] = dict(entry.settings)
    for key, value in entry.options.items():
        for emit in kb.options[key].emits:
            if emit.target == target:
                mapping = dict(emit.value_map) if emit.value_map is not None else {}
                out = mapping.get(value, value)
                if out is not None:
                    values[emit.key] = plain(out)
    defaults = {o.key: o.default for o in kb.options_of(framework)}
    assignment = {**defaults, **entry.options}
    evaluator = Evaluator(kb, framework, facts or {})
    from kbsolve.dsl.ir import options_used
    for static in kb.emits:
        if static.framework != framework or static.target != target or static.when is None \
                or not options_used(static.when) <= entry.options.keys():
            continue
        try:
            if not evaluator.run(static.when, assignment):
                continue
        except KbError:
            continue
        try:
            values.setdefault(static.key, plain(evaluator.run(static.value, assignment)))
        except KbError:  # a value that needs the model (a bucket size): the key is there
            values.setdefault(static.key, None)
    return FlatFile(rel, values)


def config_value(kb: KnowledgeBase, option, target: str, value) -> tuple[str, Any] | None:
    """(key, value) an option value writes into the config: `written_value`, except
    that a reference to a file kbsolve would write (ds_config.json) becomes the
    framework's own file for that value when the KB knows one (LlamaFactory's
    examples/deepspeed/ds_z3_config.json), since the user has no ds_config.json."""
    written = written_value(option, target, value)
    if written is None:
        return None
    paths = {f.path for f in kb.frameworks[option.framework].files}
    if isinstance(written[1], str) and written[1] in paths:
        for entry in audit_data(kb, option.framework).repository_files:
            others = {k: v for k, v in entry.options.items() if k != option.key}
            if entry.options.get(option.key) == value and \
                    all(kb.options[k].default == v for k, v in others.items()):
                return written[0], entry.path
    return written


def reference_change(kb: KnowledgeBase, framework: str, main_name: str, option_key: str,
                     after: dict[str, Any]) -> tuple[str, str] | None:
    """(main key, path) for an option that lives in another file the main config
    names (Flow-Factory's config_file: the accelerate or DeepSpeed file): the
    framework's own file whose option values the changed config has, if any."""
    option = kb.options[option_key]
    files = {f.name: f.path for f in kb.frameworks[framework].files}
    targets = {files.get(e.target) for e in option.emits if e.target != main_name}
    key = next((s.key for s in kb.emits if s.framework == framework and s.target == main_name
                and isinstance(getattr(s.value, "value", None), str)
                and s.value.value in targets), None)
    if key is None:
        return None
    for entry in audit_data(kb, framework).repository_files:
        if option_key in entry.options and \
                all(after.get(k, kb.options[k].default) == v for k, v in entry.options.items()):
            return key, entry.path
    return None


def outside_fix_scope(kb: KnowledgeBase, framework: str, values: dict[str, Any]) -> FixScope | None:
    """The KB's `fix_scope` entry (audit.yaml) that the config's keys do not meet,
    or None when `--fix` may write into it (a file the framework trains with)."""
    for scope in audit_data(kb, framework).fix_scope:
        if any(key in values for key in scope.refuses) or \
                any(_as_written(values.get(k)) != _as_written(v) for k, v in scope.requires.items()):
            return scope
    return None


def _as_written(value: Any) -> str:
    return str(value).strip().lower() if value is not None else ""


def advice_apart(kb: KnowledgeBase, framework: str, found: list) -> tuple[list, list]:
    """Rule findings the framework enforces (errors), and those of rules that are
    only its advice (audit.yaml advice_rules), as warnings."""
    advice = audit_data(kb, framework).advice_rules
    errors = [f for f in found if f.id not in advice]
    warned = [f.model_copy(update={"kind": "warning", "message": f"{f.message}: the framework's "
                                   f"advice, not enforced ({advice[f.id]})"})
              for f in found if f.id in advice]
    return errors, warned


def logged_apart(kb: KnowledgeBase, framework: str, found: list) -> tuple[list, list]:
    """Silent findings, and the KB warnings the framework logs itself at start-up
    (audit.yaml logged_warnings): those are not silent."""
    logged = audit_data(kb, framework).logged_warnings
    return [f for f in found if not (f.kind == "warning" and f.id in logged)], \
        [f for f in found if f.kind == "warning" and f.id in logged]


def notes_apart(kb: KnowledgeBase, framework: str, found: list, section: str
                ) -> tuple[list, list]:
    """Silent findings, and the KB warnings an audit.yaml section lists as notes:
    estimate_caveats (they qualify kbsolve's own figure) or environment_tips (they
    hold only in an environment the files do not show), or advice_tips (advice with no
    estimated gain, for the tips line): none says the config is wrong."""
    named = getattr(audit_data(kb, framework), section)
    return [f for f in found if not (f.kind == "warning" and f.id in named)], \
        [f for f in found if f.kind == "warning" and f.id in named]


def missing_required(kb: KnowledgeBase, framework: str, main: FlatFile) -> list:
    """The KB's required keys (audit.yaml required_keys) that the config lacks."""
    return [r for r in audit_data(kb, framework).required_keys
            if r.key not in main.values and
            all(_as_written(main.values.get(k)) == _as_written(v) for k, v in r.requires.items())]
