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

For the adversarial tests:
- The tool `raw` writes lines verbatim to its output (see `raw_lines` for their forms), then
  reads what it receives until it has `expect` messages (the host's `notifications/test/*`
  are recorded but not counted) and, when `until` is given, the response with that id; or
  until `timeout` seconds pass. It returns `{"received": [...], "timedOut": bool,
  "untilAnswer": ...}` as structuredContent; an undecodable line is recorded as a string.
  `announce: true` sends the host `notifications/test/written` once the lines are out;
  `exit: N` exits with N right after writing them, reading nothing.
- A notification `notifications/test/emit` `{"lines": [...]}` from the host, whenever it
  arrives, makes the server write those lines verbatim (the host speaks through the server).
- Batches from the host are handled item by item (answers go out one by one).
- $RECV_LOG: every line received is appended to that file as it came.
- $EOF_EXIT_CODE: the exit code when the input ends (instead of 0).
- $ROOTS_ON_INITIALIZED: on the host's `notifications/initialized`, ask for the roots
  (`roots/list`) as a server that serves its roots does; otherwise it never asks.
"""
import base64
import json
import os
import select
import signal
import sys
import time

pending = {}
next_id = [0]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def new_id():
    next_id[0] += 1
    style = os.environ.get("ID_STYLE", "int")
    return next_id[0] if style == "int" else f"{style}{next_id[0]}"


_inbuf = bytearray()


def read_line(timeout=None):
    """The next input line (bytes, without its newline); None at the end of input; "timeout"
    when `timeout` seconds pass first. Reads the fd directly, so a timeout can be honoured."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        nl = _inbuf.find(b"\n")
        if nl >= 0:
            line = bytes(_inbuf[:nl])
            del _inbuf[:nl + 1]
            log = os.environ.get("RECV_LOG")
            if log:
                with open(log, "ab") as f:
                    f.write(line + b"\n")
            return line
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([0], [], [], left)
            if not ready:
                return "timeout"
        chunk = os.read(0, 1 << 20)
        if not chunk:
            return None
        _inbuf.extend(chunk)


def parse_lenient(line):
    """The message in `line`, or the line as a string when it is not JSON."""
    text = line.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_message():
    line = read_line()
    if line is None:
        return None
    return parse_lenient(line)


def write_raw(lines):
    sys.stdout.flush()
    out = sys.stdout.buffer
    for line in lines:
        out.write(line + b"\n")
        out.flush()


def raw_lines(specs):
    """The lines to write: each spec is a base64 string, or `{"b64": TEMPLATE, "pad": N,
    "count": K}`: TEMPLATE with `@PAD@` replaced by N bytes of "x" and `@N@` by the copy's
    number, K copies (default 1)."""
    for spec in specs:
        if isinstance(spec, str):
            yield base64.b64decode(spec)
            continue
        template = base64.b64decode(spec["b64"])
        pad = b"x" * int(spec.get("pad", 0))
        for i in range(int(spec.get("count", 1))):
            yield template.replace(b"@PAD@", pad).replace(b"@N@", str(i).encode())


def emit(m):
    """Handles the host's `notifications/test/emit`; True when `m` was one."""
    if isinstance(m, dict) and m.get("method") == "notifications/test/emit" and "id" not in m:
        write_raw(raw_lines(m.get("params", {}).get("lines", [])))
        return True
    return False


def raw(mid, args):
    write_raw(raw_lines(args.get("lines", [])))
    if args.get("announce"):
        send({"jsonrpc": "2.0", "method": "notifications/test/written"})
    if "exit" in args:
        os._exit(int(args["exit"]))
    expect = int(args.get("expect", 0))
    until = args.get("until")
    deadline = time.monotonic() + float(args.get("timeout", 5))
    received, counted, until_answer, timed_out = [], 0, None, False
    while counted < expect or (until is not None and until_answer is None):
        line = read_line(max(0.0, deadline - time.monotonic()))
        if line is None:
            sys.exit(3)
        if line == "timeout":
            timed_out = True
            break
        m = parse_lenient(line)
        emit(m)
        if until is not None and isinstance(m, dict) and "method" not in m \
                and m.get("id") == until:
            until_answer = m
            continue
        received.append(m)
        if not (isinstance(m, dict) and str(m.get("method", "")).startswith("notifications/test/")):
            counted += 1
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [], "structuredContent": {
        "received": received, "timedOut": timed_out, "untilAnswer": until_answer}}})


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
        items = m if isinstance(m, list) else [m]
        found = None
        for it in items:
            if isinstance(it, dict) and "method" not in it and it.get("id") == rid:
                found = it
            else:
                handle(it)
        if found is not None:
            return found


def handle(m):
    if isinstance(m, list):
        for it in m:
            handle(it)
        return
    if not isinstance(m, dict) or emit(m):
        return
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
                        if not isinstance(it, dict):
                            continue
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
        elif name == "raw":
            raw(mid, args)
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
    elif method == "notifications/initialized" and os.environ.get("ROOTS_ON_INITIALIZED"):
        ask("roots/list", None)
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
    if os.environ.get("EOF_EXIT_CODE"):
        sys.exit(int(os.environ["EOF_EXIT_CODE"]))
    if mode:
        signal.pause() if hasattr(signal, "pause") else None
        while True:
            signal.pause()


if __name__ == "__main__":
    main()
