"""Probe (held): ids near the line limit (32 MiB) on results written behind the line's head
(files/read, files/list), alone and in a batch; escaped ids of every control character."""
import json, os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

root = tempfile.mkdtemp(prefix="fsb-id-")
with open(os.path.join(root, "f.txt"), "w") as f:
    f.write("x\"\\\n" * 10)
s = Serve(root)
s.consent()
bad = 0
for n in (1 << 20, (32 << 20) - 200):
    i = "\u00e9" * (n // 2)  # 2 bytes each: near the limit
    for method, params in (("files/read", {"path": "w/f.txt"}), ("files/list", {"path": "w"})):
        m = s.call(method, params, id=i)
        ok = m["id"] == i and "result" in m
        print(method, len(i.encode()), "ok" if ok else str(m)[:200])
        bad += not ok
i = "".join(chr(c) for c in range(0, 0x80)) + "\ud7ff\ue000\uffff"
for method, params in (("files/read", {"path": "w/f.txt"}), ("files/list", {"path": "w"})):
    m = s.call(method, params, id=i)
    bad += not (m["id"] == i and "result" in m)
# batch with two 15 MiB ids: line limit applies to the answer
big = ["a" * (15 << 20), "b" * (15 << 20)]
batch = [{"jsonrpc": "2.0", "id": x, "method": "files/read", "params": {"path": "w/f.txt"}} for x in big]
raw, arr = s.call_raw(json.dumps(batch, ensure_ascii=False).encode())
print("batch answer bytes", len(raw), [("result" in a, a["id"][:3]) for a in arr])
bad += [a["id"] for a in arr] != big
s.close()
print("bad", bad)
sys.exit(1 if bad else 0)
