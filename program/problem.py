"""One solve's inputs: the framework's options split into fixed and chosen,
the facts, and the constraints and terms that apply."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean
from kbsolve.dsl.ir import facts_used
from kbsolve.dsl.kb import KnowledgeBase, Option
from kbsolve.program.evaluate import Evaluator, options_read

MAX_RANGE_CHOICES = 256


@dataclass
class Problem:
    kb: KnowledgeBase
    framework: str
    facts: dict[str, Any]
    fixed: dict[str, Any]  # option key -> value (pinned, free or `from`)
    choices: dict[str, tuple]  # option key -> candidate values
    pinned: dict[str, Any] = field(default_factory=dict)
    budget_bytes: Fraction = Fraction(0)
    host_budget_bytes: Fraction | None = None  # CPU RAM per GPU process, when known
    objective: str = "speed"  # speed | memory: what sort_key puts first

    @functools.cached_property
    def evaluator(self) -> Evaluator:
        """One evaluator per problem, so that its let store is shared."""
        return Evaluator(self.kb, self.framework, self.facts)

    def items(self, table: dict) -> list:
        return [v for k, v in sorted(table.items()) if v.framework == self.framework]

    @property
    def options(self) -> list[Option]:
        return self.items(self.kb.options)

    @property
    def throughput_work(self):
        """The work term speed is measured in: the first plain count (tokens, samples)."""
        counts = [w for w in self.items(self.kb.work) if w.expr.type.dim == (0, 0, 0)]
        return counts[0] if counts else None


def build_problem(kb: KnowledgeBase, framework: str, facts: dict[str, Any],
                  pins: dict[str, Any]) -> Problem:
    evaluator = Evaluator(kb, framework, facts)
    fixed: dict[str, Any] = {}
    choices: dict[str, tuple] = {}
    options = {o.key: o for o in kb.options.values() if o.framework == framework}
    for key, value in pins.items():
        if key not in options:
            raise KbError(Diagnostic(f"unknown option '{key.split('.', 1)[1]}' for {framework}"))
    for key, option in sorted(options.items()):
        if key in pins and option.domain is None and option.low is None:
            fixed[key] = pins[key]
        elif key in pins:  # kept as a choice so that a clash names the pin
            choices[key] = tuple(option.domain) if option.domain is not None else (pins[key],)
        elif option.source_expr is not None:
            fixed[key] = _from_facts(option, evaluator)
        elif option.domain is not None:
            choices[key] = tuple(option.domain)
        elif option.low is not None and option.high - option.low < MAX_RANGE_CHOICES:
            choices[key] = tuple(Fraction(v) for v in range(int(option.low),
                                                             int(option.high) + 1))
        else:
            fixed[key] = option.default
    for key in sorted(set(choices) - _relevant(kb, framework) - set(pins)):
        fixed[key] = options[key].default  # nothing depends on it: the default wins the tie
        del choices[key]
    budget = facts.get("gpu.memory_gib", Fraction(0)) * (1 - Fraction(facts.get(
        "query.headroom_pct", kb.vocabulary.default("query.headroom_pct")), 100))
    return Problem(kb, framework, facts, fixed, choices, dict(pins), budget)


def _relevant(kb: KnowledgeBase, framework: str) -> set[str]:
    """Options that some rule, term or preference reads, through lets and the
    `when` of options so read. The others cannot change the objective, except
    the count of defaults kept, which their default already maximises."""
    mine = [t for table in (kb.memory, kb.speed, kb.work, kb.preferences)
            for t in table.values() if t.framework == framework]
    roots = [r.constraint for r in kb.rules.values() if r.framework == framework]
    roots += [t.expr for t in mine]
    used: set[str] = set()
    for root in roots:
        used |= options_read(kb, root)
    pending = list(used)
    while pending:  # the `when` of an option that matters matters too
        option = kb.options.get(pending.pop())
        if option is not None and option.when is not None:
            new = options_read(kb, option.when) - used
            used |= new
            pending += new
    return used


def _from_facts(option: Option, evaluator: Evaluator):
    """An option tied to facts; the default when the catalog lacks the fact."""
    needed = facts_used(option.source_expr)
    if options_read(evaluator.kb, option.source_expr):
        return option.default  # it follows options: program/recipe.py settles it after the search
    if any(path not in evaluator.facts for path in needed):
        return option.default
    return _coerce(option, evaluator.run(option.source_expr, {}))


def _coerce(option: Option, value):
    if option.type.kind == "num" and option.type.integral:
        return Fraction(value)
    return value


def parse_pin(kb: KnowledgeBase, framework: str, text: str) -> tuple[str, Any]:
    """`key=value` from --set, checked against the option's domain."""
    if "=" not in text:
        raise KbError(Diagnostic(f"--set '{text}' is not key=value"))
    name, raw = (part.strip() for part in text.split("=", 1))
    key = f"{framework}.{name}"
    option = kb.options.get(key)
    if option is None:
        by_alias = {a.old: o for o in kb.options.values() if o.framework == framework
                    for a in o.aliases}
        if name in by_alias:
            real = by_alias[name]
            raise KbError(Diagnostic(f"--set {name}: the real option is '{real.name}' "
                                     f"({next(a.note for a in real.aliases if a.old == name)})"))
        names = [o.name for o in kb.options.values() if o.framework == framework]
        raise KbError(Diagnostic(f"--set {name}: unknown option of {framework}"
                                 f"{did_you_mean(name, names)}"))
    return key, _pin_value(option, name, raw)


def _pin_value(option: Option, name: str, raw: str):
    kind = option.type.kind
    if kind == "bool":
        lowered = raw.lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise KbError(Diagnostic(f"--set {name}={raw}: {name} takes true or false"))
    if kind == "num":
        try:
            value = Fraction(raw)
        except (ValueError, ZeroDivisionError):
            raise KbError(Diagnostic(f"--set {name}={raw}: {name} takes a number")) from None
        if option.domain is not None and value not in option.domain:
            shown = ", ".join(str(v) for v in option.domain)
            raise KbError(Diagnostic(f"--set {name}={raw}: outside the domain ({shown})"))
        if option.low is not None and not option.low <= value <= option.high:
            raise KbError(Diagnostic(f"--set {name}={raw}: outside {option.low}..{option.high}"))
        return value
    for alias in option.value_aliases:
        if str(alias.old).lower() == raw.lower():
            raise KbError(Diagnostic(f"--set {name}={raw}: use '{alias.new}' ({alias.note})"))
    if option.domain is not None and raw not in option.domain:
        raise KbError(Diagnostic(f"--set {name}={raw}: not a value of {name}"
                                 f"{did_you_mean(raw, [str(v) for v in option.domain])}"))
    return raw
