"""Options that follow other options, and recipe defaults.

An option's `from` that reads other options (the learning rate of LlamaFactory's
examples follows stage and finetuning_type) cannot be evaluated on the facts
alone: build_problem keeps the option's default as a placeholder, and once the
search has decided the options, `settle` evaluates it on the plan's values. A
pin wins, as for every free option. Nothing the search weighs may read such an
option (tests/test_recipe.py holds this for the shipped KB).

A recipe default is a free option whose `from` reads no fact: its value is not
derived from the hardware, the model or the query but taken from a recipe (a
framework's example configs), so a plan shows it as one to review, citing the
lets its `from` went through (each with its own source) or else the option's
own source.
"""

from __future__ import annotations

from typing import Any

from kbsolve.dsl import ir
from kbsolve.dsl.kb import KnowledgeBase, Option
from kbsolve.program.evaluate import facts_read, options_read


def task_key(kb: KnowledgeBase, framework: str) -> str | None:
    """The framework's task option: fixed by every query before the search."""
    fw = kb.frameworks.get(framework)
    return f"{framework}.{fw.task_option}" if fw is not None and fw.task_option else None


def follows_options(kb: KnowledgeBase, option: Option) -> bool:
    """The option's `from` reads options other than the task (through lets): it is
    settled after the search. A `from` of the task and facts is fixed before it."""
    return option.source_expr is not None and bool(
        options_read(kb, option.source_expr) - {task_key(kb, option.framework)})


def is_recipe(kb: KnowledgeBase, option: Option) -> bool:
    """A free option whose `from` reads no fact (through lets), or reads the task:
    the example's value for the trainer or stage (and the model)."""
    if option.source_expr is None:
        return False
    if task_key(kb, option.framework) in options_read(kb, option.source_expr):
        return True
    return option.is_free and not facts_read(kb, option.source_expr)


def settle(problem, assignment: dict[str, Any]) -> dict[str, Any]:
    """The assignment with every unpinned option that follows options evaluated
    on it (the others' values are final by then)."""
    settled = dict(assignment)
    for option in problem.options:
        if option.key in problem.pinned or not follows_options(problem.kb, option):
            continue
        if any(path not in problem.facts for path in facts_read(problem.kb,
                                                                 option.source_expr)):
            continue  # the catalog lacks a fact it reads: the default stays
        value = problem.evaluator.run(option.source_expr, settled)
        settled[option.key] = _coerce(option, value)
    return settled


def provenance(problem, option: Option, assignment: dict[str, Any]) -> list:
    """The lets with a source that the option's `from` went through for this
    assignment (only the branches taken), as kb.Let objects."""
    return lets_taken(problem, option.source_expr, assignment)


def lets_taken(problem, node: ir.Node, assignment: dict[str, Any]) -> list:
    """The lets with a source that `node` reads for this assignment, through the
    branches its `if`s (and desugared `match`es) take, as kb.Let objects."""
    found: list[str] = []
    _taken(problem, node, assignment, found)
    return [problem.kb.lets[key] for key in found if problem.kb.lets[key].meta.source]


def _taken(problem, node: ir.Node, assignment: dict[str, Any], found: list[str]) -> None:
    if isinstance(node, ir.LetRef):
        if node.let not in found:
            found.append(node.let)
            _taken(problem, problem.kb.lets[node.let].expr, assignment, found)
    elif isinstance(node, ir.Op) and node.op == "if":
        condition, then, other = node.args
        _taken(problem, then if problem.evaluator.run(condition, assignment) else other,
               assignment, found)
    elif isinstance(node, ir.Op):
        for arg in node.args:
            _taken(problem, arg, assignment, found)


def _coerce(option: Option, value):
    from fractions import Fraction
    if option.type.kind == "num" and not isinstance(value, bool):
        return Fraction(value)
    return value
