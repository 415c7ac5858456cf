"""Deep checks that need Z3: contradictions, dead values, dead and redundant
rules, warnings that can never fire, over every catalog situation at once
(lint/symbolic.py).

Questions of one kind are batched: "can any of these still happen?" is asked
until the solver says no; each yes answers every question its model shows.
The questions left are the findings, each with a minimal core.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.lint.symbolic import STAND_IN, SymbolicModel
from kbsolve.solver.prove import CoreFinder

@dataclass
class Finding:
    kind: str  # contradiction | dead-value | dead-rule | redundant | silent-warning
    subject: str  # rule or warning key, or option=value
    core: list[str]  # names of parts (rule:..., when:...)


@dataclass
class SolverReport:
    framework: str
    findings: list[Finding] = field(default_factory=list)
    situations: int = 0
    incomplete: int = 0
    skipped: list[str] = field(default_factory=list)  # not compiled, or read free options
    seconds: float = 0.0
    unknown: bool = False


def trigger(expr: ir.Node, kind: str) -> ir.Node:
    """When a rule has something to say: a forbid's condition, the premise of
    `require A implies B`, else the violation of the requirement."""
    if kind == "forbid":
        return expr
    if isinstance(expr, ir.Op) and expr.op == "implies":
        return expr.args[0]
    return ir.Op("not", (expr,), expr.type, expr.span)


def check_framework(kb: KnowledgeBase, framework: str) -> SolverReport:
    start = time.monotonic()
    model = SymbolicModel(kb, framework)
    report = SolverReport(framework, situations=len(model.space.rows),
                          incomplete=model.space.incomplete)
    if not model.space.rows:
        report.skipped.append(f"{framework}: no catalog GPU and model to check it against")
        return report
    report.skipped += [f"{name} (not compiled: {why})" for name, why in model.failed.items()]
    report.skipped += [f"{name} (reads an option the solver never decides)"
                       for name in model.unpinned]
    triggers, violations, warns = {}, {}, {}
    for name, (rule, expr) in model.rules.items():
        if name not in model.parts:
            continue
        if model.reads_user_shape(rule.expr):
            report.skipped.append(f"{name} (reads a query shape the user chooses)")
            continue
        t = model.term(trigger(expr, rule.kind))
        if t is not None:
            triggers[name] = t
        violations[name] = z3.Not(model.parts[name])
    for name, (warn, expr) in model.warnings.items():
        t = model.term(expr)
        if t is None or model.reads_free_option(warn.expr) or model.reads_user_shape(warn.expr):
            report.skipped.append(f"{name} (reads an option or query shape the user chooses)")
        else:
            warns[name] = t
    values = {f"{k}={v!r}": model.c.equals(k, v) for k, vs in model.p.choices.items()
              if not k.startswith(STAND_IN) for v in vs}
    finder = CoreFinder(model)
    finder.solver.add(model.catalog)
    for definition in model.c.definitions:  # the aux names the question terms made
        finder.solver.add(definition)
    ask = _Asker(finder, model)
    when_names = tuple(n for n in finder.marks if not n.startswith("when:"))
    everything = finder.solver.check(list(finder.marks.values()))
    if everything == z3.unsat:
        report.findings.append(Finding("contradiction", framework, finder.clash() or []))
    elif everything == z3.sat:
        for key in ask.batch(values, list(finder.marks)):
            core = ask.core(values[key])
            kind = "forbidden-value" if _forbids_outright(model, core, key) else "dead-value"
            report.findings.append(Finding(kind, key, core))
        for key in ask.batch(warns, list(finder.marks)):
            report.findings.append(Finding("silent-warning", key, ask.core(warns[key])))
        dead = ask.batch(triggers, [n for n in finder.marks if n.startswith("when:")])
        for key in dead:
            report.findings.append(Finding("dead-rule", key,
                                           ask.core(triggers[key], when_names)))
        live = {k: v for k, v in violations.items() if k not in dead}
        for key in ask.one_of_each(live):
            report.findings.append(Finding("redundant", key, ask.core(live[key], (key,))))
    report.unknown = ask.unknown or everything == z3.unknown
    report.seconds = time.monotonic() - start
    return report


def _forbids_outright(model: SymbolicModel, core: list[str], value_key: str) -> bool:
    """One forbid rule that names the option and the value on purpose
    (`forbid deepspeed == "zero3"`: a value the framework accepts but that must
    not be used). `forbid deepspeed != "none"` names no killed value: reported."""
    if len(core) != 1 or core[0] not in model.rules:
        return False
    rule, _ = model.rules[core[0]]
    option, value = value_key.split("=", 1)
    if rule.kind != "forbid" or option not in ir.options_used(rule.expr):
        return False
    if model.kb.options[option].type.kind == "bool":
        return True
    return any(isinstance(n, ir.Const) and repr(n.value) == value for n in ir.walk(rule.expr))


class _Asker:
    def __init__(self, finder: CoreFinder, model: SymbolicModel):
        self.finder = finder
        self.model = model
        self.unknown = False

    def batch(self, questions: dict[str, z3.BoolRef], marks: list[str]) -> list[str]:
        """The questions no satisfying model (under these marked parts) answers."""
        solver = self.finder.solver
        pending = dict(questions)
        assumptions = [self.finder.marks[n] for n in marks]
        while pending:
            result = solver.check(assumptions + [z3.Or(list(pending.values()))])
            if result != z3.sat:
                self.unknown |= result == z3.unknown
                break
            solution = solver.model()
            for key in [k for k, term in pending.items()
                        if z3.is_true(solution.eval(term, model_completion=True))]:
                del pending[key]
        return sorted(pending)

    def one_of_each(self, violations: dict[str, z3.BoolRef]) -> list[str]:
        """Rules that cannot be broken while all the others hold (redundant)."""
        solver = self.finder.solver
        pending = dict(violations)
        whens = [m for n, m in self.finder.marks.items() if n.startswith("when:")]
        while pending:
            solver.push()
            flags = {k: z3.Bool(f"breaks:{k}", self.model.c.ctx) for k in pending}
            for key, flag in flags.items():
                solver.add(flag == violations[key])
            solver.add(z3.PbEq([(f, 1) for f in flags.values()], 1))
            others = [m for n, m in self.finder.marks.items()
                      if n.startswith("rule:") and n not in pending]
            result = solver.check(whens + others)
            broken = []
            if result == z3.sat:
                solution = solver.model()
                broken = [k for k, f in flags.items()
                          if z3.is_true(solution.eval(f, model_completion=True))]
            solver.pop()
            if result != z3.sat:
                self.unknown |= result == z3.unknown
                break
            for key in broken:
                del pending[key]
        return sorted(pending)

    def core(self, extra: z3.BoolRef, without: tuple = ()) -> list[str]:
        return self.finder.clash([extra], without) or []
