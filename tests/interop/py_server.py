"""An MCP server written with the official Python SDK (`mcp`), for the interop tests.

Its tools ask the client through the SDK's own API:
  roots   `list_roots()`: the client's roots as `[{uri, name}]`, or `{error: {code, message}}`
  client  the capabilities the client declared in `initialize`
Answers are JSON text, so the test sees exactly what came back through the SDK.
"""

import json
import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

# The SDK warns that roots are deprecated from revision 2026-07-28; the sessions here are
# 2025-11-25, where they are current.
warnings.filterwarnings("ignore", message=".*roots capability is deprecated.*")

app = MCPServer("py-roots-server")


@app.tool()
async def roots(ctx: Context) -> str:
    """The client's roots, through the SDK's list_roots()."""
    try:
        result = await ctx.session.list_roots()
    except MCPError as e:
        return json.dumps({"error": {"code": e.error.code, "message": e.error.message}})
    return json.dumps([{"uri": str(r.uri), "name": r.name} for r in result.roots])


@app.tool()
async def client(ctx: Context) -> str:
    """The client's declared capabilities."""
    caps = ctx.client_capabilities
    return caps.model_dump_json(by_alias=True, exclude_none=True) if caps else "null"


if __name__ == "__main__":
    app.run()
