# A slow lane job (A: stat of a long symlink chain, runs until the deadline) followed at once
# by a cheap stat (B), optionally a third cheap stat (C) 20 ms later.
# docs/protocol.md: "once the I/O thread has been on one call for 10 ms, what is queued behind
# it and what comes after runs on threads of its own".
import os, sys, time; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client import *
third = "third" in sys.argv
p = start("/tmp/r34root", timeout_ms=int(os.environ.get("TMO", "200")))
recv(p)
n = 10
for trial in range(3):
    a, b, c = n, n+1, n+2; n += 3
    t0 = time.time()
    send(p, req(a, "files/stat", path="R/s38"))
    send(p, req(b, "files/stat", path="R/target"))
    want = {a, b}
    if third:
        time.sleep(0.02); send(p, req(c, "files/stat", path="R/target")); want.add(c)
    got = {}
    while want - set(got):
        r = recv(p, 10)
        if r is None: print("no answer"); break
        got[r["id"]] = ("%.1f ms" % ((time.time()-t0)*1000), r["error"]["data"]["code"] if "error" in r else "ok")
    print("A(slow)", got.get(a), "B(cheap, queued)", got.get(b), "C(cheap, 20ms later)", got.get(c))
    time.sleep(0.5)
p.stdin.close(); p.wait(5)
