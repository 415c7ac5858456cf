"""One solve's inputs: the framework's options split into fixed and chosen,
the facts, and the constraints and terms that apply."""

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import Diagnostic, KbError, did_you_mean
from kbsolve.dsl.ir import facts_used
from kbsolve.dsl.kb import KnowledgeBase, Option
from kbsolve.program.evaluate import Evaluator, facts_read, options_read
from kbsolve.program.program import Program, link, memory_levels

MAX_RANGE_CHOICES = 256


@dataclass
class Problem:
    """A query's search problem: facts, fixed options, choices and budgets."""
    kb: KnowledgeBase
    framework: str
    facts: dict[str, Any]
    fixed: dict[str, Any]  # option key -> value (pinned, free or `from`)
    choices: dict[str, tuple]  # option key -> candidate values
    pinned: dict[str, Any] = field(default_factory=dict)
    budget_bytes: Fraction = Fraction(0)
    host_budget_bytes: Fraction | None = None  # CPU RAM per GPU process, when known
    objective: str = "speed"  # speed | memory: what sort_key puts first
    consent: tuple = ()  # Rules: the optins that are neither pinned nor allowed
    host_budget_source: str = ""  # "--host-ram" or "the assumed node"
    defaulted: frozenset = frozenset()  # pins the query made itself (the default task)
    by_task: str | None = None  # the option --task pinned

    def pin_detail(self, key: str) -> str:
        """Why a pinned option has its value, in words that are true."""
        option = self.kb.options[key]
        value = self.pinned[key]
        if isinstance(value, Fraction):
            value = int(value) if value.denominator == 1 else float(value)
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        if key in self.defaulted:
            return f"{option.name}={shown}: the framework's default task (--task changes it)"
        if key == self.by_task:
            return f"{option.name}={shown}: --task {shown}"
        return f"you set {option.name}={shown}"

    @functools.cached_property
    def program(self) -> Program:
        """The framework's linked program (built once per KB and framework)."""
        return link(self.kb, self.framework)

    @functools.cached_property
    def memory_inner_first(self) -> tuple:
        """The program's memory terms, innermost level first (a stable sort), as
        measure() adds them up: sorted once a problem, not once a measure."""
        order = memory_levels(self.kb)
        return tuple(sorted(self.program.memory, key=lambda t: order.index(t.level)))

    @property
    def rules(self) -> list:
        """The framework's rules, then one per optin that needs consent."""
        return [*self.program.rules, *self.consent]

    def rule(self, key: str):
        """A rule by 'framework.id', consent rules included."""
        found = self.program.get("rules", key)
        if found is None:
            found = next((r for r in self.consent if f"{r.framework}.{r.id}" == key), None)
        if found is None:
            raise KeyError(key)
        return found

    @functools.cached_property
    def evaluator(self) -> Evaluator:
        """One evaluator per problem, so that its let store is shared."""
        return Evaluator(self.kb, self.framework, self.facts)

    @property
    def options(self) -> list[Option]:
        return list(self.program.options)

    @property
    def throughput_work(self):
        """The work term speed is measured in: the first plain count (tokens, samples)."""
        counts = [w for w in self.program.work if w.expr.type.dim == (0, 0, 0)]
        return counts[0] if counts else None


def build_problem(kb: KnowledgeBase, framework: str, facts: dict[str, Any],
                  pins: dict[str, Any]) -> Problem:
    evaluator = Evaluator(kb, framework, facts)
    fixed: dict[str, Any] = {}
    choices: dict[str, tuple] = {}
    program = link(kb, framework)
    options = {o.key: o for o in program.options}
    for key, value in pins.items():
        if key not in options:
            raise KbError(Diagnostic(f"unknown option '{key.split('.', 1)[1]}' for {framework}"))
    for key, option in sorted(options.items()):
        if key in pins and (option.passthrough or option.domain is None and option.low is None):
            fixed[key] = pins[key]
        elif key in pins:  # kept as a choice so that a clash names the pin
            values = tuple(option.domain) if option.domain is not None else ()
            # a value the framework takes beyond the search's set (bound) joins it
            choices[key] = values + ((pins[key],) if pins[key] not in values else ())
        elif option.source_expr is not None:
            fixed[key] = _from_facts(option, evaluator, _task_pin(kb, framework, pins))
        elif option.domain is not None:
            choices[key] = tuple(option.domain)
        elif option.low is not None and option.high - option.low < MAX_RANGE_CHOICES:
            choices[key] = tuple(Fraction(v) for v in range(int(option.low),
                                                             int(option.high) + 1))
        else:
            fixed[key] = option.default
    for key in sorted(set(choices) - program.relevant - set(pins)):
        fixed[key] = options[key].default  # nothing depends on it: the default wins the tie
        del choices[key]
    budget = facts.get("gpu.memory_gib", Fraction(0)) * (1 - Fraction(facts.get(
        "query.headroom_pct", kb.vocabulary.default("query.headroom_pct")), 100))
    return Problem(kb, framework, facts, fixed, choices, dict(pins), budget)


