#!/usr/bin/env python3
"""A scripted stdio MCP server for the era tests (standard library only).

$ERA says which protocol eras it speaks: "dual" (the default: `initialize` and
`server/discover`), "modern-only" (`initialize` is answered -32022 naming only 2026-07-28) or
"legacy" (`server/discover` is answered -32601).

Tools (`tools/call`), answered in either era:
- `roots`: asks for roots with an `input_required` result (`inputRequests` key `r<N>`,
  `requestState` "round-<N>") `rounds` times (default 1), then returns
  `structuredContent: {"roots": <the last inputResponses' roots>, "rounds": N,
  "states": [the requestState of every retry], "meta": <the _meta of the last retry>}`;
- `mixed`: asks for roots (key "r") and an elicitation (key "e") at once, with
  `requestState` "mixed-state"; a retry echoing it gets `structuredContent: {"responses":
  <its inputResponses>}`;
- `files`: asks for `files/read` as an input request;
- `task`: answers a task whose status carries a `roots/list` input request (a shape of the
  tasks extension, with no `resultType` of `input_required`);
- `meta`: returns the `_meta` it got;
- `responses`: returns the `inputResponses` it got;
- `final_task`: asks for roots, then answers the retry with a complete result whose task
  still carries a `roots/list` input request;
- `nested`: an `input_required` result whose only roots question sits in a task, not in a
  top-level `inputRequests`;
- `cancel_retry`: asks for roots, then cancels the proxy's retry instead of answering it;
- `batch`: answers with a batch (a notification and the result);
- `ask_roots`: sends its own `roots/list` request (id `rid`, default "rl"), then answers
  the call;
- `task_list`: answers a task whose `inputRequests` is a list holding a `roots/list`;
- `reinit`: answers the host's `initialize` (id "init") a second time, as a modern-only
  server would.
- `read_files`: sends its own `files/consent` (id "fc") and `files/read` (id "fr")
  requests, then answers the call;
- `dup_roots`: answers the call with the same roots-only `input_required` result 5 times
  (`requestState` "dup"); a retry gets `structuredContent: {"roots": ...}`;
- `batch_retry`: asks for roots, then answers the retry inside a batch.

$RECV_LOG: every line received is appended to that file.
"""
import json
import os
import sys

ERA = os.environ.get("ERA", "dual")
MODERN = "2026-07-28"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def result(mid, res):
    send({"jsonrpc": "2.0", "id": mid, "result": res})


def error(mid, code, message, data=None):
    e = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    send({"jsonrpc": "2.0", "id": mid, "error": e})


states = {}


