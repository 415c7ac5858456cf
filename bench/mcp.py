"""`python -m bench.mcp`: a warm MCP tool call against the api call it wraps.

One `kbsolve mcp` server (the SDK's stdio client starts it), the KB warm in both
processes; each round times the api call in this process (`api.solve`,
`api.listing`) and then the tool for the same query over stdio (argument check, solve, JSON, the SDK's framing and
the client's validation of the result against the Plan schema), interleaved so
that the shared machine's load falls on both alike. Wall medians, and CPU per
call: this process's for the api, the server's (/proc) and the client's for the
tool. Target: tool <= api + 10 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time

QUERIES = [("plan", {"gpus": "8xA100", "model": "wan14b"}),
           ("plan", {"gpus": "8xA100", "model": "qwen3-8b"}),
           ("list", {"what": "gpus"})]  # a cheap call: the protocol's own cost
ROUNDS = 15


def _api_call(tool: str, arguments: dict, kb):
    """The api call a tool wraps (what the CLI calls before rendering)."""
    from kbsolve import api
    if tool == "plan":
        return lambda: api.solve(arguments, kb)
    return lambda: api.listing(kb, arguments["what"])


def _children_cpu() -> float:
    """CPU seconds of this process's children that are alive (the server)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def measure(tool: str, query: dict, rounds: int) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from kbsolve import api
    kb = api.load_kb()
    call_api = _api_call(tool, query, kb)
    call_api()
    params = StdioServerParameters(command=sys.executable, args=["-m", "kbsolve", "mcp"],
                                   env=dict(os.environ))
    api_wall, tool_wall, ping_wall = [], [], []
    api_cpu = client_cpu = server_cpu = 0.0
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # the client caches the output schemas
        first = await session.call_tool(tool, query)  # warms the server's KB
        assert json.loads(first.content[0].text) in (first.structured_content,
                                                     first.structured_content.get("rows"))
        for _ in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            call_api()
            api_wall.append(time.perf_counter() - wall)
            api_cpu += time.process_time() - cpu
            wall, cpu, server = time.perf_counter(), time.process_time(), _children_cpu()
            result = await session.call_tool(tool, query)
            tool_wall.append(time.perf_counter() - wall)
            client_cpu += time.process_time() - cpu
            server_cpu += _children_cpu() - server
            assert not result.is_error
            wall = time.perf_counter()
            await session.send_ping()
            ping_wall.append(time.perf_counter() - wall)
    ms = 1000
    return {"tool": tool, "arguments": query, "rounds": rounds,
            "api_wall_ms": round(statistics.median(api_wall) * ms, 1),
            "tool_wall_ms": round(statistics.median(tool_wall) * ms, 1),
            "overhead_ms": round((statistics.median(tool_wall) - statistics.median(api_wall))
                                 * ms, 1),
            "ping_wall_ms": round(statistics.median(ping_wall) * ms, 2),
            "api_cpu_ms": round(api_cpu / rounds * ms, 1),
            "server_cpu_ms": round(server_cpu / rounds * ms, 1),
            "client_cpu_ms": round(client_cpu / rounds * ms, 1)}


def main() -> None:
    for tool, query in QUERIES:
        print(json.dumps(asyncio.run(measure(tool, query, ROUNDS))))


if __name__ == "__main__":
    main()
