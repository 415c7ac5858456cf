"""Consent for the audit's changes: the KB's optins (program/consent.py) read
against the user's own config. The config is the user's pins, so a change that
moves an option an optin reads, while the optin holds before or after (full ->
LoRA, rank 16 -> 8, fp8 on), changes the recipe, the numerics or the libraries,
and is offered only with `--allow NAME` or `--allow GROUP`."""

from __future__ import annotations

from typing import Any, Iterable

from kbsolve import roles
from kbsolve.audit.assess import Context, Undecided, needs
from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean
from kbsolve.dsl.kb import KnowledgeBase

def optins(kb: KnowledgeBase, framework: str) -> list:
    """The framework's optins (kb.optins: 'framework.name' -> OptIn), by name."""
    table = getattr(kb, "optins", None) or {}
    return [o for _, o in sorted(table.items()) if o.framework == framework]


def groups(kb: KnowledgeBase) -> tuple[str, ...]:
    found = roles.enum(kb, "optin_groups")  # kb/core/roles.kb: what an optin changes
    return tuple(found.values) if found else ()


def check_allow(kb: KnowledgeBase, names: Iterable[str]) -> tuple[str, ...]:
    """The names of `--allow NAME[,NAME]`, each an optin of some framework or a
    group; anything else is a usage error (exit 2) with a suggestion."""
    kinds = groups(kb)
    known = sorted({o.name for o in (getattr(kb, "optins", None) or {}).values()})
    found = []
    for raw in names:
        for name in (part.strip() for part in str(raw).split(",")):
            if not name:
                continue
            if name not in kinds and name not in known:
                raise KbError(Diagnostic(
                    f"--allow {name}: not an optin nor a group"
                    f"{did_you_mean(name, list(kinds) + known)} (groups: "
                    f"{', '.join(kinds) or 'none'}; optins: {', '.join(known) or 'none'})"))
            found.append(name)
    return tuple(found)


def allowed_keys(kb: KnowledgeBase, framework: str, names: Iterable[str]) -> frozenset[str]:
    """The framework's optin keys the names allow (names of other frameworks' optins
    allow nothing here)."""
    kinds, names = groups(kb), set(names)
    return frozenset(f"{o.framework}.{o.name}" for o in optins(kb, framework)
                     if o.name in names or (o.group in names and o.group in kinds))


def needing_consent(ctx: Context, changes: dict[str, Any],
                    allowed: frozenset[str] | None = None) -> list:
    """The optins a change makes or unmakes on the user's config that are not
    allowed (default: the audit's --allow, ctx.allowed). An optin that cannot be
    decided (a fact is unknown) counts as made."""
    allowed = ctx.allowed if allowed is None else allowed
    found = []
    after = ctx.with_changes(changes)
    for optin in optins(ctx.kb, ctx.framework):
        if f"{optin.framework}.{optin.name}" in allowed or not (needs(ctx.kb, optin.expr)[1] & changes.keys()):
            continue
        try:
            moved = bool(ctx.run(optin.expr)) or bool(ctx.run(optin.expr, after))
        except Undecided:
            moved = True
        if moved:
            found.append(optin)
    return found


def describe(items: list) -> str:
    """'fp8 (numerics), method (recipe)': what --allow would name."""
    return ", ".join(f"{o.name} ({o.group})" for o in items)
