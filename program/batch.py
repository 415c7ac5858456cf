"""The recipe's global batch, by the KB's roles (roles.py): the let in role
batch_geometry is the batch a configuration makes, the one in role global_batch
the recipe's (the query's, else the default), and a rule holds them equal."""

from __future__ import annotations

from typing import Any

from kbsolve import roles
from kbsolve.dsl.ir import options_used
from kbsolve.dsl.kb import KnowledgeBase
from kbsolve.program.evaluate import Evaluator
from kbsolve.program.program import link

def batch_options(kb: KnowledgeBase, framework: str) -> set[str]:
    """The options the framework's batch geometry names itself (not through lets)."""
    geometry = roles.let(kb, framework, "batch_geometry")
    return options_used(geometry.expr) if geometry is not None else set()


def geometry_of(kb: KnowledgeBase, framework: str, facts: dict, assignment: dict) -> Any:
    """The global batch a configuration makes (None: the framework declares none);
    options the assignment lacks take their defaults."""
    geometry = roles.let(kb, framework, "batch_geometry")
    if geometry is None:
        return None
    defaults = {o.key: o.default for o in link(kb, framework).options}
    return Evaluator(kb, framework, facts).run(geometry.expr, {**defaults, **assignment})
