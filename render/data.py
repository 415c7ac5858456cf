"""Plans and estimates as data: JSON or YAML of the api's model, key order kept."""

from __future__ import annotations

import json


def as_data(result) -> dict:
    return json.loads(result.model_dump_json())


def as_json(result) -> str:
    return json.dumps(as_data(result), indent=2, ensure_ascii=False)


def as_yaml(result) -> str:
    import yaml  # only this format needs it
    return yaml.safe_dump(as_data(result), sort_keys=False, allow_unicode=True)