def unset_values(problem: Problem) -> dict[str, Any]:
    """What an estimate gives the options it is not told: the default, unless the
    rules that read that option and the model alone refuse it; then the first value
    of its domain they allow (diffusers' script follows the model's family). A rule
    that also reads the query or the hardware judges the user's config: it stays."""
    values: dict[str, Any] = {}
    base = {**{o.key: o.default for o in problem.options}, **problem.fixed, **problem.pinned}
    program = problem.program
    reads = [(r, program.reads[("rules", f"{r.framework}.{r.id}")]) for r in program.rules]
    readers = [(r, read) for r, read in reads if all(f.startswith("model.") for f in read.facts)]
    for key, choices in problem.choices.items():
        if key in problem.pinned:
            continue
        own = [r for r, read in readers if read.options == {key}]
        run = problem.evaluator.run
        allowed = [v for v in choices if all(run(r.constraint, {**base, key: v}) for r in own)]
        default = problem.kb.options[key].default
        values[key] = default if default in allowed or not allowed else allowed[0]
    return values


SATISFIABLE_LIMIT = 100_000  # assignments tried per rule before giving up the check


def check_satisfiable(problem: Problem, fact: str, flag: str) -> None:
    """Bad input: a query value that no assignment of the options a rule reads can
    meet (alone, before any search), e.g. a global batch that no micro-batch x
    accumulation x data-parallel split makes. Names the rule and nearby values."""
    for rule in problem.rules:
        if fact not in facts_read(problem.kb, rule.constraint):
            continue
        if _holds_somewhere(problem, problem.facts, rule) is not False:
            continue
        near = [v for v in _nearby(problem.facts[fact], problem.facts.get("query.num_gpus", 1))
                if _holds_somewhere(problem, {**problem.facts, fact: Fraction(v)}, rule)]
        hint = f"; values that can: {', '.join(str(v) for v in near[:4])}" if near else ""
        what = rule.meta.doc or rule.meta.because
        raise KbError(Diagnostic(f"{flag}: no configuration meets rule {rule.id} on "
                                 f"{problem.facts.get('query.num_gpus', 1)} GPUs "
                                 f"({what}){hint}"))


def _holds_somewhere(problem: Problem, facts: dict, rule) -> bool | None:
    """Whether some assignment of the rule's options satisfies it and the consent
    rules on those options (None: too many to try)."""
    reads = sorted(k for k in options_read(problem.kb, rule.constraint) if k in problem.choices)
    consent = [c for c in problem.consent if options_read(problem.kb, c.constraint) <= set(reads)]
    if math.prod(len(problem.choices[k]) for k in reads) > SATISFIABLE_LIMIT:
        return None
    base = {**{o.key: o.default for o in problem.options}, **problem.fixed, **problem.pinned}
    return satisfiable(problem, [rule, *consent], reads, base,
                       Evaluator(problem.kb, problem.framework, facts))


def satisfiable(problem: Problem, rules: list, keys: list[str], assignment: dict,
                evaluator: Evaluator | None = None) -> bool:
    """Some values of the options `keys` (over their choices), the rest as in
    `assignment`, meet every rule."""
    import itertools
    run = (evaluator or problem.evaluator).remembered  # by the values each rule reads
    for values in itertools.product(*(problem.choices[k] for k in keys)):
        full = {**assignment, **dict(zip(keys, values))}
        if all(run(r.constraint, full) for r in rules):
            return True
    return False


