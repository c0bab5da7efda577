"""Probe: peak memory (VmHWM) of one files/read of 16 MiB of text that JSON escapes 6x
(U+0001 -> \\u0001), and of 16 MiB of plain ASCII. Compare FSBROKER=<old build>."""
import json, os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

def hwm(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmHWM"):
            return int(l.split()[1])

root = tempfile.mkdtemp(prefix="fsb-esc-")
N = 16 << 20
with open(os.path.join(root, "ctl.txt"), "wb") as f:
    f.write(b"\x01" * N)
with open(os.path.join(root, "plain.txt"), "wb") as f:
    f.write(b"a" * N)
for name in ("plain.txt", "ctl.txt"):
    s = Serve(root)
    s.consent()
    h0 = hwm(s.p.pid)
    s.raw(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "files/read",
                      "params": {"path": "w/" + name, "length": N}}).encode())
    raw = s.p.stdout.readline()
    m = json.loads(raw)
    assert m["id"] == 5 and m["result"]["length"] == N, str(m)[:200]
    print(name, "line bytes", len(raw), "VmHWM before", h0, "after", hwm(s.p.pid), "KiB")
    s.close()
