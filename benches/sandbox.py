#!/usr/bin/env python3
"""The cost of `fsbroker proxy --sandbox` for the official filesystem server, side by side.

    benches/sandbox.py target/release/fsbroker PATH/TO/server-filesystem/dist/index.js

Start-up: the time from starting `fsbroker proxy --root proj node SERVER proj` to the
answer to `initialize`, with and without `--sandbox`, alternating, SANDBOX_BENCH_STARTS runs
each (default 20). Per call: the time of one `tools/call read_text_file` of a 1 KiB file,
SANDBOX_BENCH_CALLS calls each (default 500) in one session per variant, the sessions run
alternately in rounds so both see the same machine. Prints medians and the ratio.
(`npm ci` in tests/interop/fs-server, or `cargo test --test sandbox`, installs the server.)
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def start(binary, server, proj, sandbox):
    cmd = [binary, "proxy", "--root", proj]
    if sandbox:
        cmd.append("--sandbox")
    cmd += ["node", server, proj]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    return p


def send(p, msg):
    p.stdin.write((json.dumps(msg) + "\n").encode())
    p.stdin.flush()


def wait_id(p, id_):
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("proxy ended")
        m = json.loads(line)
        if m.get("id") == id_ and "method" not in m:
            return m


def initialize(p):
    send(p, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
    wait_id(p, 0)
    send(p, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def stop(p):
    p.stdin.close()
    p.wait(timeout=30)


def main():
    binary, server = sys.argv[1], sys.argv[2]
    starts = int(os.environ.get("SANDBOX_BENCH_STARTS", "20"))
    calls = int(os.environ.get("SANDBOX_BENCH_CALLS", "500"))
    with tempfile.TemporaryDirectory() as d:
        proj = os.path.join(d, "proj")
        os.mkdir(proj)
        path = os.path.join(proj, "a.txt")
        with open(path, "w") as f:
            f.write("x" * 1024)
        startup = {False: [], True: []}
        for _ in range(starts):
            for sandbox in (False, True):
                t = time.perf_counter()
                p = start(binary, server, proj, sandbox)
                initialize(p)
                startup[sandbox].append(time.perf_counter() - t)
                stop(p)
        sessions = {s: start(binary, server, proj, s) for s in (False, True)}
        for p in sessions.values():
            initialize(p)
        per_call = {False: [], True: []}
        next_id = 1
        for _ in range(calls // 50):
            for sandbox, p in sessions.items():
                for _ in range(50):
                    t = time.perf_counter()
                    send(p, {"jsonrpc": "2.0", "id": next_id, "method": "tools/call",
                             "params": {"name": "read_text_file", "arguments": {"path": path}}})
                    r = wait_id(p, next_id)
                    per_call[sandbox].append(time.perf_counter() - t)
                    if r.get("result", {}).get("isError"):
                        raise RuntimeError(f"read failed: {r}")
                    next_id += 1
        for p in sessions.values():
            stop(p)
    ms = lambda xs: statistics.median(xs) * 1000
    print("| filesystem server behind the proxy | without --sandbox | with --sandbox | ratio |")
    print("|---|---|---|---|")
    a, b = ms(startup[False]), ms(startup[True])
    print(f"| start-up to `initialize` answered (median of {starts}) | {a:.1f} ms | {b:.1f} ms | {b / a:.2f} |")
    a, b = ms(per_call[False]), ms(per_call[True])
    print(f"| `read_text_file` 1 KiB (median of {len(per_call[True])}) | {a:.3f} ms | {b:.3f} ms | {b / a:.2f} |")


if __name__ == "__main__":
    main()
