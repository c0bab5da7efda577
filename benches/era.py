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

Added latency = proxied - direct, per percentile. `--bin` defaults to the release build in
$CARGO_TARGET_DIR (or target/). Prints a Markdown table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

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


def measure(argv, era, calls, want_broker):
    c = Client(argv, era)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--calls", type=int, default=500)
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    ap.add_argument("--bin", default=os.path.join(target, "release", "fsbroker"))
    a = ap.parse_args()
    if a.server:
        return serve(a.server)
    me = os.path.abspath(__file__)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for era in ("legacy", "modern"):
            server = [sys.executable, me, "--server", era]
            direct = measure(server, era, a.calls, want_broker=False)
            proxy = [a.bin, "proxy", "--era", era, "--root", root, "--consent", "deny",
                     "--"] + server
            proxied = measure(proxy, era, a.calls, want_broker=True)
            rows.append((era, direct, proxied))
    print(f"{a.calls} sequential `tools/call` with one roots round each, latency in µs")
    print()
    print("| era | direct p50 | proxied p50 | added p50 | direct p90 | proxied p90 | added p90 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for era, d, p in rows:
        print(f"| {era} | {d['p50']:.0f} | {p['p50']:.0f} | {p['p50'] - d['p50']:.0f} "
              f"| {d['p90']:.0f} | {p['p90']:.0f} | {p['p90'] - d['p90']:.0f} |")


if __name__ == "__main__":
    main()