def call(mid, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    meta = params.get("_meta") or {}
    responses = params.get("inputResponses") or {}
    state = params.get("requestState")
    if name == "meta":
        return result(mid, {"content": [], "structuredContent": {"meta": meta}})
    if name == "responses":
        return result(mid, {"content": [], "structuredContent": {"responses": responses}})
    if name == "final_task" and state is None:
        return result(mid, {"resultType": "input_required", "requestState": "ft",
                            "inputRequests": {"r": {"method": "roots/list"}}})
    if name == "final_task":
        return result(mid, {"resultType": "complete", "content": [],
                            "task": {"status": "input_required",
                                     "inputRequests": {"x": {"method": "roots/list"}}}})
    if name == "task_list":
        return result(mid, {"content": [], "task": {"status": "input_required",
                                                    "inputRequests": [{"method": "roots/list"}]}})
    if name == "nested":
        return result(mid, {"resultType": "input_required", "requestState": "q",
                            "task": {"inputRequests": {"x": {"method": "roots/list"}}}})
    if name == "cancel_retry" and state is None:
        return result(mid, {"resultType": "input_required", "requestState": "cr",
                            "inputRequests": {"r": {"method": "roots/list"}}})
    if name == "cancel_retry":
        return send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": mid, "reason": "no"}})
    if name == "batch":
        sys.stdout.write(json.dumps([
            {"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "info", "data": "x"}},
            {"jsonrpc": "2.0", "id": mid, "result": {"content": []}}]) + "\n")
        return sys.stdout.flush()
    if name == "ask_roots":
        send({"jsonrpc": "2.0", "id": args.get("rid", "rl"), "method": "roots/list"})
        return result(mid, {"content": []})
    if name == "read_files":
        send({"jsonrpc": "2.0", "id": "fc", "method": "files/consent",
              "params": {"requestedPaths": ["project"], "access": "read"}})
        send({"jsonrpc": "2.0", "id": "fr", "method": "files/read",
              "params": {"path": "project/a.txt"}})
        return result(mid, {"content": []})
    if name == "dup_roots" and state is None:
        for _ in range(5):
            result(mid, {"resultType": "input_required", "requestState": "dup",
                         "inputRequests": {"r": {"method": "roots/list"}}})
        return
    if name == "dup_roots":
        return result(mid, {"content": [], "structuredContent": {"roots": responses["r"]["roots"]}})
    if name == "batch_retry" and state is None:
        return result(mid, {"resultType": "input_required", "requestState": "br",
                            "inputRequests": {"r": {"method": "roots/list"}}})
    if name == "batch_retry":
        sys.stdout.write(json.dumps([{"jsonrpc": "2.0", "id": mid,
                                      "result": {"content": []}}]) + "\n")
        return sys.stdout.flush()
    if name == "reinit":
        error("init", -32022, "Unsupported protocol version", {"supported": [MODERN]})
        return result(mid, {"content": []})
    if name == "task":
        return result(mid, {"task": {"taskId": "t1", "status": "input_required",
                                     "inputRequests": {"r": {"method": "roots/list"}}}})
    if name == "files":
        return result(mid, {"resultType": "input_required",
                            "inputRequests": {"f": {"method": "files/read",
                                                    "params": {"path": "project/a.txt"}}}})
    if name == "mixed" and state is not None:
        if state != "mixed-state":
            return error(mid, -32602, f"requestState not echoed: {state!r}")
        return result(mid, {"resultType": "complete", "content": [],
                            "structuredContent": {"responses": responses}})
    if name == "mixed":
        return result(mid, {"resultType": "input_required", "requestState": "mixed-state",
                            "inputRequests": {
                                "r": {"method": "roots/list", "params": {}},
                                "e": {"method": "elicitation/create",
                                      "params": {"mode": "form", "message": "ok?",
                                                 "requestedSchema": {"type": "object",
                                                                     "properties": {}}}}}})
    if name == "roots":
        rounds = int(args.get("rounds", 1))
        done = 0 if state is None else int(state.split("-")[1])
        seen = states.setdefault(args.get("tag", ""), [])
        if state is not None and args.get("hang"):
            return  # never answers a retry: for the cancellation test
        if state is not None:
            seen.append(state)
            if f"r{done}" not in responses:
                return error(mid, -32602, f"missing inputResponses r{done}: {responses}")
        if done < rounds:
            n = done + 1
            return result(mid, {"resultType": "input_required", "requestState": f"round-{n}",
                                "inputRequests": {f"r{n}": {"method": "roots/list"}}})
        roots = responses[f"r{done}"]["roots"]
        return result(mid, {"resultType": "complete", "content": [],
                            "structuredContent": {"roots": roots, "rounds": done,
                                                  "states": seen, "meta": meta}})
    return error(mid, -32602, f"unknown tool {name}")


def main():
    for raw in sys.stdin.buffer:
        log = os.environ.get("RECV_LOG")
        if log:
            with open(log, "ab") as f:
                f.write(raw.rstrip(b"\n") + b"\n")
        try:
            m = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(m, dict) or "method" not in m or "id" not in m:
            continue
        mid, method, params = m["id"], m["method"], m.get("params") or {}
        if method == "initialize":
            if ERA == "modern-only":
                error(mid, -32022, "Unsupported protocol version", {"supported": [MODERN]})
            else:
                result(mid, {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                             "capabilities": {"tools": {}},
                             "serverInfo": {"name": "era-" + ERA, "version": "1"}})
        elif method == "server/discover":
            if ERA == "legacy":
                error(mid, -32601, "Method not found")
            else:
                result(mid, {"resultType": "complete", "supportedVersions": [MODERN],
                             "capabilities": {"tools": {}},
                             "serverInfo": {"name": "era-" + ERA, "version": "1"}})
        elif method == "tools/call":
            call(mid, params)
        elif method == "tools/list":
            result(mid, {"tools": []})
        else:
            error(mid, -32601, "Method not found")


main()
