"""kbsolve for coding agents: `kbsolve mcp` (the api as MCP tools over stdio) and
`kbsolve skill` (SKILL.md from the KB). `tools.py` holds the tools without the
SDK; `server.py` serves them with it (the `mcp` extra); `skill.py` gathers the
skill's facts and writes it. docs/mcp.md describes them.

A front end beside the CLI, over the api: it imports `kbsolve.api`, which knows
nothing of it. The functions below are what `kbsolve mcp` and `kbsolve skill`
(cli/agents.py) call; importing this package loads nothing else."""

from __future__ import annotations


def serve_mcp(packs: list[str] | None = None) -> None:
    """Serve the tools over MCP on stdio until the client closes; needs the `mcp`
    extra: pip install 'kbsolve[mcp]'."""
    import importlib.util

    from kbsolve.api import Diagnostic, KbError
    if importlib.util.find_spec("mcp") is None:
        raise KbError(Diagnostic("kbsolve mcp needs the MCP SDK: pip install 'kbsolve[mcp]'"))
    from kbsolve.mcp_server.server import serve
    serve(list(packs or ()))


def mcp_tools() -> list[dict]:
    """Each MCP tool's name, description and JSON schemas (arguments, result)."""
    from kbsolve.mcp_server.tools import TOOLS
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema(),
             "output_schema": t.output_schema()} for t in TOOLS.values()]


def skill_facts(packs: list[str] | None = None, kb=None) -> dict:
    """The agent skill's facts from the KB: frameworks, detection signs, tools (not
    named `skill`: importing the submodule skill.py binds that name on this package)."""
    from kbsolve.api import load_kb
    from kbsolve.mcp_server.skill import facts
    return facts(kb or load_kb(packs))


def write_skill(text: str, directory: str) -> list[str]:
    """DIR/SKILL.md; refuses to replace a file `kbsolve skill` did not write."""
    from kbsolve.mcp_server.skill import write
    return write(text, directory)

