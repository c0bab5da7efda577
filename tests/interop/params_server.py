"""A scripted modern-only MCP server of revision 2026-07-28 for `tests/remote_params.rs`:
it lists tools carrying `x-mcp-header` declarations (some valid, some not) and logs the
`Mcp-Param-*` headers of every POST, so the test can check what the proxy mirrors.

Standard library only. Prints {"port": N} first, then one JSON event per POST:
{"event": "http", "method": "POST", "rpc", "id", "params": {lower-case name: value} of the
mcp-param-* headers, "headers": every header name, lower-case}. `sse` as the first argument
answers tools/list as an event stream instead of a JSON body; `strict` refuses a
tools/call whose declared arguments have no Mcp-Param-* header (400, -32020), as the
revision requires of a server. tools/list is paginated: the
first page has nextCursor "p2". tools/call answers the arguments it got as text. Ends when
its standard input closes.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SSE = "sse" in sys.argv[1:]
STRICT = "strict" in sys.argv[1:]
lock = threading.Lock()


def emit(**kw):
    with lock:
        print(json.dumps(kw), flush=True)


def prop(ty, header=None, **more):
    p = {"type": ty}
    if header is not None:
        p["x-mcp-header"] = header
    p.update(more)
    return p


def tool(name, props):
    return {"name": name, "inputSchema": {"type": "object", "properties": props}}


PAGE1 = [
    tool("echo", {"s": prop("string", "S"), "n": prop("integer", "N"),
                  "b": prop("boolean", "B"), "opt": prop("string", "Opt")}),
    tool("bad_number", {"x": prop("number", "X")}),
    tool("bad_duplicate", {"a": prop("string", "Dup"), "b": prop("string", "dup")}),
    tool("bad_items", {"a": prop("array", items=prop("string", "Item"))}),
    tool("bad_token", {"a": prop("string", "A B")}),
    tool("bad_injection", {"a": prop("string", "X\r\nEvil")}),
    tool("bad_empty", {"a": prop("string", "")}),
    tool("bad_anyof", {"a": {"anyOf": [prop("string", "Any")]}}),
    tool("plain", {"q": prop("string")}),
]
PAGE2 = [
    tool("nested", {"cfg": prop("object", properties={"region": prop("string", "Region")})}),
    tool("bad_object", {"o": prop("object", "Obj")}),
]


def declared(name):
    """The (path, header) pairs the listed tool `name` declares (top level only)."""
    for t in PAGE1 + PAGE2:
        if t["name"] == name:
            return [([k], v["x-mcp-header"]) for k, v in t["inputSchema"]["properties"].items()
                    if "x-mcp-header" in v]
    return []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        if SSE and obj.get("result", {}).get("tools") is not None:
            data = b"event: message\ndata: " + data + b"\n\n"
            self.send_header("content-type", "text/event-stream")
        else:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def missing(self, p):
        args = p.get("arguments") or {}
        for path, header in declared(p.get("name")):
            if args.get(path[0]) is not None and self.headers.get("mcp-param-" + header) is None:
                return True
        return False

    def refuse(self, rid):
        data = json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
            "code": -32020, "message": "Header mismatch: Mcp-Param header missing"}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        msg = json.loads(self.rfile.read(n) or b"null")
        method = msg.get("method")
        rid = msg.get("id")
        names = [k.lower() for k in self.headers.keys()]
        params = {k.lower(): v for k, v in self.headers.items()
                  if k.lower().startswith("mcp-param-")}
        emit(event="http", method="POST", rpc=method, id=rid, params=params, headers=names)
        if rid is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        p = msg.get("params") or {}
        if method == "server/discover":
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "params", "version": "1"}}
        elif method == "tools/list":
            if p.get("cursor") == "p2":
                result = {"tools": PAGE2}
            else:
                result = {"tools": PAGE1, "nextCursor": "p2"}
        elif method == "tools/call" and STRICT and self.missing(p):
            self.refuse(rid)
            return
        elif method == "tools/call":
            text = json.dumps({"name": p.get("name"), "arguments": p.get("arguments")})
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {}
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    emit(port=server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
