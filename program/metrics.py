"""Everything a full assignment implies, by the reference evaluator: rules
broken, memory term by term, step time, throughput, preferences, warnings."""

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kbsolve.diagnostics import KbError
from kbsolve.program.operators import fraction_product as product
from kbsolve.program.operators import fraction_sum as total
from kbsolve.program.problem import Problem
from kbsolve.program.program import memory_levels



@dataclass
class Metrics:
    """The exact evaluation of one assignment: rules broken, memory and time by term."""
    broken: list[str]  # rule keys that fail
    irrelevant_changed: list[str]  # options set while their `when` is false
    memory: dict[str, Fraction]  # gpu term key -> bytes
    host: dict[str, Fraction]  # host term key -> bytes
    levels: dict[str, Fraction]  # cumulative: allocated, reserved, device
    times: dict[str, Fraction]  # time term key -> seconds
    factors: dict[str, Fraction]
    step_time: Fraction
    work: dict[str, Fraction]
    time_per_work: Fraction
    preferences: dict[int, Fraction]  # tier -> score
    warnings: list[str]
    defaults_kept: int

    @property
    def fits(self) -> bool:
        return self.levels["device"] <= self.budget

    budget: Fraction = Fraction(0)
    host_budget: Fraction | None = None
    objective: str = "speed"

    @property
    def host_fits(self) -> bool:
        return self.host_budget is None or sum(self.host.values(), Fraction(0)) <= self.host_budget

    @property
    def feasible(self) -> bool:
        return not self.broken and not self.irrelevant_changed and self.fits and self.host_fits


def full_assignment(problem: Problem, chosen: dict[str, Any]) -> dict[str, Any]:
    return {**problem.fixed, **chosen}


def broken_rules(problem: Problem, run) -> list[str]:
    """The keys of the rules that fail, in the problem's order; `run` evaluates a
    node at the assignment (Evaluator.remembering)."""
    return [key for key, node in _layout(problem).rules if not run(node)]


class _Layout:
    """What measure() reads of a problem besides the assignment, found once a
    problem instead of once a measure: each rule's and term's key (its
    'framework.name' string) beside its node, the options with a `when`, the
    throughput term's key. The same nodes in the same order, so the same
    evaluations; kept while the problem's program, consent rules, KB and
    memory terms are the same objects (a copied problem shares them)."""

    def __init__(self, problem: Problem):
        program = problem.program
        self.made_of = (program, problem.consent, problem.kb, problem.memory_inner_first)
        self.rules = [(r.framework + "." + r.id, r.constraint) for r in problem.rules]
        self.conditional = [o for o in problem.options if o.when is not None]
        self.memory = [(f"{t.framework}.{t.name}", t.expr, t.location == "host", t.level)
                       for t in problem.memory_inner_first]
        self.speed = [(f"{t.framework}.{t.name}", t.expr, t.kind == "time")
                      for t in program.speed]
        self.work = [(f"{t.framework}.{t.name}", t.expr) for t in program.work]
        main = problem.throughput_work
        self.main = f"{main.framework}.{main.name}" if main else None
        self.warnings = [(f"{w.framework}.{w.id}", w.expr) for w in program.warnings]
        self.rule_nodes = _Nodes(problem, [node for _, node in self.rules])
        self.memory_nodes = _Nodes(problem, [expr for _, expr, _, _ in self.memory])
        self.speed_nodes = _Nodes(problem, [expr for _, expr, _ in self.speed])
        self.work_nodes = _Nodes(problem, [expr for _, expr in self.work])


class _Nodes:
    """Nodes measure() finds together, and their entries for remembering_each's each()."""

    def __init__(self, problem: Problem, nodes: list):
        self.nodes, self.entries = nodes, problem.evaluator.entries(nodes)

    def fractions(self, run, each) -> list[Fraction]:
        """[_fraction(run(node)) for node in self.nodes], the values found by each();
        where one of them raises, the nodes again one by one, each value turned into
        a Fraction before the next is found, so that the first error is the same."""
        try:
            values = each(self.entries)
        except Exception:  # noqa: BLE001 -- raised again below, in the one-by-one order
            return [_fraction(run(node)) for node in self.nodes]
        return [_fraction(value) for value in values]


def _layout(problem: Problem) -> _Layout:
    found = problem.__dict__.get("_measure_layout")
    if found is None or found.made_of[0] is not problem.program or \
            found.made_of[1] is not problem.consent or found.made_of[2] is not problem.kb or \
            found.made_of[3] is not problem.memory_inner_first:
        found = problem.__dict__["_measure_layout"] = _Layout(problem)
    return found


