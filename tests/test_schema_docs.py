"""The published JSON schemas match the models the code emits."""

import json
from pathlib import Path

import pytest

from kbsolve.results.plan import Estimate, Plan

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("name, model", [("plan", Plan), ("estimate", Estimate)])
def test_published_schema_is_current(name, model):
    published = json.loads((DOCS / f"{name}.schema.json").read_text())
    assert published == model.model_json_schema(), \
        f"regenerate docs/{name}.schema.json from kbsolve.results.plan.{model.__name__}"
