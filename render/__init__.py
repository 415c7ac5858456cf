"""Every result kbsolve prints, in every format, in one place.

    from kbsolve.render import render
    text = render(plan, "table")                  # the kind is read off the result
    text = render(rows, "json", kind="listing")   # plain data names its kind
    text = render(report, "markdown", lang="zh")  # options go to the renderer

`RENDERERS` maps (result kind, format name) to the function that renders it,
the way ruff lays out its output formats: adding a format is one entry and
one small module. Renderers return text and never print; they read results
(the api's data models) and import nothing of the solver. Each module is
imported on first use, so that `import kbsolve.render` (and so `kbsolve
--help`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

Renderer = Callable[..., str]


def _lazy(module: str, name: str) -> Renderer:
    """`kbsolve.render.<module>.<name>`, imported when first called."""

    def renderer(result: Any, **options: Any) -> str:
        function = getattr(importlib.import_module(f"kbsolve.render.{module}"), name)
        return function(result, **options)

    renderer.__name__ = renderer.__qualname__ = f"{module}.{name}"
    return renderer


RENDERERS: dict[tuple[str, str], Renderer] = {
    # plans and estimates (kbsolve --format ..., kbsolve estimate --format ...)
    ("plan", "table"): _lazy("plan_table", "table"),
    ("plan", "json"): _lazy("data", "as_json"),
    ("plan", "yaml"): _lazy("data", "as_yaml"),
    ("plan", "markdown"): _lazy("plan_markdown", "markdown"),
    ("plan", "explain"): _lazy("explain", "derivation"),  # option=OPTION
    ("estimate", "table"): _lazy("plan_table", "table"),
    ("estimate", "json"): _lazy("data", "as_json"),
    ("estimate", "yaml"): _lazy("data", "as_yaml"),
    ("estimate", "markdown"): _lazy("plan_markdown", "markdown"),
    ("emitted", "text"): _lazy("notices", "emitted"),  # --emit: the paths written
    # audits (kbsolve audit --format ..., lang="en"|"zh") and fixes
    ("audit", "markdown"): _lazy("audit_markdown", "markdown"),
    ("audit", "json"): _lazy("audit_json", "as_json"),
    ("audit", "terminal"): _lazy("audit_terminal", "terminal"),
    ("written", "text"): _lazy("notices", "written"),  # audit --fix: {config: Written}
    ("fix", "text"): _lazy("fix", "text"),
    ("fix", "json"): _lazy("fix", "as_json"),
    # what the KB knows (kbsolve list ...)
    ("listing", "table"): _lazy("listing", "table"),
    ("listing", "json"): _lazy("listing", "as_json"),
    # the rule author's commands (kbsolve kb ...)
    ("kb_summary", "text"): _lazy("kb_check", "summary"),
    ("deep_check", "text"): _lazy("kb_check", "deep"),  # verbose=bool
    ("kb_tests", "text"): _lazy("kb_test", "results"),
    ("coverage", "text"): _lazy("kb_test", "coverage"),
    ("kb_fmt", "text"): _lazy("kb_fmt", "changed"),  # check_only=bool
    ("diagnostic_codes", "markdown"): _lazy("kb_codes", "markdown"),  # docs/dsl.md §9
    # coding agents (kbsolve skill, kbsolve mcp --tools)
    ("skill", "markdown"): _lazy("skill_markdown", "markdown"),
    ("mcp_tools", "markdown"): _lazy("mcp_tools", "markdown"),
}

# result kinds read off the class of a data model; other results pass kind=
KINDS = {"Plan": "plan", "Estimate": "estimate", "AuditReport": "audit", "FixResult": "fix",
         "DeepReport": "deep_check"}


def kind_of(result: Any) -> str:
    kind = KINDS.get(type(result).__name__)
    if kind is None:
        raise TypeError(f"no renderer knows a {type(result).__name__}; pass kind=")
    return kind


def formats(kind: str) -> tuple[str, ...]:
    """The format names a result kind can be rendered in."""
    return tuple(f for k, f in RENDERERS if k == kind)


def render(result: Any, fmt: str, *, kind: str | None = None, **options: Any) -> str:
    """`result` as text in format `fmt`; `options` go to the renderer."""
    kind = kind or kind_of(result)
    renderer = RENDERERS.get((kind, fmt))
    if renderer is None:
        raise ValueError(f"no format '{fmt}' for a {kind}; known: {', '.join(formats(kind))}")
    return renderer(result, **options)


__all__ = ["RENDERERS", "KINDS", "Renderer", "formats", "kind_of", "render"]
