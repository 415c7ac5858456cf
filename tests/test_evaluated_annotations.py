"""The plan path's dataclasses hold evaluated annotations (issue 25): a string annotation
costs dataclasses three regex reads a field (`dataclasses._is_type`) on every cold plan.
Only the AST classes' names stay quoted: the checker's input, which no cold plan imports."""

import dataclasses

import pytest
from module_classes import own_dataclasses

PLAN_PATH = ["kbsolve.dsl.types", "kbsolve.dsl.symbols", "kbsolve.dsl.vocab",
             "kbsolve.program.metrics", "kbsolve.program.operators",
             "kbsolve.program.problem", "kbsolve.program.query", "kbsolve.plan.emit_folder"]


@pytest.mark.parametrize("name", PLAN_PATH)
def test_plan_path_dataclasses_hold_evaluated_annotations(name):
    classes = own_dataclasses(name)
    assert classes
    assert [(cls.__name__, f.name, f.type) for cls in classes for f in dataclasses.fields(cls)
            if isinstance(f.type, str) and "ast." not in f.type] == []
