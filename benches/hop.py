#!/usr/bin/env python3
"""The cost of the road from a proxy to its broker: sequential small reads by a server behind
`fsbroker proxy`, whose broker is its own (reached in process) or the user's daemon (reached
through the socket), in turns, in one run.

    benches/hop.py BIN [BIN_B] [--rounds N] [--reads N]

Each round runs READS sequential `files/read`s of one small file (one in flight: latency, not
throughput) through `BIN proxy --root ...` (and `BIN_B proxy --root ...` when given, e.g. an
older build), then through `BIN proxy --daemon=SOCKET` against `BIN daemon`. It prints each
round's median, 90th percentile and mean in microseconds, then the median of the rounds'
medians per road. The timings include the Python server's own cost, the same on every road:
compare the roads, not the absolute figures.
"""
import json, os, subprocess, sys, tempfile, time


def server(result, reads):
    """The MCP server behind the proxy: handshake, roots, consent, then the timed reads."""
    out, inp = sys.stdout.buffer, sys.stdin.buffer

    def send(v):
        out.write(json.dumps(v).encode() + b"\n")
        out.flush()

    def wait(i):
        while True:
            m = json.loads(inp.readline())
            if m.get("id") == i:
                return m

    while True:
        line = inp.readline()
        if not line:
            return
        m = json.loads(line)
        if m.get("method") == "initialize":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2025-06-18",
                  "capabilities": {}, "serverInfo": {"name": "bench", "version": "1"}}})
        elif m.get("method") == "notifications/initialized":
            break
    send({"jsonrpc": "2.0", "id": "roots", "method": "roots/list"})
    wait("roots")
    send({"jsonrpc": "2.0", "id": "consent", "method": "files/consent",
          "params": {"requestedPaths": ["data"], "access": "read"}})
    wait("consent")
    lat = []
    for i in range(reads):
        t = time.perf_counter_ns()
        send({"jsonrpc": "2.0", "id": i, "method": "files/read", "params": {"path": "data/small.txt"}})
        m = wait(i)
        lat.append(time.perf_counter_ns() - t)
        if "error" in m:
            open(result, "w").write("error " + json.dumps(m))
            return
    lat.sort()
    n = len(lat)
    open(result, "w").write(f"{lat[n // 2] / 1000:.1f} {lat[n * 9 // 10] / 1000:.1f} {sum(lat) / n / 1000:.1f}")
    send({"jsonrpc": "2.0", "id": "end", "method": "tools/list"})


def one_round(binary, road_args, data_parent, reads):
    """One proxy session as its host: the server's figures for it."""
    result = os.path.join(data_parent, "result")
    env = dict(os.environ, HOP_RESULT=result, HOP_READS=str(reads))
    p = subprocess.Popen([binary, "proxy", *road_args, "--", sys.executable, os.path.abspath(__file__), "--server"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(v):
        p.stdin.write(json.dumps(v).encode() + b"\n")
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
          "capabilities": {}, "clientInfo": {"name": "hop", "version": "1"}}})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for line in p.stdout:
        if b'"end"' in line:
            break
    p.stdin.close()
    p.wait()
    return open(result).read().split()


def main():
    if sys.argv[1:2] == ["--server"]:
        return server(os.environ["HOP_RESULT"], int(os.environ["HOP_READS"]))
    args = sys.argv[1:]
    rounds, reads = 6, 3000
    if "--rounds" in args:
        i = args.index("--rounds"); rounds = int(args[i + 1]); del args[i:i + 2]
    if "--reads" in args:
        i = args.index("--reads"); reads = int(args[i + 1]); del args[i:i + 2]
    binary, other = args[0], (args[1] if len(args) > 1 else None)
    top = tempfile.mkdtemp(prefix="hop")
    os.makedirs(os.path.join(top, "data"))
    open(os.path.join(top, "data", "small.txt"), "w").write("hello world\n" * 20)
    run = os.path.join(top, "run")
    os.makedirs(run, mode=0o700)
    sock = os.path.join(run, "s.sock")
    daemon = subprocess.Popen([binary, "daemon", "--foreground", "--socket", sock, "--root",
                               "data=" + os.path.join(top, "data"), "--consent", "auto"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(sock):
        time.sleep(0.05)
    own = ["--root", "data=" + os.path.join(top, "data"), "--consent", "auto"]
    roads = [("own", binary, own)]
    if other:
        roads.append(("own (B)", other, own))
    roads.append(("daemon", binary, ["--daemon=" + sock]))
    medians = {name: [] for name, _, _ in roads}
    try:
        for r in range(rounds):
            for name, b, road in roads:
                figures = one_round(b, road, top, reads)
                print(f"round {r + 1} {name}: median {figures[0]} p90 {figures[1]} mean {figures[2]} us", flush=True)
                medians[name].append(float(figures[0]))
    finally:
        daemon.terminate()
        daemon.wait()
    for name, m in medians.items():
        m.sort()
        print(f"{name}: median of round medians {m[len(m) // 2]:.1f} us")


if __name__ == "__main__":
    main()