def measure(problem: Problem, assignment: dict[str, Any], lazy: bool = False) -> Metrics:
    """The exact Metrics of a full assignment. lazy=True measures what feasibility
    reads (rules, `when`s, memory, host RAM) now and the rest (time, work,
    preferences, warnings, defaults kept) when one of them is first read: the
    same evaluator on the same assignment, so the same Fractions."""
    run, each = problem.evaluator.remembering_each(assignment)
    layout = _layout(problem)
    # each() raises the first error one run() at a time would: a rule's truth raises none
    broken = [key for (key, _), holds in zip(layout.rules, each(layout.rule_nodes.entries))
              if not holds]
    choices = problem.choices
    irrelevant = [o.key for o in layout.conditional
                  if o.key in choices and not _same(assignment[o.key], o.default)
                  and not run(o.when)]
    memory, host = {}, {}
    order = memory_levels(problem.kb)
    parts: dict[str, list] = {level: [] for level in order}
    for (key, _, on_host, level), value in zip(layout.memory,
                                                layout.memory_nodes.fractions(run, each)):
        if on_host:
            host[key] = value
            continue
        memory[key] = value
        parts[level].append(value)
    levels = {level: total(parts[level]) for level in order}
    for inner, outer in zip(order, order[1:]):  # each level includes the ones inside it
        levels[outer] += levels[inner]
    if lazy:
        metrics = _Pending.__new__(_Pending)
        metrics.__dict__.update(broken=broken, irrelevant_changed=irrelevant, memory=memory,
                                host=host, levels=levels,
                                _pending=(problem, assignment, run, each))
    else:
        metrics = Metrics(broken, irrelevant, memory, host, levels,
                          **_objective(problem, assignment, run, each))
    metrics.budget = problem.budget_bytes
    metrics.host_budget = problem.host_budget_bytes
    metrics.objective = problem.objective
    return metrics


def _same(value, other) -> bool:
    """value == other, the same object without a comparison (a Fraction's == is Python)."""
    return value is other or value == other


def _objective(problem: Problem, assignment: dict[str, Any], run, each) -> dict[str, Any]:
    """measure()'s fields past memory: time, work, preferences, warnings, defaults kept."""
    layout = _layout(problem)
    times, factors = {}, {}
    for (key, _, is_time), value in zip(layout.speed, layout.speed_nodes.fractions(run, each)):
        (times if is_time else factors)[key] = value
    step = product(total(times.values()), factors.values())
    work = {key: value for (key, _), value in zip(layout.work,
                                                  layout.work_nodes.fractions(run, each))}
    first = work[layout.main] if layout.main is not None else Fraction(1)
    tpw = step / first if first else step
    scores: dict[int, list] = {}  # tier -> its scores (a false flag's 0 left out)
    for pref in problem.program.preferences:
        value = run(pref.expr)
        tier = scores.setdefault(pref.tier, [])
        if not isinstance(value, bool):
            tier.append(_fraction(pref.weight * Fraction(value)))
        elif value:
            tier.append(_fraction(pref.weight))
    prefs = {tier: total(values) for tier, values in scores.items()}
    warnings = [key for key, expr in layout.warnings if _fires(run, expr)]
    options = problem.kb.options
    defaults = sum(1 for key in problem.choices if _same(assignment[key], options[key].default))
    return dict(times=times, factors=factors, step_time=step, work=work, time_per_work=tpw,
                preferences=prefs, warnings=warnings, defaults_kept=defaults)


_LATER = frozenset(("times", "factors", "step_time", "work", "time_per_work", "preferences",
                    "warnings", "defaults_kept"))  # the fields _objective fills


class _Pending(Metrics):
    """Metrics from measure(lazy=True): the fields past memory are measured on
    the first read of any of them (all at once)."""

    def __getattr__(self, name: str):  # only for attributes not set yet
        if name not in _LATER or "_pending" not in self.__dict__:
            raise AttributeError(name)
        self.__dict__.update(_objective(*self.__dict__.pop("_pending")))
        return self.__dict__[name]


def _fraction(value) -> Fraction:
    """value as a Fraction; one already a Fraction as it is (not copied)."""
    return value if type(value) is Fraction else Fraction(value)


def _fires(run, expr) -> bool:
    """A warning about a fact this model lacks (a user spec without hf_id) stays silent."""
    try:
        return bool(run(expr))
    except KbError as error:
        if all(d.code == "missing-fact" for d in error.diagnostics):
            return False
        raise


def sort_key(metrics: Metrics) -> tuple:
    """The objective, smaller is better: time per work, preferences by tier,
    device memory, then fewer changes from the defaults; with the memory
    objective, device memory first, then time and preferences."""
    tiers = tuple(-metrics.preferences[t] for t in sorted(metrics.preferences))
    if metrics.objective == "memory":
        return (metrics.levels["device"], metrics.time_per_work) + tiers + \
            (-metrics.defaults_kept,)
    return (metrics.time_per_work,) + tiers + (metrics.levels["device"], -metrics.defaults_kept)
