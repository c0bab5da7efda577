"""Broad probe (not a finding by itself): ids, names and contents that need escaping, chunk
sizes around the 64 KiB in-place/pool split, offsets, listing pages. Every answer line is
parsed strictly (common.strict_parse) and checked against the file system. Prints FAIL lines
for anything wrong; exit status 1 if any. Set DUMP=file to write every answer (for an A/B)."""
import base64, json, os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

fails = []
dump = []

def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL", what)

import random
rnd = random.Random(1)
root = os.environ.get("ROOT") or tempfile.mkdtemp(prefix="fsb-enc-")
fresh = not os.path.exists(os.path.join(root, "plain"))
names = ['q"uote', 'back\\slash', 'new\nline', 'ctl\x01\x1f', 'del\x7f', 'uni\u00e9\u2028\U0001F600', 'plain', '.hidden"x']
for n in (names if fresh else []):
    with open(os.path.join(root, n), "wb") as f:
        f.write(n.encode())
if fresh:
    os.makedirs(os.path.join(root, "d/e/f"))
    open(os.path.join(root, "d/e/f/g"), "w").close()
    with open(os.path.join(root.encode(), b"bad\xff"), "wb") as f:
        f.write(b"x")
allctl = bytes(range(0, 128))
if fresh:
    with open(os.path.join(root, "allctl.txt"), "wb") as f:
        f.write(allctl * 3)
    open(os.path.join(root, "empty"), "wb").close()
