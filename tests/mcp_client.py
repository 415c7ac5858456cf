"""A real MCP client for the tests: the SDK's own stdio client starts `python -m
kbsolve mcp` as a child process; its event loop runs in a thread of its own, so
that plain (synchronous) tests call tools through `McpClient.call`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any

from cli_helpers import kbsolve_argv

CALL_TIMEOUT_S = 300


class McpClient:
    def __init__(self, env: dict[str, str], extra_args: tuple[str, ...] = (),
                 cwd: str | None = None):
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        argv = kbsolve_argv("mcp", *extra_args)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
        self.stderr = open(os.devnull, "w")  # noqa: SIM115 - closed in close()
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._stop = asyncio.Event()

        async def serve() -> None:  # the contexts open and close in this one task
            try:
                async with stdio_client(params, errlog=self.stderr) as (read, write), \
                        ClientSession(read, write) as session:
                    await session.initialize()
                    self._ready.set_result(session)
                    await self._stop.wait()
            except BaseException as error:
                if not self._ready.done():
                    self._ready.set_exception(error)
                raise

        self._main = asyncio.run_coroutine_threadsafe(serve(), self._loop)
        self.session = self._ready.result(CALL_TIMEOUT_S)

    def _run(self, coroutine, timeout: float = CALL_TIMEOUT_S):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def tools(self):
        return self._run(self.session.list_tools()).tools

    def call(self, name: str, arguments: dict[str, Any] | None = None,
             progress: list | None = None):
        """The CallToolResult; `progress` collects (progress, total, message)."""
        async def on_progress(value, total, message):
            progress.append((value, total, message))
        return self._run(self.session.call_tool(
            name, arguments, progress_callback=on_progress if progress is not None else None))

    def call_together(self, calls: list[tuple[str, dict]]):
        """Several calls sent at once; their results in order."""
        async def together():
            return await asyncio.gather(*(self.session.call_tool(name, arguments)
                                          for name, arguments in calls))
        return self._run(together())

    def ping(self) -> None:
        self._run(self.session.send_ping(), timeout=60)

    def close(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._main.result(60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self.stderr.close()


def exit_code(result) -> int:
    return (result.meta or {}).get("kbsolve/exit_code")


def text_of(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")
