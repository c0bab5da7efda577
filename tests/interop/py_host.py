"""A host written with the official Python SDK (`mcp`), for the interop tests.

Usage: py_host.py TOOL COMMAND [ARGS...]. Launches COMMAND (the proxy, or the server itself)
with the SDK's stdio client, initializes, calls the server's tool TOOL, and prints one JSON
line: {"protocolVersion", "serverInfo", "result": <the tool's JSON answer>}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    tool, command, *args = sys.argv[1:]
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            called = await session.call_tool(tool, {})
            if called.is_error:
                raise SystemExit(f"tool {tool} failed: {called.content}")
            print(
                json.dumps(
                    {
                        "protocolVersion": init.protocol_version,
                        "serverInfo": init.server_info.model_dump(exclude_none=True),
                        "result": json.loads(called.content[0].text),
                    }
                ),
                flush=True,
            )


asyncio.run(main())
