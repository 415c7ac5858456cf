"""`kbsolve mcp`: the tools (tools.py) served over stdio on the official MCP SDK's
low-level Server. A call runs in a worker thread, one at a time (the KB's caches
and Z3 are not thread-safe), so that the server keeps answering (pings,
progress) while the solver works; a call that asked for progress gets a
notification when it starts, every second while it runs, and when it ends. An
error is a tool result with isError, the CLI's text and, in `_meta`, the CLI's
exit code: the server itself never stops on bad input."""

from __future__ import annotations

import threading
from importlib.metadata import PackageNotFoundError, version

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from kbsolve.mcp_server.tools import TOOLS, Answer, Session, call

EXIT_CODE = "kbsolve/exit_code"  # the key of the CLI's exit code in a result's _meta
HEARTBEAT_S = 1.0
WORKER_STACK = 64 * 1024 * 1024  # the CLI's deep_recursion room, as the main thread has

INSTRUCTIONS = ("kbsolve answers questions about ML training configurations with checked "
                "results (the frameworks it knows: the list tool's options and rules): plan, "
                "estimate, check_config, audit, fix, explain, list. Prefer its answers to "
                "reasoning from a checklist; quote its reasons and sources.")


def tool_specs() -> list[types.Tool]:
    return [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema(),
                       output_schema=t.output_schema()) for t in TOOLS.values()]


def result_of(answer: Answer) -> types.CallToolResult:
    meta = {EXIT_CODE: answer.exit_code}
    content = [types.TextContent(type="text", text=answer.text)]
    if answer.error:
        return types.CallToolResult(content=content, is_error=True, _meta=meta)
    return types.CallToolResult(content=content, structured_content=answer.data, _meta=meta)


def build(packs: list[str]) -> Server:
    session = Session(list(packs))
    specs: list[types.Tool] = []
    one_at_a_time = anyio.CapacityLimiter(1)  # the KB's caches and Z3 are not thread-safe

    async def list_tools(ctx, params) -> types.ListToolsResult:
        if not specs:
            specs.extend(tool_specs())
        return types.ListToolsResult(tools=specs)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        report = ctx.session.report_progress
        beats = [0]

        async def beat() -> None:
            while True:
                await report(beats[0], None, f"{params.name}: working ({beats[0]} s)")
                await anyio.sleep(HEARTBEAT_S)
                beats[0] += 1

        async with anyio.create_task_group() as group:
            group.start_soon(beat)
            answer = await anyio.to_thread.run_sync(call, session, params.name,
                                                    dict(params.arguments or {}),
                                                    limiter=one_at_a_time)
            group.cancel_scope.cancel()
        await report(beats[0] + 1, beats[0] + 1, f"{params.name}: done")
        return result_of(answer)

    return Server("kbsolve", version=_version(), instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(packs: list[str]) -> None:
    """Serve until the client closes stdin."""
    threading.stack_size(WORKER_STACK)
    server = build(packs)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def _version() -> str:
    try:
        return version("kbsolve")
    except PackageNotFoundError:  # pragma: no cover - a checkout without metadata
        return "0"


__all__ = ["EXIT_CODE", "build", "serve", "tool_specs", "result_of"]
