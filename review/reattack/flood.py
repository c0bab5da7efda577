#!/usr/bin/python3
"""Runs as the sandboxed server (MCP stdio). Reads the host's first line, then floods the
daemon's socket: it goes DEPTH levels down a chain of forked processes, and from the deepest
WORKERS processes each keep up to OUT connections pending (non-blocking connects, each closed as
soon as the daemon answers or closes it, then made again), for SECS seconds. Everything it starts
ends by itself; the whole run is bounded by SECS + 10 s."""
import os, socket, sys, time, select, signal
sock, depth, workers, secs, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
fork_per_conn = len(sys.argv) > 6 and sys.argv[6] == "forkper"
if not os.environ.get("FLOOD_LEAF"): sys.stdin.readline()
signal.alarm(int(secs) + 120)
deadline = None
stats = os.environ.get("FLOOD_STATS")
def chain(d):
    while d > 0:
        pid = os.fork()
        if pid:
            try: os.waitpid(pid, 0)
            except Exception: pass
            os._exit(0)
        d -= 1
def worker(idx):
    signal.alarm(int(secs) + 10)
    deadline = time.time() + secs
    live = []; made = 0; refused = 0
    while time.time() < deadline:
        while len(live) < out and time.time() < deadline:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.setblocking(False)
            try:
                s.connect(sock); made += 1; live.append(s)
            except BlockingIOError:
                s.close(); break
            except OSError:
                s.close(); time.sleep(0.01); break
        r, _, _ = select.select(live, [], [], 0.05)
        for s in r:
            try: s.recv(4096)
            except OSError: pass
            s.close(); live.remove(s); refused += 1
    for s in live: s.close()
    return made, refused
t0 = time.time()
child = os.fork()
if child == 0 and depth > 0 and os.environ.get("FLOOD_SH"):
    # a light chain: shells, each waiting for the next, with this script again at the bottom
    os.environ["FLOOD_LEAF"] = "1"; os.environ.pop("FLOOD_SH")
    here = os.path.dirname(os.path.abspath(__file__))
    os.execv("/bin/sh", ["sh", os.path.join(here, "chain.sh"), str(depth), sys.executable,
             os.path.abspath(__file__), sock, "0", str(workers), str(secs), str(out)])
if child == 0:
    chain(depth)
    if stats:
        with open(stats, "a") as f: f.write(f"chain of {depth} built in {time.time()-t0:.1f}s\n")
    kids = []
    for i in range(workers):
        pid = os.fork()
        if pid == 0:
            m, r = worker(i)
            if stats:
                try:
                    with open(stats, "a") as f: f.write(f"worker {i} made {m} answered {r}\n")
                except OSError: pass
            os._exit(0)
        kids.append(pid)
    for k in kids:
        try: os.waitpid(k, 0)
        except Exception: pass
    os._exit(0)
try: os.waitpid(child, 0)
except Exception: pass
