"""kbsolve for coding agents: `kbsolve mcp` (the api as MCP tools over stdio) and
`kbsolve skill` (SKILL.md from the KB). `tools.py` holds the tools without the
SDK; `server.py` serves them with it (the `mcp` extra); `skill.py` gathers the
skill's facts and writes it. docs/mcp.md describes them."""
