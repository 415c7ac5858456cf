"""Run the DSL's own tests (`test NAME { given ... pin ... expect ... }`)."""

from __future__ import annotations

from dataclasses import dataclass

from kbsolve.diagnostics import KbError
from kbsolve.dsl.kb import KnowledgeBase, Test
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.metrics import full_assignment
from kbsolve.solver.optimize import Outcome, solve
from kbsolve.solver.prove import feasibility
from kbsolve.solver.search import Search
from kbsolve.program.query import Query, resolve
from kbsolve.plan.report import plain




@dataclass
class TestResult:
    test: Test
    passed: bool
    failures: list[str]

    @property
    def name(self) -> str:
        return f"{self.test.framework}.{self.test.name}"


def run_tests(kb: KnowledgeBase, select: str | None = None) -> list[TestResult]:
    results = []
    for key, test in sorted(kb.tests.items()):
        if select and select not in key:
            continue
        results.append(_run(kb, test))
    return results


def _pin_text(value) -> str:
    value = plain(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _run(kb: KnowledgeBase, test: Test) -> TestResult:
    given = {k: plain(v) for k, v in test.given}
    given.setdefault("framework", test.framework)
    fields = {k: given[k] for k in ("gpus", "model", "framework", "task", "network", "seq_len",
                                    "resolution", "frames", "global_batch") if k in given}
    if "headroom" in given:
        fields["headroom"] = float(given["headroom"])
    if "height" in given or "width" in given:  # query facts; the query takes them as HxW
        fields["resolution"] = f"{given.get('height', 512)}x{given.get('width', 512)}"
    fields["set"] = [f"{name}={_pin_text(value)}" for name, value in test.pins]
    try:
        resolved = resolve(kb, Query(**fields))
        only_refusal = all(e.kind == "infeasible" for e in test.expectations)
        outcome = (_refusal if only_refusal else solve)(resolved.problem)
    except KbError as error:
        return TestResult(test, False, [f"the query failed: {error.diagnostics[0].message}"])
    problem = resolved.problem
    failures: list[str] = []
    checks = iter(test.checks)
    for exp in test.expectations:
        feasible = outcome.status in ("optimal", "feasible")
        if exp.kind == "feasible" and not feasible:
            failures.append(f"expected feasible, got {outcome.status} "
                            f"(core: {', '.join(outcome.core)})")
        elif exp.kind == "infeasible":
            if feasible:
                failures.append("expected infeasible, got a plan")
                continue
            missing = _missing(outcome.core, exp.names, test.framework)
            if missing and outcome.model is None:  # the tables' reasons: ask Z3's minimal core
                outcome = feasibility(problem)
                missing = _missing(outcome.core, exp.names, test.framework)
            if missing:
                failures.append(f"expected {', '.join(missing)} in the core, got "
                                f"{', '.join(sorted(outcome.core)) or 'nothing'}")
        elif exp.kind in ("warning", "no_warning"):
            if not feasible:
                failures.append(f"expected a plan to check warning {exp.names[0]}, got "
                                f"{outcome.status}")
                continue
            fired = f"{test.framework}.{exp.names[0]}" in outcome.metrics.warnings
            if fired != (exp.kind == "warning"):
                failures.append(f"warning {exp.names[0]} {'did not fire' if not fired else 'fired'}")
        elif exp.kind == "memory":
            if not feasible:
                failures.append(f"expected a plan to check memory, got {outcome.status}")
                continue
            level = exp.names[0] if exp.names else "device"
            value = outcome.metrics.levels[level]
            low, high = exp.low, exp.high
            if not low <= value <= high:
                failures.append(f"memory {level} {float(value) / 2**30:.2f} GiB is outside "
                                f"{float(low) / 2**30:.2f}..{float(high) / 2**30:.2f} GiB")
        elif exp.kind == "holds":
            node = next(checks)
            if not feasible:
                failures.append(f"expected a plan to check '{_text(exp)}', got {outcome.status}")
                continue
            assignment = full_assignment(problem, outcome.chosen)
            if not Evaluator(kb, test.framework, problem.facts).run(node, assignment):
                failures.append(f"expected {_text(exp)} (line {exp.span.line})")
    return TestResult(test, not failures, failures)


def _refusal(problem) -> Outcome:
    """Is the query refused, and by what? Arc consistency on the rule tables
    names the rules that emptied an option's domain; a feasibility search
    finds a plan; Z3's minimal core is asked only when neither settles it."""
    search = Search(problem)
    why: dict = {}
    if search.domains(why=why) is None:
        return Outcome("infeasible", core=sorted(set(why.values())))
    if search.run(first=True).chosen is not None:
        return Outcome("feasible")
    return feasibility(problem)


def _missing(core: list[str], names, framework: str) -> list[str]:
    rules = {p.split(":", 1)[1] for p in core if p.startswith("rule:")}
    return [n for n in names if f"{framework}.{n}" not in rules]


def _text(exp) -> str:
    return f"expect at {exp.span}"


def coverage(kb: KnowledgeBase) -> dict[str, list[str]]:
    """Rules, warnings and checks with no test naming them."""
    named = {f"{t.framework}.{n}" for t in kb.tests.values() for e in t.expectations
             for n in (e.names if e.kind != "memory" else ())}
    return {"rules": sorted(k for k in kb.rules if k not in named),
            "warnings": sorted(k for k in kb.warnings if k not in named),
            "checks": sorted(k for k in kb.checks if k not in named)}
