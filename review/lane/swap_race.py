# Swaps R/x between a symlink to an in-root file and one to a file outside the root (and the
# in-root target itself between a file and a symlink out) while reading 1 MiB (the two-step,
# pool read) and 100 bytes (lane read) from it. Any 'O' byte is a confinement break.
import os, sys, time, threading; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client import *
stop = False
def swapper():
    i = 0
    while not stop:
        t = "inside" if i % 2 else "/tmp/r34out/secret"
        try: os.symlink(t, "/tmp/r34root/x.tmp"); os.rename("/tmp/r34root/x.tmp", "/tmp/r34root/x")
        except FileExistsError: os.unlink("/tmp/r34root/x.tmp")
        try: os.symlink("/tmp/r34out/secret", "/tmp/r34root/y.tmp"); os.rename("/tmp/r34root/y.tmp", "/tmp/r34root/y")
        except FileExistsError: os.unlink("/tmp/r34root/y.tmp")
        open("/tmp/r34root/y.tmp2","wb").write(b"I"*(1<<20)); os.rename("/tmp/r34root/y.tmp2", "/tmp/r34root/y")
        i += 1
threading.Thread(target=swapper, daemon=True).start()
p = start("/tmp/r34root", timeout_ms=2000, extra_policy="max_violations_per_minute = 1000000\n")
recv(p)
stats = {}
end = time.time() + 6; n = 0
while time.time() < end:
    for path in ("R/x", "R/y"):
        for ln in (1<<20, 100):
            n += 1; send(p, req(n, "files/read", path=path, length=ln)); r = recv(p, 10)
            k = (path, ln, r["error"]["data"].get("reason", r["error"]["data"]["code"]) if "error" in r else ("LEAK" if "O" in r["result"]["content"] else "ok"))
            stats[k] = stats.get(k, 0) + 1
stop = True
print(stats)
p.stdin.close(); p.wait(5)
