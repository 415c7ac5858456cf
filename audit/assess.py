"""One config in the solver's terms: facts, the full option assignment, and an
evaluator that says 'undecided' instead of failing when a fact is unknown."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kbsolve.audit.hardware import Hardware
from kbsolve.diagnostics import KbError
from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.program import reads
from kbsolve.program.query import config_facts, host_budget


class Undecided(Exception):
    """A formula needs a fact the audit does not know (the GPU or the model)."""


@dataclass
class Context:
    kb: KnowledgeBase
    framework: str
    facts: dict[str, Any]
    assignment: dict[str, Any]  # every option of the framework
    user: dict[str, Any]  # the options the config sets
    missing: set[str] = field(default_factory=set)  # facts asked for but unknown
    unread: set[str] = field(default_factory=set)  # options set to values the KB lacks
    allowed: frozenset[str] = frozenset()  # optin keys the user allows (--allow)
    odd: set[str] = field(default_factory=set)  # options written as values the KB lacks
    host_budget: Fraction | None = None  # CPU RAM per GPU process (--host-ram), bytes
    _verdicts: dict | None = field(default=None, repr=False)  # rule id -> holds now?

    def run(self, node: ir.Node, assignment: dict[str, Any] | None = None) -> Any:
        facts, options = needs(self.kb, node)
        absent = {p for p in facts if p not in self.facts}
        if absent:
            self.missing |= absent
            raise Undecided(", ".join(sorted(absent)))
        odd = self.unread & options
        if odd:
            raise Undecided("a value the KB does not model: " + ", ".join(
                sorted(k.split(".", 1)[1] for k in odd)))
        try:
            return Evaluator(self.kb, self.framework, self.facts).run(
                node, assignment if assignment is not None else self.assignment)
        except KbError as error:
            raise Undecided(error.diagnostics[0].message) from None

    def holds(self, node: ir.Node | None, assignment: dict[str, Any] | None = None) -> bool:
        return True if node is None else bool(self.run(node, assignment))

    def broken_after(self, changes: dict[str, Any]) -> list:
        """The framework's rules that decidably fail once `changes` are made; a
        rule that reads none of the changed options keeps its present verdict."""
        if self._verdicts is None:
            self._verdicts = {}
            for rule in self.kb.of(self.kb.rules, self.framework):
                try:
                    self._verdicts[rule.id] = self.keeps(rule)
                except Undecided:
                    self._verdicts[rule.id] = None
        trial = self.with_changes(changes)
        failed = []
        for rule in self.kb.of(self.kb.rules, self.framework):
            verdict = self._verdicts[rule.id]
            if changes and needs(self.kb, rule.expr)[1] & changes.keys():
                try:
                    verdict = self.keeps(rule, trial)
                except Undecided:
                    verdict = None
            if verdict is False:
                failed.append(rule)
        return failed

    def keeps(self, rule, assignment: dict[str, Any] | None = None) -> bool:
        """Whether a hard rule holds (its own expression, so that caches hit)."""
        value = bool(self.run(rule.expr, assignment))
        return value if rule.kind == "require" else not value

    def with_changes(self, changes: dict[str, Any]) -> dict[str, Any]:
        return {**self.assignment, **changes}

    def problem(self):
        """The planner's problem for these facts (the estimate's path), with the
        host RAM budget when --host-ram gave one."""
        from kbsolve.program.problem import build_problem
        problem = build_problem(self.kb, self.framework, self.facts, {})
        problem.host_budget_bytes = self.host_budget
        return problem


def facts_needed(kb: KnowledgeBase, node: ir.Node) -> set[str]:
    """Facts read, directly and through lets, transitively (program/program.py's walker)."""
    return reads(kb, node).facts


def options_needed(kb: KnowledgeBase, node: ir.Node) -> set[str]:
    """Options read, directly and through lets, transitively (memory sums not followed)."""
    return reads(kb, node).options


def needs(kb: KnowledgeBase, node: ir.Node) -> tuple[set[str], set[str]]:
    """(facts, options) a formula reads, directly or through lets."""
    found = reads(kb, node)
    return found.facts, found.options


def build_context(kb: KnowledgeBase, framework: str, user: dict[str, Any],
                  hardware: Hardware, model, unread: set[str] = frozenset(),
                  host_ram: float | None = None) -> Context:
    """`host_ram`: --host-ram, GiB per node; without it host RAM is not judged (the
    planner's assumed node would be a guess about the user's machine)."""
    tied = fact_options(kb, framework, user)
    given: dict[str, Any] = {}  # query field -> the config's value (or its option's default)
    for path, option in tied.items():
        if option.key in unread:
            continue
        value = user.get(option.key, option.default)
        if value is not None:
            given[path.split(".", 1)[1]] = _whole(value)
    counts = (hardware.nodes, hardware.per_node) if hardware.count else None
    facts = config_facts(kb, hardware.gpu, model, counts, given,
                         {path.split(".", 1)[1] for path in tied})
    options = kb.options_of(framework)
    context = Context(kb, framework, facts, {}, dict(user), unread=set(unread))
    derived = []  # `from` expressions that read other options: after the first pass
    for option in options:
        if option.key in user:
            context.assignment[option.key] = user[option.key]
            continue
        context.assignment[option.key] = option.default
        if option.source_expr is not None and \
                not facts_needed(kb, option.source_expr) - facts.keys():
            derived.append(option)
    evaluator = Evaluator(kb, framework, facts)
    for option in sorted(derived, key=lambda o: bool(options_needed(kb, o.source_expr))):
        try:
            value = evaluator.run(option.source_expr, context.assignment)
        except KbError:
            continue
        context.assignment[option.key] = Fraction(value) if option.type.kind == "num" \
            else value
    _recipe_facts(context)
    if host_ram is not None:  # as the planner: per GPU process, after the host headroom
        context.host_budget = host_budget(kb, Fraction(str(host_ram)), hardware.per_node or 1)
    return context


def fact_options(kb: KnowledgeBase, framework: str, user: dict[str, Any]) -> dict:
    """Query fact -> the option tied to it (`from query.X`) that gives it: the one
    the KB's audit data names (the training shape, not the evaluation's), else the
    first the config sets, else the first declared."""
    from kbsolve.audit.audit_data import audit_data
    named = audit_data(kb, framework).shape
    found: dict[str, Any] = {}
    for option in kb.options_of(framework):
        if not isinstance(option.source_expr, ir.FactRef) or \
                not option.source_expr.path.startswith("query."):
            continue
        path = option.source_expr.path
        if path in named:
            if option.key == named[path]:
                found[path] = option
        elif path not in found or (option.key in user and found[path].key not in user):
            found[path] = option
    for path, key in named.items():  # a fact the KB's audit data ties to an option only there
        found.setdefault(path, kb.options[key])
    return found


def _recipe_facts(ctx: Context) -> None:
    """Query facts that only a rule's equation reads (the recipe's global batch):
    the config's own value, so that the config keeps its recipe and a change that
    alters it breaks the rule. For `require A == B` with B reading the absent fact
    and A not, the fact takes A's value when that makes the rule hold."""
    kb = ctx.kb
    for rule in kb.of(kb.rules, ctx.framework):
        node = rule.expr
        if rule.kind != "require" or not isinstance(node, ir.Op) or node.op != "==":
            continue
        sides = [needs(kb, side)[0] for side in node.args]
        for mine, other in ((0, 1), (1, 0)):
            absent = {p for p in sides[other] if p not in ctx.facts and p.startswith("query.")}
            if not absent or len(absent) > 1 or sides[mine] & absent:
                continue
            try:  # the config's values as read (an unread env option at its default)
                value = Evaluator(kb, ctx.framework, ctx.facts).run(node.args[mine],
                                                                     ctx.assignment)
            except KbError:
                continue
            path = absent.pop()
            ctx.facts[path] = Fraction(value)
            try:
                if Evaluator(kb, ctx.framework, ctx.facts).run(rule.expr, ctx.assignment):
                    continue
            except KbError:
                pass
            del ctx.facts[path]


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, Fraction) and value.denominator == 1 else value
