#!/usr/bin/env python3
"""Counts RATE_LIMITED answers of the benchmark's small-read and listing workloads.

The same requests as `benches/perf/small.rs` and the listing of `benches/perf/small.rs`, sent
to `fsbroker serve --root bench=DATA --consent auto` over its pipes, one sidecar per workload
as the bench does, but with the policy under test instead of the bench's lifted limits:

    benches/rate_count.py target/release/fsbroker                  # the default policy
    benches/rate_count.py target/release/fsbroker --policy P.toml  # another policy

Small: 10,000 files of 1 KiB; 200 warm-up reads, 10,000 sequential reads, 10,000 reads
pipelined 32 in flight, then the same for stats (40,200 requests in one session). Listing: a
tree of 100,000 entries listed recursively, `limit: 10000`, following `nextCursor`.
Set RATE_COUNT_SMALL_N and RATE_COUNT_TREE_ENTRIES to change the sizes.

Each workload's audit log is kept, and the CPU time its operations spent (the sum of the
lines' `cpuMs`, what `limits.cpu_ms_per_minute` counts) is printed beside the counts.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

MOUNT = "bench"


class Sidecar:
    def __init__(self, binary, data, policy):
        self.audit = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False).name
        self.started = time.monotonic()
        cmd = [binary, "serve", "--root", f"{MOUNT}={data}", "--consent", "auto",
               "--audit-file", self.audit]
        if policy:
            cmd[2:2] = ["--policy", policy]
        self.p = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 1
        self.sent = 0
        self.limited = 0
        self.other_errors = 0

    def send(self, method, params):
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.next_id += 1
        self.p.stdin.write(line.encode() + b"\n")
        self.sent += 1

    def recv(self):
        r = json.loads(self.p.stdout.readline())
        err = r.get("error")
        if err is not None:
            if err.get("data", {}).get("code") == "RATE_LIMITED":
                self.limited += 1
            else:
                self.other_errors += 1
        return r

    def call(self, method, params):
        self.send(method, params)
        self.p.stdin.flush()
        return self.recv()

    def pipelined(self, n, window, request):
        sent = done = 0
        while done < n:
            while sent < n and sent - done < window:
                self.send(*request(sent))
                sent += 1
            self.p.stdin.flush()
            self.recv()
            done += 1

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)
        self.seconds = time.monotonic() - self.started
        self.cpu_ms = 0.0
        with open(self.audit) as f:
            for line in f:
                self.cpu_ms += json.loads(line).get("cpuMs", 0.0)
        os.unlink(self.audit)

    def cpu(self):
        return f"CPU {self.cpu_ms:.0f} ms in {self.seconds:.1f} s"


def small_rel(i):
    return f"small/d{i // 100:03}/f{i % 100:03}.txt"


def fixtures(data, small_n, tree_entries):
    for i in range(small_n):
        path = os.path.join(data, small_rel(i))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write((f"file {i}\n" + "alpha beta gamma delta epsilon\n" * 40)[:1024].encode())
    files = tree_entries - 110
    for t in range(10):
        for m in range(10):
            leaf = os.path.join(data, "tree", f"dir{t:02}", f"sub{m:02}")
            os.makedirs(leaf, exist_ok=True)
            k = t * 10 + m
            for f in range(files // 100 + (1 if k < files % 100 else 0)):
                open(os.path.join(leaf, f"file{f:04}.dat"), "wb").close()


def consented(binary, data, policy):
    s = Sidecar(binary, data, policy)
    r = s.call("files/consent", {"requestedPaths": [MOUNT]})
    assert r.get("result", {}).get("granted") is True, r
    return s


def small(binary, data, policy, n):
    s = consented(binary, data, policy)
    for i in range(200):
        s.call("files/read", {"path": f"{MOUNT}/{small_rel(i % n)}"})
    for method in ("files/read", "files/stat"):
        for i in range(n):
            s.call(method, {"path": f"{MOUNT}/{small_rel(i)}"})
        s.pipelined(n, 32, lambda i: (method, {"path": f"{MOUNT}/{small_rel(i % n)}"}))
    s.close()
    return s


def listing(binary, data, policy):
    s = consented(binary, data, policy)
    cursor, entries = None, 0
    while True:
        p = {"path": f"{MOUNT}/tree", "recursive": True, "limit": 10000}
        if cursor:
            p["cursor"] = cursor
        r = s.call("files/list", p)
        if "result" not in r:
            # A refused page is retried when the answer says, as a client following the
            # protocol would.
            time.sleep(r["error"].get("data", {}).get("retryAfterMs", 1000) / 1000)
            continue
        entries += len(r["result"]["entries"])
        cursor = r["result"].get("nextCursor")
        if not cursor:
            break
    s.close()
    s.entries = entries
    return s


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--policy"):
        sys.exit(__doc__)
    binary = sys.argv[1]
    policy = sys.argv[3] if len(sys.argv) == 4 else None
    small_n = int(os.environ.get("RATE_COUNT_SMALL_N", "10000"))
    tree_entries = int(os.environ.get("RATE_COUNT_TREE_ENTRIES", "100000"))
    with tempfile.TemporaryDirectory() as data:
        fixtures(data, small_n, tree_entries)
        s = small(binary, data, policy, small_n)
        print(f"small: {s.sent} requests, {s.limited} RATE_LIMITED, {s.other_errors} other errors, {s.cpu()}")
        lst = listing(binary, data, policy)
        print(
            f"listing: {lst.entries} entries in {lst.sent - 1} list requests, "
            f"{lst.limited} RATE_LIMITED, {lst.other_errors} other errors, {lst.cpu()}"
        )


if __name__ == "__main__":
    main()
