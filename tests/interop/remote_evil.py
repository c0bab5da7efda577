#!/usr/bin/env python3
"""A misbehaving Streamable HTTP server for fsbroker's `proxy --url` tests (standard library only).

usage: remote_evil.py MODE [ARG]

Listens on 127.0.0.1, port 0. The first stdout line is {"port": N}; every later line is one
event: {"event": "http", ...} per request (method, path, session, lastEventId,
authorization, rpc: the JSON-RPC method, id: its id), and "closed" when a held stream's
connection was closed by the client.

Every mode answers like a plain server unless it says otherwise: initialize with a JSON
result and Mcp-Session-Id "s1" (then "s2"...), other notifications and responses with 202
(carrying a bogus Mcp-Session-Id "not-from-initialize", which a client must ignore), other
requests with a JSON result, GET with 405, DELETE with 200.

Modes:
- plain: only that (also stands in for an HTTP proxy that must never be used: it logs).
- notif-sse: answers notifications/initialized with an event stream that never ends.
- init-flood: answers initialize with an event stream carrying 400 roots/list requests
  before the result.
- renew-hang: answers requests of session s1 with 404, and every initialize after the first
  with an event stream that never ends.
- renew-silent: as renew-hang, but every initialize after the first gets no answer at all.
- get404: answers every GET with 404.
- get-idle: answers every GET with an event stream that brings nothing and closes after
  1.2 s.
- resume-storm: answers tools/call with a stream that carries an event id and closes, and
  every GET with an event stream that closes at once.
- legacy-foreign URL: a server of the old transport whose endpoint event names URL.
- bad-session VALUE: initialize's Mcp-Session-Id is VALUE ("space" for one with a space,
  "latin1" for one with a byte above 0x7E).
- redirect URL: answers every POST with 307 to URL.
- redirects N: answers POSTs with a chain of N same-origin 307s before the real answer.
- big-length: answers tools/list with a Content-Length of 1 GB and no body.
- hold: answers tools/call with an event stream held open (keep-alives every 0.2 s).
- unreadable: answers tools/call with an event stream carrying an empty priming event, a
  request it names a key of twice (id "bad1"), a line that is no JSON, then the result.
- say400: answers tools/call with 400 and a JSON-RPC error body.
- lost-on-restart: answers tools/call with a stream that carries an event id and closes,
  and the GET that resumes it with 404 "Session not found" (as after a restart).
- forget400: answers requests of session s1 with 400 "No valid session ID provided" (some
  servers say 400, not 404, for a session they forgot).
- forget400-always: as forget400, for every session.
- slow SECONDS: answers tools/call with a JSON result after SECONDS.
- modern: a modern-only server of revision 2026-07-28 (no session): initialize and any
  request without `MCP-Protocol-Version: 2026-07-28` get 400 with a -32022 error naming only
  2026-07-28; a request whose `Mcp-Method` or `Mcp-Name` does not mirror its body gets 400
  -32020; server/discover is answered; tools/call "roots" answers input_required with a
  roots/list input request (requestState "st1") until the retry carries inputResponses,
  then the roots it got as text; tools/call "hold" streams keep-alives until the client
  closes the stream ("closed" event); subscriptions/listen streams an acknowledgement and
  notifications/tools/list_changed, then keep-alives (or, when its filter carries
  `dropAfterFirst`, ends the stream there without an answer); GET and DELETE get 405;
  notifications 202. Events carry the mcpMethod and mcpName headers.
- blackhole: no HTTP at all: a socket whose accept queue is full, so connecting to it hangs
  as with a host that drops packets.
"""
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
ARG = sys.argv[2] if len(sys.argv) > 2 else ""

if MODE == "blackhole":
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    held = []
    # Fill the accept queue; the connection that does not complete marks it full.
    while True:
        c = socket.socket()
        c.settimeout(0.5)
        try:
            c.connect(hole.getsockname())
            held.append(c)
        except OSError:
            break
    print(json.dumps({"port": hole.getsockname()[1]}), flush=True)
    sys.stdin.read()
    sys.exit(0)
lock = threading.Lock()
inits = 0


def emit(**kw):
    with lock:
        print(json.dumps(kw), flush=True)


