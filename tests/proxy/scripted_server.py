#!/usr/bin/env python3
"""A scripted stdio MCP server for the proxy tests (standard library only).

It answers `initialize` (serverInfo.name from $SERVER_NAME, default "scripted"), `tools/list`,
and `tools/call`. The tool `ask` takes `{"requests": [[method, params], ...]}`, sends each
as a request to the client in turn (ids from $ID_STYLE: "int" or a string prefix), waits for
each answer, and returns the list of answers as the tool result's structuredContent (and
as JSON text). The tool `exit` exits at once with `{"code": N}`; `flood` sends `count`
notifications of `size` bytes to the host; `sleep` stops reading for `seconds`. The tool `stderr` writes
its `text` to stderr. With $IGNORE_STDIN_EOF set, the server keeps running after its input
ends (and ignores SIGTERM when it is "term").
"""
import json
import os
import signal
import sys

pending = {}
next_id = [0]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def new_id():
    next_id[0] += 1
    style = os.environ.get("ID_STYLE", "int")
    return next_id[0] if style == "int" else f"{style}{next_id[0]}"


def read_message():
    line = sys.stdin.readline()
    if not line:
        return None
    return json.loads(line)


def ask(method, params):
    rid = new_id()
    msg = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    send(msg)
    while True:
        m = read_message()
        if m is None:
            sys.exit(3)
        if "method" not in m and m.get("id") == rid:
            return m
        handle(m)


def handle(m):
    method = m.get("method")
    mid = m.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": m["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": os.environ.get("SERVER_NAME", "scripted"), "version": "1"},
            "instructions": json.dumps(m["params"].get("capabilities", {})),
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "ask", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        name = m["params"]["name"]
        args = m["params"].get("arguments", {})
        if name == "ask":
            answers = []
            for method_, params in args.get("requests", []):
                answers.append(ask(method_, params))
            if args.get("batch"):
                batch = [{"jsonrpc": "2.0", "id": new_id(), "method": mm, "params": pp}
                         for mm, pp in args["batch"]]
                send(batch)
                want = {b["id"] for b in batch}
                while want:
                    r = read_message()
                    if r is None:
                        sys.exit(3)
                    items = r if isinstance(r, list) else [r]
                    for it in items:
                        if "method" not in it and it.get("id") in want:
                            want.discard(it["id"])
                            answers.append(it)
                        elif "method" in it:
                            handle(it)
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": json.dumps(answers)}],
                "structuredContent": {"answers": answers}}})
        elif name == "flood":
            # Host-bound notifications, numbered, then the result.
            data = "x" * int(args.get("size", 1024))
            for i in range(int(args.get("count", 1))):
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "data": {"seq": i, "pad": data}}})
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": []}})
        elif name == "sleep":
            # Stops reading its input for a while.
            import time
            time.sleep(float(args.get("seconds", 1)))
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": []}})
        elif name == "exit":
            sys.exit(int(args.get("code", 0)))
        elif name == "stderr":
            sys.stderr.write(args.get("text", "") + "\n")
            sys.stderr.flush()
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": []}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "no tool"}})
    elif method and mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method and method.startswith("notifications/"):
        seen = os.environ.get("NOTES")
        if seen:
            with open(seen, "a") as f:
                f.write(json.dumps(m) + "\n")


def main():
    mode = os.environ.get("IGNORE_STDIN_EOF")
    if mode == "term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        m = read_message()
        if m is None:
            break
        handle(m)
    if mode:
        signal.pause() if hasattr(signal, "pause") else None
        while True:
            signal.pause()


if __name__ == "__main__":
    main()
