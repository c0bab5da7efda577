"""Probe (held): a file truncated and rewritten while it is read, in chunks over and under
the 64 KiB in-place/pool split. The file only ever holds b"A" bytes, so any other byte in a
chunk would be memory the broker did not fill (the read buffer is no longer zeroed); each
answer must also be self-consistent (length == decoded bytes, offset as asked)."""
import base64, os, sys, tempfile, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

root = tempfile.mkdtemp(prefix="fsb-race-")
path = os.path.join(root, "f.bin")
open(path, "wb").write(b"A" * (3 << 20))
stop = False

def churn():
    # Shrinks by truncating down, grows by appending b"A": the file never holds a zero.
    sizes = [0, 100, 65535, 65537, 1 << 20, 3 << 20]
    i = 0
    while not stop:
        want = sizes[i % len(sizes)]
        with open(path, "r+b") as f:
            have = f.seek(0, 2)
            if want < have:
                f.truncate(want)
            else:
                f.write(b"A" * (want - have))
        i += 1

t = threading.Thread(target=churn)
t.start()
s = Serve(root)
s.consent()
bad = n = 0
t0 = time.time()
while time.time() - t0 < 20:
    for off, ln, enc in [(0, 65536, "base64"), (0, 65537, "base64"), (1000, 1 << 20, None),
                         (65536, 65536, None), (0, 3 << 20, "base64")]:
        p = {"path": "w/f.bin", "offset": off, "length": ln}
        if enc:
            p["encoding"] = enc
        m = s.call("files/read", p)
        n += 1
        if "error" in m:
            continue
        r = m["result"]
        c = base64.b64decode(r["content"]) if r["encoding"] == "base64" else r["content"].encode()
        if c.strip(b"A") or len(c) != r["length"] or r["offset"] != off or len(c) > ln:
            bad += 1
            print("BAD", off, ln, r["length"], len(c), set(c) - {65})
stop = True
t.join()
s.close()
print("reads", n, "bad", bad)
sys.exit(1 if bad else 0)
