#!/usr/bin/env python3
"""The added latency of a proxied `tools/call` that needs one roots round, modern versus
legacy, measured in the same run (Python standard library only).

usage: benches/era.py [--calls N] [--bin PATH]

For each era, a scripted stdio server (this script with `--server ERA`) answers the tool
`roots` only after one roots round:
- legacy (`initialize`, 2025-11-25): it sends its own `roots/list` request mid-call and
  answers the call once that is answered;
- modern (2026-07-28, no `initialize`): it returns an `input_required` result with a
  `roots/list` input request, and answers the retry that carries `inputResponses`.

Each call is timed from the client's request to its final answer, sequentially, N times
(after 20 unmeasured ones), twice per era:
- direct: the client talks to the server itself and answers the roots round (the legacy
  `roots/list` request, or the modern retry);
- proxied: through `fsbroker proxy --era ERA --root DIR --consent deny -- SERVER`, where the
  broker answers the roots and, in the modern era, the proxy retries upstream itself.

The same is measured over HTTP (`proxy --url`), with scripted Streamable HTTP servers (this
script with `--http-server ERA`): the legacy one (2025-11-25: a session, the roots/list
request on the call's event stream, its answer POSTed back) and the modern one (2026-07-28:
no session, each message a POST, `input_required` in a JSON answer). There "direct" is an
HTTP client in this script doing the same exchanges.

Added latency = proxied - direct, per percentile. `--bin` defaults to the release build in
$CARGO_TARGET_DIR (or target/). Prints a Markdown table.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
HOST_ROOTS = [{"uri": "file:///host-own-root", "name": "host-own"}]


def out(stream, msg):
    stream.write(json.dumps(msg, separators=(",", ":")) + "\n")
    stream.flush()


def serve(era):
    """The scripted server: answers `tools/call roots` after one roots round."""
    rin, rout = sys.stdin, sys.stdout
    waiting = {}  # legacy: our roots/list id -> the call's id
    n = 0
    for raw in rin:
        try:
            m = json.loads(raw)
        except ValueError:
            continue
        mid, method, params = m.get("id"), m.get("method"), m.get("params") or {}
        if method is None and mid in waiting:
            call = waiting.pop(mid)
            roots = (m.get("result") or {}).get("roots")
            out(rout, {"jsonrpc": "2.0", "id": call, "result": {
                "content": [{"type": "text", "text": json.dumps(roots)}]}})
        elif method == "initialize":
            out(rout, {"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params.get("protocolVersion", LEGACY),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "bench", "version": "1"}}})
        elif method == "server/discover":
            out(rout, {"jsonrpc": "2.0", "id": mid, "result": {
                "supportedVersions": [MODERN], "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench", "version": "1"}}})
        elif method == "tools/call" and era == "legacy":
            n += 1
            ask = f"srv-{n}"
            waiting[ask] = mid
            out(rout, {"jsonrpc": "2.0", "id": ask, "method": "roots/list"})
        elif method == "tools/call":
            answers = params.get("inputResponses") or {}
            if "r" not in answers:
                out(rout, {"jsonrpc": "2.0", "id": mid, "result": {
                    "resultType": "input_required", "requestState": "s",
                    "inputRequests": {"r": {"method": "roots/list", "params": {}}}}})
            else:
                out(rout, {"jsonrpc": "2.0", "id": mid, "result": {
                    "resultType": "complete",
                    "content": [{"type": "text", "text": json.dumps(answers["r"]["roots"])}]}})
        elif mid is not None and method is not None:
            out(rout, {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601,
                                                             "message": "Method not found"}})


class Client:
    """A host on a child's stdio that answers the roots round itself when it is asked."""

    def __init__(self, argv, era):
        self.era = era
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.next = 0

    def send(self, msg):
        out(self.p.stdin, msg)

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("the peer ended")
        return json.loads(line)

    def wait(self, rid):
        """The response to `rid`, answering the server's roots/list on the way."""
        while True:
            m = self.read()
            if m.get("method") == "roots/list" and "id" in m:
                self.send({"jsonrpc": "2.0", "id": m["id"], "result": {"roots": HOST_ROOTS}})
            elif m.get("id") == rid and "method" not in m:
                return m

    def request(self, method, params):
        self.next += 1
        rid = self.next
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.wait(rid)

    def meta(self):
        return {META_VERSION: MODERN, META_CAPS: {"roots": {}}}

    def start(self):
        if self.era == "legacy":
            r = self.request("initialize", {"protocolVersion": LEGACY,
                                            "capabilities": {"roots": {}},
                                            "clientInfo": {"name": "bench", "version": "1"}})
            assert "result" in r, r
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            r = self.request("server/discover", {"_meta": self.meta()})
            assert "result" in r, r

    def call(self):
        """One `tools/call roots`, with its roots round; returns the roots the server got."""
        params = {"name": "roots", "arguments": {}}
        if self.era == "modern":
            params["_meta"] = self.meta()
        r = self.request("tools/call", params)
        if r.get("result", {}).get("resultType") == "input_required":
            retry = dict(params, inputResponses={"r": {"roots": HOST_ROOTS}},
                         requestState=r["result"].get("requestState"))
            r = self.request("tools/call", retry)
        assert "result" in r, r
        return json.loads(r["result"]["content"][0]["text"])

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def http_serve(era):
    """A scripted Streamable HTTP server of `era` on 127.0.0.1 (port printed first)."""
    lock = threading.Lock()
    waiting = {}  # legacy: our roots/list id -> [Event, roots]
    count = [0]

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: with Nagle's algorithm, the second
        # would wait for the client's delayed ACK (40 ms), which would measure nothing real.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def reply(self, status, obj=None, headers=None):
            data = json.dumps(obj).encode() if obj is not None else b""
            self.send_response(status)
            if obj is not None:
                self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply(405)

        def do_DELETE(self):
            self.reply(405 if era == "modern" else 200)

        def do_POST(self):
            m = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            mid, method, params = m.get("id"), m.get("method"), m.get("params") or {}
            if method is None and mid is not None:
                with lock:
                    slot = waiting.pop(mid, None)
                if slot:
                    slot[1] = (m.get("result") or {}).get("roots")
                    slot[0].set()
                return self.reply(202)
            if mid is None:
                return self.reply(202)
            if method == "initialize":
                return self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": {
                    "protocolVersion": params.get("protocolVersion", LEGACY),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench", "version": "1"}}},
                    {"mcp-session-id": "bench-session"})
            if method == "server/discover":
                return self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": {
                    "supportedVersions": [MODERN], "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench", "version": "1"}}})
            if method == "tools/call" and era == "legacy":
                with lock:
                    count[0] += 1
                    ask = f"srv-{count[0]}"
                    slot = [threading.Event(), None]
                    waiting[ask] = slot
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                q = {"jsonrpc": "2.0", "id": ask, "method": "roots/list"}
                self.wfile.write(f"data: {json.dumps(q)}\n\n".encode())
                self.wfile.flush()
                slot[0].wait(30)
                r = {"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": json.dumps(slot[1])}]}}
                self.wfile.write(f"data: {json.dumps(r)}\n\n".encode())
                self.wfile.flush()
                return
            if method == "tools/call":
                answers = params.get("inputResponses") or {}
                if "r" not in answers:
                    return self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": {
                        "resultType": "input_required", "requestState": "s",
                        "inputRequests": {"r": {"method": "roots/list", "params": {}}}}})
                return self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": {
                    "resultType": "complete",
                    "content": [{"type": "text", "text": json.dumps(answers["r"]["roots"])}]}})
            self.reply(404, {"jsonrpc": "2.0", "id": mid,
                             "error": {"code": -32601, "message": "Method not found"}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


class HttpClient(Client):
    """The direct HTTP client: the same exchanges a client of `era` makes, roots answered
    by itself."""

    def __init__(self, port, era):  # Client's would start a child.
        self.port, self.era = port, era
        self.conn = http.client.HTTPConnection("127.0.0.1", port)
        # The answers to the server's requests go on a connection of their own, kept open.
        self.answers = http.client.HTTPConnection("127.0.0.1", port)
        self.next = 0
        self.session = None

    def post(self, msg, conn=None):
        headers = {"accept": "application/json, text/event-stream",
                   "content-type": "application/json"}
        if self.era == "modern":
            headers.update({"mcp-protocol-version": MODERN, "mcp-method": msg.get("method", "")})
            if msg.get("method") == "tools/call":
                headers["mcp-name"] = msg["params"]["name"]
        elif self.session:
            headers.update({"mcp-session-id": self.session, "mcp-protocol-version": LEGACY})
        c = conn or self.conn
        # Bytes, so http.client sends headers and body in one write.
        c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=headers)
        return c.getresponse()

    def request(self, method, params):
        self.next += 1
        rid = self.next
        r = self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if r.getheader("mcp-session-id"):
            self.session = r.getheader("mcp-session-id")
        if r.getheader("content-type", "").startswith("text/event-stream"):
            return self.stream(r, rid)
        return json.loads(r.read())

    def stream(self, r, rid):
        """Reads an event stream to `rid`'s response, answering roots/list on the way."""
        while True:
            line = r.fp.readline()
            if not line:
                raise SystemExit("the stream ended early")
            if not line.startswith(b"data:"):
                continue
            m = json.loads(line[5:])
            if m.get("method") == "roots/list":
                a = self.post({"jsonrpc": "2.0", "id": m["id"],
                               "result": {"roots": HOST_ROOTS}}, self.answers)
                a.read()
            elif m.get("id") == rid:
                r.close()
                return m

    def start(self):
        if self.era == "legacy":
            r = self.request("initialize", {"protocolVersion": LEGACY,
                                            "capabilities": {"roots": {}},
                                            "clientInfo": {"name": "bench", "version": "1"}})
            assert "result" in r, r
            self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).read()
        else:
            r = self.request("server/discover", {"_meta": self.meta()})
            assert "result" in r, r

    def close(self):
        self.conn.close()
        self.answers.close()


