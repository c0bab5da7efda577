"""The Python SDK's (`mcp` 2.x) Streamable HTTP server with the tools of py_server.py (and
`resolved_roots`, which asks for roots through the SDK's era-agnostic resolver), for
the `proxy --url` era tests. It serves both eras: the legacy transport for `initialize`
sessions and the single-exchange transport of revision 2026-07-28 for requests carrying
`MCP-Protocol-Version: 2026-07-28`.

Listens on 127.0.0.1, port 0; the first stdout line is {"port": N}. Ends when stdin closes.
"""

import asyncio
import json
import os
import socket
import sys
import threading

import uvicorn

from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import ListRoots, Resolve

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_server import app  # noqa: E402


def ask_roots() -> ListRoots:
    """Asks for the client's roots the way that works in both eras: mid-call in a legacy
    session, as an `input_required` result in a 2026-07-28 one."""
    return ListRoots()


@app.tool()
async def resolved_roots(got: Annotated[types.ListRootsResult, Resolve(ask_roots)]) -> str:
    """The client's roots, through the SDK's `ListRoots` resolver."""
    return json.dumps([{"uri": str(r.uri), "name": r.name} for r in got.roots])


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    def stop_on_eof() -> None:
        sys.stdin.read()
        server.should_exit = True

    threading.Thread(target=stop_on_eof, daemon=True).start()
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
