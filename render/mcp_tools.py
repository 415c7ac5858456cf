"""docs/mcp.md's tool reference, from the tools' JSON schemas (`kbsolve mcp --tools`)."""

from __future__ import annotations

import json


def markdown(tools: list[dict]) -> str:
    out = []
    for tool in tools:
        out += [f"### `{tool['name']}`", "", tool["description"], "",
                "| argument | type | default | meaning |", "|---|---|---|---|"]
        schema = tool["input_schema"]
        required = set(schema.get("required", ()))
        for name, field in schema.get("properties", {}).items():
            default = "required" if name in required else _shown(field.get("default"))
            out.append(f"| `{name}` | {_type(field)} | {default} | "
                       f"{_cell(field.get('description', ''))} |")
        result = tool["output_schema"]
        out += ["", f"Result (`structuredContent`): `{result.get('title', 'object')}`", "",
                "| field | type | meaning |", "|---|---|---|"]
        for name, field in result.get("properties", {}).items():
            out.append(f"| `{name}` | {_type(field)} | {_cell(field.get('description', ''))} |")
        out.append("")
    return "\n".join(out)


def _type(field: dict) -> str:
    if "$ref" in field:
        return field["$ref"].rsplit("/", 1)[-1]
    if "enum" in field:
        return " \\| ".join(json.dumps(v) for v in field["enum"])
    if "const" in field:
        return json.dumps(field["const"])
    if "anyOf" in field:
        return " \\| ".join(_type(f) for f in field["anyOf"])
    kind = field.get("type", "any")
    if kind == "array":
        return f"list of {_type(field.get('items', {}))}"
    if kind == "object" and "additionalProperties" in field:
        inner = field["additionalProperties"]
        return f"map of {_type(inner) if isinstance(inner, dict) else 'any'}"
    return kind


def _shown(value) -> str:
    return "" if value is None else f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
