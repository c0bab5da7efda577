"""A host written with the Python SDK's `mcp.Client` (2.x), for the era tests.

Usage: py_era_host.py MODE TOOL COMMAND [ARGS...]. MODE is the client's `mode` ("auto", the
SDK's default, probes `server/discover` and falls back to `initialize`; "legacy"; or a modern
version). Launches COMMAND over stdio, calls TOOL once, and prints one JSON line:
{"protocolVersion", "result": <the tool's JSON answer>, "hostRootsCalls": how many times the
host's own roots handler ran, "hostElicitations": how many forms it answered (accepting
with {"ok": true})}, or {"error": {code, message}, "hostRootsCalls"} when the SDK
raised an MCP error. The host's roots handler answers a root no broker offers, so a
test can tell whose roots a server got.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

calls = []
elicited = []


async def host_roots(context):
    calls.append(1)
    return types.ListRootsResult(roots=[types.Root(uri="file:///host-own-root", name="host-own")])


def first(group):
    """The first exception in a (maybe nested) exception group."""
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


async def host_elicit(context, params):
    elicited.append(params.message)
    return types.ElicitResult(action="accept", content={"ok": True})


async def main() -> None:
    mode, tool, command, *args = sys.argv[1:]
    params = StdioServerParameters(command=command, args=args)
    try:
        async with Client(
            params, mode=mode, list_roots_callback=host_roots, elicitation_callback=host_elicit
        ) as client:
            called = await client.call_tool(tool, {})
            text = called.content[0].text if called.content else "null"
            out = {
                "protocolVersion": client.protocol_version,
                "isError": bool(called.is_error),
                "result": json.loads(text) if not called.is_error else text,
            }
    except* MCPError as group:
        e = first(group)
        out = {"error": {"code": e.error.code, "message": e.error.message}}
    out["hostRootsCalls"] = len(calls)
    out["hostElicitations"] = len(elicited)
    print(json.dumps(out), flush=True)


asyncio.run(main())
