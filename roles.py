"""The registry of roles: every KB name that Python relies on, read through the role the
KB declares for it (`role NAME = KIND ENTITY` or `role NAME = [numbers]`, docs/dsl.md
5.20), never by spelling the entity's name.

`kb check` (dsl/check.py) checks every declared role against this list: an unknown role,
a role pointing at an entity of the wrong kind or at no entity, and a role a framework
must declare but does not, are errors with the declaration's file:line. A framework
declares its own roles (kb/<fw>/roles.kb); a role declared in a core module
(kb/core/roles.kb) is the default every framework shares. tests/test_roles.py greps the
package for the entities' old spellings.

A leaf module, like diagnostic_codes.py: it imports nothing of kbsolve, so the checker
and every layer above it may read it; the accessors take the checked KB as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# the kind a role names -> the checked KB's table of that kind
TABLES = {"let": "lets", "option": "options", "memory": "memory", "speed": "speed",
          "work": "work", "rule": "rules", "warn": "warnings", "optin": "optins",
          "fact": "facts"}


@dataclass(frozen=True)
class Role:
    """A KB name Python relies on: its kind, meaning and the files that read it."""
    name: str
    kind: str  # a key of TABLES, "enum" or "value" (of the vocabulary), "values" (numbers)
    meaning: str  # one line: what Python does with it
    needs: tuple[str, ...] = ()  # roles a framework must declare once it declares this one
    core: bool = False  # declared once in a core module (values), not per framework
    used_in: tuple[str, ...] = ()  # the package's files that read it
    free: bool = False  # a probe of a shape the user sets freely: trying it proves nothing


ROLES: tuple[Role, ...] = (
    Role("batch_geometry", "let", "the global batch a configuration makes (micro-batch x "
         "accumulation x data-parallel ranks): the plan's batch line, the audit's "
         "batch-keeping changes", needs=("global_batch", "default_global_batch"),
         used_in=("program/batch.py", "plan/report.py", "audit/recommend.py",
                  "bench/recipe.py")),
    Role("global_batch", "let", "the recipe's global batch (the query's, else the default) "
         "that a rule holds equal to batch_geometry", needs=("batch_geometry",),
         used_in=("plan/report.py", "plan/run.py", "bench/recipe.py")),
    Role("default_global_batch", "let", "the framework's default global batch, cited as "
         "the batch's origin", used_in=("plan/report.py",)),
    Role("params", "let", "the model's parameter count the plan shows among the model's "
         "facts", core=True, used_in=("plan/run.py",)),
    Role("active_params", "let", "the parameters active per token (MoE) the plan shows",
         core=True, used_in=("plan/run.py",)),
    Role("tokens", "work", "the work term whose rate the plan reports as tokens per second",
         used_in=("plan/report.py",)),
    Role("samples", "work", "the work term whose rate the plan reports as samples per "
         "second", used_in=("plan/report.py",)),
    Role("error_band", "memory", "the GPU memory term that states the estimate's error "
         "band (dsl.md 5.10)", used_in=("plan/report.py",)),
    # the vocabulary's names the audit's consent reads
    Role("optin_groups", "enum", "the enum whose values name the optin groups --allow "
         "takes", core=True, used_in=("audit/consent.py",)),
    Role("recipe_group", "value", "the optin group a recipe change (batch, method) needs",
         core=True, used_in=("audit/symptom.py", "audit/fix_config.py")),
    # the cluster shapes a hardware fix tries (plan/run.py)
    Role("hardware_fix_multiples", "values", "multiples of the GPU count a hardware fix "
         "tries, cheapest first", core=True, used_in=("plan/run.py",)),
    Role("hardware_fix_max_gpus", "values", "the most GPUs a hardware fix proposes",
         core=True, used_in=("plan/run.py",)),
    Role("hardware_fix_gpus_per_node", "values", "GPUs per node once a hardware fix needs "
         "more than one node", core=True, used_in=("plan/run.py",)),
    Role("hardware_fix_bigger_gpus", "values", "how many bigger GPU types (same vendor) a "
         "hardware fix tries", core=True, used_in=("plan/run.py",)),
    # the query shapes `kb check --deep` probes (lint/situations.py)
    Role("probe_nodes", "values", "node counts the deep check tries", core=True,
         used_in=("lint/situations.py",)),
    Role("probe_gpus_per_node", "values", "GPUs per node the deep check tries", core=True,
         used_in=("lint/situations.py",)),
    Role("probe_frames", "values", "video frame counts the deep check tries", core=True,
         free=True,
         used_in=("lint/situations.py", "lint/symbolic.py")),
    Role("probe_height", "values", "image heights the deep check tries", core=True,
         free=True,
         used_in=("lint/situations.py", "lint/symbolic.py")),
    Role("probe_width", "values", "image widths the deep check tries", core=True,
         free=True,
         used_in=("lint/situations.py", "lint/symbolic.py")),
    Role("probe_seq_len", "values", "sequence lengths the deep check tries", core=True,
         free=True,
         used_in=("lint/situations.py", "lint/symbolic.py")),
)

BY_NAME = {r.name: r for r in ROLES}
PROBE_PREFIX = "probe_"  # probe_<query field>: the values the deep check tries for it


def declared(kb: Any, framework: str | None, role: str):
    """The checked role (dsl/kb.py Role) the framework declares, else the core default."""
    roles = kb.roles
    found = roles.get(f"{framework}.{role}") if framework else None
    return found if found is not None else roles.get(f"core.{role}")


def entity(kb: Any, framework: str | None, role: str):
    """The KB entity that plays `role` for the framework (None: it declares none)."""
    found = declared(kb, framework, role)
    if found is None or not found.target:
        return None
    return getattr(kb, TABLES[found.kind]).get(found.target)


def enum(kb: Any, role: str):
    """The vocabulary enum (catalog/vocab.py Enum) a core role names, or None."""
    assert BY_NAME[role].kind == "enum", role
    found = declared(kb, None, role)
    enums = getattr(kb.vocabulary, "enums", {}) if kb.vocabulary is not None else {}
    return enums.get(found.target) if found is not None else None


def value(kb: Any, role: str) -> str | None:
    """The enum value (`ENUM.VALUE`) a core role names, or None."""
    assert BY_NAME[role].kind == "value", role
    found = declared(kb, None, role)
    return found.target.split(".", 1)[1] if found is not None else None


def let(kb: Any, framework: str | None, role: str):
    assert BY_NAME[role].kind == "let", role
    return entity(kb, framework, role)


def term(kb: Any, framework: str | None, role: str):
    assert BY_NAME[role].kind == "memory", role
    return entity(kb, framework, role)


def values(kb: Any, role: str) -> tuple:
    """A core role's list of numbers, as ints where whole (empty: none declared)."""
    assert BY_NAME[role].kind == "values", role
    found = declared(kb, None, role)
    if found is None:
        return ()
    return tuple(int(v) if v == int(v) else v for v in found.values)


def free_shapes() -> set[str]:
    """The query facts of the shapes a user sets freely (sequence length, image size,
    frames): the few values the deep check probes cannot prove a condition on them."""
    return {f"query.{r.name.removeprefix(PROBE_PREFIX)}" for r in ROLES if r.free}


def probes(kb: Any) -> dict[str, tuple]:
    """The deep check's probe values per query field (`role probe_<field>`)."""
    return {r.name.removeprefix(PROBE_PREFIX): values(kb, r.name) for r in ROLES
            if r.name.startswith(PROBE_PREFIX)}