# multi-byte text of various sizes around 64 KiB
for size in (65535, 65536, 65537, 65538, 65539, 200000, (1 << 20) + 1):
    body = ("\u00e9\u4e2d\U0001F600\"\\\n\x00" * (size // 10 + 1)).encode()[:size]
    rb = rnd.randbytes(size)
    if fresh:
        with open(os.path.join(root, f"mb{size}"), "wb") as f:
            f.write(body)
        with open(os.path.join(root, f"bin{size}"), "wb") as f:
            f.write(rb)

s = Serve(root)
s.consent()

def read(path, **kw):
    p = {"path": "w/" + path}
    p.update(kw)
    m = s.call("files/read", p)
    dump.append(("read", path, kw, m))
    return m

def decode(res):
    if res["encoding"] == "base64":
        return base64.b64decode(res["content"], validate=True)
    return res["content"].encode("utf-8")

# ---- ids
ids = ['a"b', "a\\b", "\x00\x01\x1f", "\u2028\u2029", "\U0001F600", "", "x" * 100000,
       9223372036854775807, -9223372036854775808, 18446744073709551615, 0, -1]
for i in ids:
    for method, params in [("ping", {}), ("files/read", {"path": "w/plain"}),
                           ("files/list", {"path": "w"})]:
        m = s.call(method, params, id=i)
        check(m["id"] == i and type(m["id"]) is type(i), f"id {str(i)[:40]!r} {method}: {str(m)[:200]}")
        check("result" in m, f"id {str(i)[:40]!r} {method} error {m.get('error')}")
# refused ids
for raw in [b'1.0', b'1e0', b'18446744073709551616', b'-9223372036854775809', b'null', b'[1]', b'{}', b'true']:
    _, m = s.call_raw(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}')
    check(m.get("id") is None and "error" in m, f"id {raw!r} not refused: {m}")
# batch with repeated and varied ids
batch = []
for k, i in enumerate(ids[:8] + [7, 7, "7"]):
    batch.append({"jsonrpc": "2.0", "id": i, "method": ["files/read", "files/list", "ping"][k % 3],
                  "params": [{"path": "w/allctl.txt"}, {"path": "w"}, {}][k % 3]})
_, arr = s.call_raw(json.dumps(batch).encode())
check(isinstance(arr, list) and [a.get("id") for a in arr] == [b["id"] for b in batch], f"batch ids {arr if not isinstance(arr, list) else [a.get('id') for a in arr]}")
for a in arr:
    check("result" in a, f"batch item error {a}")

# ---- contents
def utf8ok_bytes(b):
    try:
        b.decode()
        return True
    except UnicodeDecodeError:
        return False
for enc in [None, "utf-8", "base64"]:
    kw = {} if enc is None else {"encoding": enc}
    r = read("allctl.txt", **kw)["result"]
    check(decode(r) == allctl * 3, f"allctl {enc}")
for n in names:
    if any(c in n for c in "\\\n\x01\x7f"):
        continue  # refused by the path rules (malformed), before and after the change
    r = read(n)
    check("result" in r and decode(r["result"]) == n.encode(), f"read name {n!r}: {str(r)[:200]}")
r = read("empty")["result"]
check(r["content"] == "" and r["eof"] and r["size"] == 0 and r["length"] == 0, f"empty {r}")
for size in (65535, 65536, 65537, 65538, 65539, 200000, (1 << 20) + 1):
    for pre in ("mb", "bin"):
        data = open(os.path.join(root, f"{pre}{size}"), "rb").read()
        for enc in [None, "base64"] + (["utf-8"] if pre == "mb" and utf8ok_bytes(data) else []):
            kw = {} if enc is None else {"encoding": enc}
            got = b""
            off = 0
            steps = 0
            while True:
                m = read(f"{pre}{size}", offset=off, length=65536, **kw)
                if "error" in m:
                    check(False, f"{pre}{size} {enc} off {off}: {m['error']}")
                    break
                r = m["result"]
                c = decode(r)
                check(len(c) == r["length"], f"{pre}{size} length field {r['length']} vs {len(c)}")
                check(r["offset"] == off and r["size"] == size, f"{pre}{size} offset/size")
                got += c
                off += len(c)
                steps += 1
                if r["eof"] or steps > 100:
                    break
            check(got == data, f"{pre}{size} {enc} reassembled differs ({len(got)} vs {len(data)})")
# offsets and lengths
for off in [0, 5, 383, 384, 385, 10**6, 2**43] + ([2**62, 2**63 - 1, 2**63, 2**64 - 1] if os.environ.get('HUGE') else []):
    for ln in [0, 1, 65536, 16 << 20]:
        m = read("allctl.txt", offset=off, length=ln)
        check("result" in m, f"offset {off} length {ln}: {m.get('error')}")
        if "result" in m:
            r = m["result"]
            want = (allctl * 3)[off:off + ln]
            check(decode(r) == want, f"offset {off} length {ln} content")
            check(r["eof"] == (off + len(want) >= 384), f"offset {off} length {ln} eof {r['eof']}")
m = read("allctl.txt", length=(16 << 20) + 1)
check(m.get("error", {}).get("code") == -31007, f"length over max: {m}")

# ---- listing
def list_all(path, limit, **kw):
    out, cursor, pages = [], None, 0
    while True:
        p = {"path": path, "limit": limit}
        p.update(kw)
        if cursor:
            p["cursor"] = cursor
        m = s.call("files/list", p)
        dump.append(("list", path, p, m))
        if "error" in m:
            check(False, f"list {p}: {m['error']}")
            return out
        r = m["result"]
        check(len(r["entries"]) <= limit, "page over limit")
        out += r["entries"]
        pages += 1
        cursor = r.get("nextCursor")
        if cursor is None or pages > 1000:
            return out
        check(len(r["entries"]) == limit, f"short page with cursor ({len(r['entries'])})")

def utf8ok(n):
    try:
        n.encode()
        return True
    except UnicodeEncodeError:
        return False
expect_flat = sorted([n for n in os.listdir(root) if not n.startswith(".") and utf8ok(n)], key=lambda n: n.encode())
full = list_all("w", 1000)
check([e["name"] for e in full] == expect_flat, f"flat names {[e['name'] for e in full]}")
for e in full:
    check(e["path"] == "w/" + e["name"], f"path {e}")
for lim in (1, 2, 3, len(expect_flat), len(expect_flat) + 1):
    check(list_all("w", lim) == full, f"paged limit {lim} differs")
hid = list_all("w", 1000, includeHidden=True)
check(".hidden\"x" in [e["name"] for e in hid], "hidden missing")
rec = list_all("w", 2, recursive=True, includeHidden=True)
check([e["path"] for e in rec if e["path"].startswith("w/d/") or e["path"] == "w/d"] == ["w/d", "w/d/e", "w/d/e/f", "w/d/e/f/g"], f"recursive {[e['path'] for e in rec]}")
check(len(rec) == len({e["path"] for e in rec}), "recursive duplicates")

s.close()
if os.environ.get("DUMP"):
    with open(os.environ["DUMP"], "w") as f:
        for d in dump:
            f.write(json.dumps(d, sort_keys=True) + "\n")
print("fails:", len(fails))
sys.exit(1 if fails else 0)
