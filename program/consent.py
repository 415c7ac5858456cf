"""Consent: the KB's optins (changes to numerics, recipe or libraries) that a
query may make only when the user pins them or allows them (--allow)."""

from __future__ import annotations

from typing import Any, Iterable

from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean
from kbsolve.dsl.kb import KnowledgeBase, OptIn, Rule
from kbsolve.program.program import link


def optins(kb: KnowledgeBase, framework: str) -> list[OptIn]:
    return list(link(kb, framework).optins)


def allowed(kb: KnowledgeBase, framework: str, names: Iterable[str]) -> frozenset[str]:
    """The optin keys that `--allow NAME[,NAME]` allows; a name is an optin of the
    framework or a group (kb/core/vocabulary.kb, enum optin_group)."""
    mine = optins(kb, framework)
    groups = kb.vocabulary.enum_values("optin_group") if kb.vocabulary else ()
    found: set[str] = set()
    for raw in names:
        for name in (part.strip() for part in raw.split(",")):
            if not name:
                continue
            if name in groups:
                found |= {o.key for o in mine if o.group == name}
            elif any(o.name == name for o in mine):
                found.add(f"{framework}.{name}")
            else:
                choices = list(groups) + [o.name for o in mine]
                raise KbError(Diagnostic(
                    f"--allow {name}: not an optin of {framework} nor a group"
                    f"{did_you_mean(name, choices)} (choices: {', '.join(choices)})"))
    return frozenset(found)


WAIVER_LIMIT = 4096  # completions tried before the unpinned options take their defaults


def waived(kb: KnowledgeBase, optin: OptIn, evaluator, pins: dict[str, Any]) -> bool:
    """The user's pins make the change themselves, whatever the options they left
    free: pinning it is consent. A free option's default is not the user's word
    (Flow-Factory's default dynamics under a pinned NFT trainer is a change the plan
    must not make unasked)."""
    if not pins:
        return False
    import itertools
    import math
    program = link(kb, optin.framework)
    base = {**program.defaults, **pins}
    free = sorted(k for k in program.reads[("optins", optin.key)].options
                  if k not in pins and kb.options[k].domain is not None)
    domains = [kb.options[k].domain for k in free]
    if math.prod(len(d) for d in domains) > WAIVER_LIMIT:
        return bool(evaluator.run(optin.expr, base))
    return all(evaluator.run(optin.expr, {**base, **dict(zip(free, values))})
               for values in itertools.product(*domains))


def consent_rules(kb: KnowledgeBase, framework: str, evaluator, pins: dict[str, Any],
                  allow: frozenset[str]) -> tuple[Rule, ...]:
    """One forbid per optin that is neither allowed nor pinned."""
    return tuple(o.rule for o in optins(kb, framework)
                 if o.key not in allow and not waived(kb, o, evaluator, pins))


def needs_consent(kb: KnowledgeBase, framework: str, evaluator, assignment: dict[str, Any],
                  pins: dict[str, Any], allow: frozenset[str]) -> list[OptIn]:
    """The optins a configuration makes that are neither pinned nor allowed (for
    cures and fixes: a change offered to the user must not make them)."""
    return [o for o in optins(kb, framework)
            if o.key not in allow and not waived(kb, o, evaluator, pins)
            and evaluator.run(o.expr, assignment)]


def consent_detail(kb: KnowledgeBase, framework: str, rule_key: str, value: str = "") -> str:
    """How a consent rule reads in an explanation ('' for other rules)."""
    found = link(kb, framework).optin_of(rule_key)
    if found is None:
        return ""
    what = f"{value} is" if value else "it is"
    return f"{what} a {found.group} change ({found.meta.doc.rstrip('.')}): pin it, or pass " \
           f"--allow {found.name}"