def _nearby(value, ranks) -> list[int]:
    """Candidates around a bad value: its neighbours, and multiples of the rank count."""
    centre, ranks = int(value), int(ranks)
    around = range(max(1, centre // 2), centre * 2 + 1)
    multiples = range(ranks, ranks * max(4, 2 * centre // ranks + 1) + 1, ranks)
    found = sorted(set(around[:64]) | set(multiples[:8]), key=lambda v: (abs(v - centre), v))
    return [v for v in found if v != centre][:48]


def _task_pin(kb: KnowledgeBase, framework: str, pins: dict[str, Any]) -> dict[str, Any]:
    """The task option's value (a query always pins it, else its default)."""
    task = kb.frameworks[framework].task_option if framework in kb.frameworks else None
    if not task:
        return {}
    key = f"{framework}.{task}"
    return {key: pins.get(key, kb.options[key].default)}


def _from_facts(option: Option, evaluator: Evaluator, task: dict[str, Any] | None = None):
    """An option tied to facts (and the task, fixed before any search: a recipe per
    trainer); the default when the catalog lacks the fact."""
    needed = facts_used(option.source_expr)
    if options_read(evaluator.kb, option.source_expr) - set(task or {}):
        return option.default  # it follows options: program/recipe.py settles it after the search
    if any(path not in evaluator.facts for path in needed):
        return option.default
    return _coerce(option, evaluator.run(option.source_expr, dict(task or {})))


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
    option = kb.options.get(key) or _by_emitted_key(kb, framework, name)
    if option is None:
        by_alias = {a.old: o for o in link(kb, framework).options for a in o.aliases}
        if name in by_alias:
            real = by_alias[name]
            raise KbError(Diagnostic(f"--set {name}: the real option is '{real.name}' "
                                     f"({next(a.note for a in real.aliases if a.old == name)})"))
        names = [o.name for o in link(kb, framework).options]
        raise KbError(Diagnostic(f"--set {name}: unknown option of {framework}"
                                 f"{did_you_mean(name, names)}"))
    value = _pin_value(option, name, raw, kb)
    if option.passthrough and option.type.kind == "num" and option.type.integral and \
            Fraction(value).denominator != 1:
        raise KbError(Diagnostic(f"--set {name}={raw}: {name} takes a whole number "
                                 f"({framework} declares it int)"))
    return option.key, value


def _by_emitted_key(kb: KnowledgeBase, framework: str, name: str) -> Option | None:
    """The option that writes key `name` (the key a plan's table shows), when only one
    option of the framework writes it: `distributed_type` for the accelerate file's."""
    found = {o.key: o for o in link(kb, framework).options for e in o.emits if e.key == name}
    return next(iter(found.values())) if len(found) == 1 else None


def fact_binding(kb: KnowledgeBase, option: Option) -> str | None:
    """The query fact an option is bound to: its `from` is exactly that fact."""
    from kbsolve.dsl.ir import FactRef
    node = option.source_expr
    if isinstance(node, FactRef) and node.path.startswith("query."):
        return node.path
    return None


def _pin_value(option: Option, name: str, raw: str, kb: KnowledgeBase | None = None):
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
        if not option.accepts(value):
            what = f"{name} takes {option.valid_values()}" if option.bounds else \
                f"outside the domain ({option.valid_values()})"
            raise KbError(Diagnostic(f"--set {name}={raw}: {what}"))
        return value
    typed = typed_value(kb, option, raw)
    if typed is not None:
        return typed[0]
    if option.domain is not None and raw not in option.domain:
        files = _repository_files(kb, option)
        known = f" (the framework's own files it reads: {', '.join(files)})" \
            if files and ("/" in raw or "." in raw) else ""
        raise KbError(Diagnostic(f"--set {name}={raw}: not a value of {name}"
                                 f"{did_you_mean(raw, [str(v) for v in option.domain])}{known}"))
    return raw


def typed_value(kb: KnowledgeBase | None, option: Option, raw: str) -> tuple[Any, str] | None:
    """(value, note) for a string that is not one of the option's values but stands
    for one: an old spelling (`alias value`: deepspeed=zero3 is z3) or the
    framework's own file (kb/<framework>/audit.yaml: deepspeed=
    examples/deepspeed/ds_z3_config.json is z3, also as ds_z3_config.json). None when
    `raw` is a value or stands for none."""
    if option.domain is not None and raw in option.domain:
        return None
    for alias in option.value_aliases:
        if str(alias.old).lower() == raw.lower():
            why = f" ({alias.note})" if alias.note else ""
            return alias.new, f"{option.name}={raw} read as {alias.new}{why}"
    written = _as_written_list(option, raw)
    if written is not None:
        return written
    if kb is None or option.framework not in kb.frameworks:
        return None
    from kbsolve.program.repo_files import audit_data, repository_file
    entry = repository_file(kb, option.framework, raw)
    if entry is None and "/" not in raw.strip():
        named = [e for e in audit_data(kb, option.framework).repository_files
                 if e.path.rsplit("/", 1)[-1] == raw.strip()]
        entry = named[0] if len(named) == 1 else None
    if entry is None or option.key not in entry.options:
        return None
    value = entry.options[option.key]
    others = ", ".join(f"{kb.options[k].name}={v}" for k, v in entry.options.items()
                       if k != option.key)
    also = f"; the file also stands for {others}, which --set pins separately" if others else ""
    return value, (f"{option.name}={raw} read as {value}: {entry.path} has {entry.because} "
                   f"({entry.source}){also}")


def _as_written_list(option: Option, raw: str) -> tuple[Any, str] | None:
    """A list as the framework's file writes it (`transformer,transformer_2`, or
    `[transformer, transformer_2]`): the value whose emit writes that list."""
    items = [part.strip().strip("'\"") for part in raw.strip().strip("[]").split(",")]
    if len(items) < 2:
        return None
    for emit in option.emits:
        for value, out in (emit.value_map or ()):
            if isinstance(out, (list, tuple)) and [str(x) for x in out] == items:
                return value, (f"{option.name}={raw} read as {value}: the list {emit.key} "
                               f"takes for it")
    return None


def _repository_files(kb: KnowledgeBase | None, option: Option) -> list[str]:
    if kb is None or option.framework not in kb.frameworks:
        return []
    from kbsolve.program.repo_files import audit_data
    return [e.path for e in audit_data(kb, option.framework).repository_files
            if option.key in e.options]


def pin_note(kb: KnowledgeBase, framework: str, text: str) -> str:
    """The note for a --set whose value was read as another (typed_value), else ''."""
    name, sep, raw = (part.strip() for part in text.partition("="))
    option = kb.options.get(f"{framework}.{name}") or _by_emitted_key(kb, framework, name)
    if not sep or option is None or option.type.kind in ("bool", "num"):
        return ""
    typed = typed_value(kb, option, raw)
    return typed[1] if typed else ""
