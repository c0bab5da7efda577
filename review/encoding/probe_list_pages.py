"""Probe (held): listing pages over a deep tree (300 levels, past MAX_LIST_DEPTH 256) whose
names need JSON escapes; every limit from a set, a page that ends exactly at the last entry,
cursor round trips. Set DUMP=file to write the pages for an A/B with the old build."""
import json, os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

root = os.environ.get("ROOT") or tempfile.mkdtemp(prefix="fsb-list-")
if not os.path.exists(os.path.join(root, "t")):
    p = os.path.join(root, "t")
    os.mkdir(p)
    for depth in range(300):
        for n in ('q"', 'b\\', 'n\n', '\x01', '\x7f', '\u00e9', '.h"'):
            open(os.path.join(p, n + str(depth % 3)), "w").close()
        p = os.path.join(p, "d")
        os.mkdir(p)
    open(os.path.join(root.encode(), b"t/\xfe\xff"), "w").close()

s = Serve(root)
s.consent()
dump, bad = [], 0

def pages(limit, **kw):
    out, cur = [], None
    while True:
        params = {"path": "w/t", "recursive": True, "limit": limit, **kw}
        if cur:
            params["cursor"] = cur
        r = s.call("files/list", params)
        dump.append(r.get("result", r.get("error")))
        r = r["result"]
        out += r["entries"]
        cur = r.get("nextCursor")
        if not cur:
            return out, len(r["entries"])

full, _ = pages(10000, includeHidden=True)
total = len(full)
paths = [e["path"] for e in full]
print("entries", total, "deepest", max(p.count("/") for p in paths))
assert len(set(paths)) == total
for lim in (1, 7, 100, total - 1, total, total + 1):
    got, last = pages(lim, includeHidden=True)
    ok = got == full
    print("limit", lim, "same" if ok else "DIFFERENT", "last page", last)
    bad += not ok
# a page that ends exactly at the last entry has no nextCursor
r = s.call("files/list", {"path": "w/t", "recursive": True, "limit": total, "includeHidden": True})["result"]
print("exact page nextCursor", r.get("nextCursor"))
bad += "nextCursor" in r
s.close()
if os.environ.get("DUMP"):
    open(os.environ["DUMP"], "w").write("\n".join(json.dumps(d, sort_keys=True) for d in dump))
print("bad", bad)
sys.exit(1 if bad else 0)