def http_server(era):
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--http-server", era],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = json.loads(p.stdout.readline())["port"]
    return p, port


def timed(c, calls, want_broker):
    c.start()
    for _ in range(20):
        roots = c.call()
    # The proxied calls must get the broker's roots, the direct ones the host's.
    assert (roots != HOST_ROOTS) == want_broker, roots
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        c.call()
        times.append((time.perf_counter() - t) * 1e6)
    c.close()
    times.sort()
    return {"p50": statistics.median(times), "p90": times[int(len(times) * 0.9)],
            "mean": statistics.fmean(times)}


def measure(argv, era, calls, want_broker):
    return timed(Client(argv, era), calls, want_broker)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--http-server")
    ap.add_argument("--calls", type=int, default=500)
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    ap.add_argument("--bin", default=os.path.join(target, "release", "fsbroker"))
    a = ap.parse_args()
    if a.server:
        return serve(a.server)
    if a.http_server:
        return http_serve(a.http_server)
    me = os.path.abspath(__file__)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for era in ("legacy", "modern"):
            server = [sys.executable, me, "--server", era]
            direct = measure(server, era, a.calls, want_broker=False)
            proxy = [a.bin, "proxy", "--era", era, "--root", root, "--consent", "deny",
                     "--"] + server
            proxied = measure(proxy, era, a.calls, want_broker=True)
            rows.append(("stdio", era, direct, proxied))
        for era in ("legacy", "modern"):
            srv, port = http_server(era)
            direct = timed(HttpClient(port, era), a.calls, want_broker=False)
            srv.stdin.close()
            srv.wait()
            srv, port = http_server(era)
            proxy = [a.bin, "proxy", "--era", era, "--root", root, "--consent", "deny",
                     "--url", f"http://127.0.0.1:{port}/mcp"]
            proxied = measure(proxy, era, a.calls, want_broker=True)
            srv.stdin.close()
            srv.wait()
            rows.append(("http", era, direct, proxied))
    print(f"{a.calls} sequential `tools/call` with one roots round each, latency in µs")
    print()
    print("| transport | era | direct p50 | proxied p50 | added p50 | direct p90 | proxied p90 "
          "| added p90 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for transport, era, d, p in rows:
        print(f"| {transport} | {era} | {d['p50']:.0f} | {p['p50']:.0f} | {p['p50'] - d['p50']:.0f} "
              f"| {d['p90']:.0f} | {p['p90']:.0f} | {p['p90'] - d['p90']:.0f} |")


if __name__ == "__main__":
    main()