def init_result(rid):
    return {"jsonrpc": "2.0", "id": rid, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "evil", "version": "1"}}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def note(self, msg=None):
        rpc = msg.get("method") if isinstance(msg, dict) else None
        rid = msg.get("id") if isinstance(msg, dict) else None
        emit(event="http", method=self.command, path=self.path,
             session=self.headers.get("mcp-session-id"),
             lastEventId=self.headers.get("last-event-id"),
             authorization=self.headers.get("authorization"),
             protocolVersion=self.headers.get("mcp-protocol-version"),
             mcpMethod=self.headers.get("mcp-method"),
             mcpName=self.headers.get("mcp-name"),
             rpc=rpc, id=rid,
             error=(msg.get("error") or {}).get("code") if isinstance(msg, dict) else None,
             cancels=(msg.get("params") or {}).get("requestId")
             if rpc == "notifications/cancelled" else None)

    def body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n)
        try:
            return json.loads(raw or b"null")
        except ValueError:
            return None

    def json(self, status, obj, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def empty(self, status, extra=None):
        self.send_response(status)
        self.send_header("content-length", "0")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def sse_start(self, extra=None):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True

    def sse(self, data=None, id=None, event=None, raw=None):
        out = raw if raw is not None else ""
        if raw is None:
            if event:
                out += f"event: {event}\n"
            if id is not None:
                out += f"id: {id}\n"
            if data is not None:
                out += f"data: {json.dumps(data)}\n"
            out += "\n"
        self.wfile.write(out.encode())
        self.wfile.flush()

    def forever(self, every=1.0, what=None):
        """Keep-alives until the client goes; reports the close as `what`."""
        try:
            while True:
                time.sleep(every)
                self.sse(raw=": keep-alive\n\n")
        except OSError:
            if what is not None:
                emit(event="closed", what=what)

    def modern(self, msg, method, rid):
        """The `modern` mode: a modern-only server of revision 2026-07-28."""
        version = self.headers.get("mcp-protocol-version")
        if rid is None:
            self.empty(202)
            return
        params = msg.get("params") or {}

        def error(code, message, data=None):
            e = {"code": code, "message": message}
            if data is not None:
                e["data"] = data
            self.json(400, {"jsonrpc": "2.0", "id": rid, "error": e})

        if version != "2026-07-28" or method == "initialize":
            error(-32022, "Unsupported protocol version", {"supported": ["2026-07-28"]})
            return
        named = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                 "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
        if self.headers.get("mcp-method") != method or (
                method in named and self.headers.get("mcp-name") != params.get(named[method])):
            error(-32020, "Header mismatch")
            return
        if (params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion") != version:
            error(-32020, "Header mismatch: version")
            return
        if method == "server/discover":
            self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {
                "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "modern", "version": "1"}}})
            return
        if method == "tools/call" and params.get("name") == "roots":
            answers = params.get("inputResponses") or {}
            if "r" not in answers:
                self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {
                    "resultType": "input_required",
                    "inputRequests": {"r": {"method": "roots/list", "params": {}}},
                    "requestState": "st1"}})
                return
            got = {"state": params.get("requestState"), "roots": answers["r"].get("roots")}
            self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {
                "content": [{"type": "text", "text": json.dumps(got)}]}})
            return
        if method == "tools/call" and params.get("name") == "hold":
            try:
                self.sse_start()
            except OSError:
                # The client closed the stream before it started: that is a close too.
                emit(event="closed", what=rid)
                return
            self.forever(0.2, what=rid)
            return
        if method == "subscriptions/listen":
            try:
                self.sse_start()
                self.sse({"jsonrpc": "2.0",
                          "method": "notifications/subscriptions/acknowledged", "params": {}})
                self.sse({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            except OSError:
                emit(event="closed", what=rid)
                return
            if (params.get("notifications") or {}).get("dropAfterFirst"):
                # The stream drops, with no answer, as when the server restarts.
                emit(event="dropped", what=rid)
                self.close_connection = True
                return
            self.forever(0.2, what=rid)
            return
        self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})

    def do_DELETE(self):
        self.note()
        if MODE == "modern":
            self.empty(405, {"allow": "POST"})
            return
        emit(event="delete", session=self.headers.get("mcp-session-id"))
        self.empty(200)

    def do_GET(self):
        self.note()
        if MODE == "legacy-foreign":
            self.sse_start()
            self.sse(raw=f"event: endpoint\ndata: {ARG}\n\n")
            self.forever()
        elif MODE == "get404":
            self.empty(404)
        elif MODE == "lost-on-restart" and self.headers.get("last-event-id"):
            self.json(404, {"jsonrpc": "2.0", "id": None,
                            "error": {"code": -32001, "message": "Session not found"}})
        elif MODE == "resume-storm":
            self.sse_start()
        elif MODE == "modern":
            self.empty(405, {"allow": "POST"})
        elif MODE == "get-idle":
            self.sse_start()
            time.sleep(1.2)
        else:
            self.empty(405)

    def do_POST(self):
        global inits
        if MODE == "redirects" and self.path.startswith("/hop"):
            hop = int(self.path[4:])
            if hop < int(ARG):
                self.body()
                self.note()
                self.empty(307, {"location": f"/hop{hop + 1}"})
                return
        msg = self.body()
        self.note(msg)
        if MODE == "legacy-foreign":
            self.empty(405)
            return
        if MODE == "redirect":
            self.empty(307, {"location": ARG})
            return
        if MODE == "redirects" and not self.path.startswith("/hop"):
            self.empty(307, {"location": "/hop1"})
            return
        method = msg.get("method") if isinstance(msg, dict) else None
        rid = msg.get("id") if isinstance(msg, dict) else None
        sid = self.headers.get("mcp-session-id")
        if MODE == "modern":
            self.modern(msg, method, rid)
            return
        if method == "initialize":
            with lock:
                inits += 1
                n = inits
            emit(event="initialize", n=n)
            session = f"s{n}"
            if MODE == "bad-session":
                session = {"space": "bad id", "latin1": "caf\u00e9"}[ARG]
            if MODE == "renew-silent" and n > 1:
                time.sleep(60)
                return
            if MODE == "renew-hang" and n > 1:
                self.sse_start({"mcp-session-id": session})
                self.forever()
                return
            if MODE == "init-flood":
                self.sse_start({"mcp-session-id": session})
                try:
                    for i in range(400):
                        self.sse({"jsonrpc": "2.0", "id": f"r{i}", "method": "roots/list"})
                    self.sse(init_result(rid))
                except OSError as e:
                    emit(event="error", message=str(e))
                return
            self.json(200, init_result(rid), {"mcp-session-id": session})
            return
        if rid is None or method is None:
            # A notification or a response.
            if MODE == "notif-sse" and method == "notifications/initialized":
                self.sse_start()
                self.forever()
                return
            self.empty(202, {"mcp-session-id": "not-from-initialize"})
            return
        if MODE in ("renew-hang", "renew-silent") and sid == "s1":
            self.empty(404)
            return
        if (MODE == "forget400" and sid == "s1") or MODE == "forget400-always":
            self.json(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000, "message": "Bad Request: No valid session ID provided"}})
            return
        if MODE == "slow" and method == "tools/call":
            time.sleep(float(ARG))
            self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
            return
        if MODE == "say400" and method == "tools/call":
            self.json(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32602, "message": "Bad Request: arguments rejected",
                "data": {"field": "x"}}})
            return
        if MODE == "lost-on-restart" and method == "tools/call":
            self.sse_start()
            self.sse(raw="id: ev1\nretry: 0\ndata:\n\n")
            return
        if MODE == "resume-storm" and method == "tools/call":
            self.sse_start()
            self.sse(raw="id: ev1\nretry: 0\ndata:\n\n")
            return
        if MODE == "big-length" and method == "tools/list":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(1 << 30))
            self.end_headers()
            self.wfile.flush()
            time.sleep(30)
            return
        if MODE == "unreadable" and method == "tools/call":
            self.sse_start()
            self.sse(raw="data: {}\n\n")
            self.sse(raw='data: {"jsonrpc":"2.0","id":"bad1","method":"roots/list",'
                     '"method":"sampling/createMessage"}\n\n')
            self.sse(raw="data: not json\n\n")
            self.sse({"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
            return
        if MODE == "hold" and method == "tools/call":
            self.sse_start()
            self.forever(0.2, what=rid)
            return
        self.json(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})


# A burst of connections must wait in the accept queue, not be dropped.
ThreadingHTTPServer.request_queue_size = 1024
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
emit(port=server.server_address[1])
threading.Thread(target=server.serve_forever, daemon=True).start()
# The test ends the server by closing its stdin (or killing it).
sys.stdin.read()
