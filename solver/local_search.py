"""A good starting point for the exact search: hill climbing in the reference
evaluator. A move changes one option; a move that breaks rules may be repaired
by changing one option that those rules read. It only picks where Z3 starts
tightening; Z3 still proves the optimum."""

from __future__ import annotations

from typing import Any

from kbsolve.program.evaluate import options_read
from kbsolve.program.metrics import measure, sort_key
from kbsolve.program.problem import Problem

MAX_PASSES = 6


def hill_climb(problem: Problem, start: dict[str, Any]) -> dict[str, Any]:
    """The best assignment reachable from a feasible `start` by improving moves
    (at most MAX_PASSES passes: a counted budget)."""
    free = [k for k in sorted(problem.choices) if k not in problem.pinned]
    reads = _rule_reads(problem)
    chosen, best = start, _key(problem, start)
    if best is None:
        return start
    for _ in range(MAX_PASSES):
        improved = False
        for key in free:
            for value in problem.choices[key]:
                if value == chosen[key]:
                    continue
                trial = {**chosen, key: value}
                metrics = measure(problem, {**problem.fixed, **trial})
                if metrics.feasible:
                    candidates = [(sort_key(metrics), trial)]
                else:
                    candidates = _repairs(problem, trial, key, metrics.broken, reads, free)
                for trial_key, better in candidates:
                    if trial_key < best:
                        chosen, best, improved = better, trial_key, True
        if not improved:
            break
    return chosen


def _repairs(problem: Problem, trial: dict, moved: str, broken: list[str], reads: dict,
             free: list[str]) -> list[tuple]:
    """Feasible variants of `trial` that also change one option the broken rules read."""
    if not broken:
        return []
    touched = sorted(set().union(*[reads.get(rule, set()) for rule in broken]) & set(free)
                     - {moved})
    found = []
    for key in touched:
        for value in problem.choices[key]:
            if value == trial[key]:
                continue
            variant = {**trial, key: value}
            variant_key = _key(problem, variant)
            if variant_key is not None:
                found.append((variant_key, variant))
    return found


def _key(problem: Problem, chosen: dict):
    metrics = measure(problem, {**problem.fixed, **chosen})
    return sort_key(metrics) if metrics.feasible else None


def _rule_reads(problem: Problem) -> dict[str, set[str]]:
    """Rule key -> the options it reads, through lets."""
    return {f"{rule.framework}.{rule.id}": options_read(problem.kb, rule.constraint)
            for rule in problem.rules}


def back_to_defaults(problem: Problem, chosen: dict[str, Any]) -> dict[str, Any]:
    """Put options back to their defaults, one at a time in name order, wherever
    the plan stays feasible and equal in time, preferences and memory. Greedy:
    the final tie-break, which Z3 proved too slow to settle exactly."""
    best = _key(problem, chosen)
    if best is None:
        return chosen
    for key in sorted(problem.choices):
        default = problem.kb.options[key].default
        if key in problem.pinned or chosen[key] == default or default not in problem.choices[key]:
            continue
        trial = {**chosen, key: default}
        trial_key = _key(problem, trial)
        if trial_key is not None and trial_key[:-1] == best[:-1]:
            chosen, best = trial, trial_key
    return chosen
