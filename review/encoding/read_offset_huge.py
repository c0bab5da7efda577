"""Finding: files/read at an offset past the end is an empty chunk with eof (as before the
change) only while lseek accepts the offset. read_at now seeks (lseek) even when it has nothing
to read, and lseek fails with EINVAL past the file system's largest file (ext4: 2^44,
16 TiB) and past i64::MAX everywhere, so the answer is an IO_ERROR. The previous commit did no I/O for an empty chunk and answered
{"content":"","length":0,"eof":true,...} for every u64 offset (ReadParams.offset is a u64).
Exit 1 when the answers differ from the empty-chunk result."""
import os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

root = tempfile.mkdtemp(prefix="fsb-off-")
with open(os.path.join(root, "f.txt"), "w") as f:
    f.write("hello")
s = Serve(root)
s.consent()
bad = 0
for off in [6, 2**43, 2**44, 2**63 - 1, 2**63, 2**64 - 1]:
    for ln in [0, 1]:
        m = s.call("files/read", {"path": "w/f.txt", "offset": off, "length": ln})
        ok = "result" in m and m["result"]["content"] == "" and m["result"]["eof"]
        print("offset", off, "length", ln, "->", m.get("result") and {k: m["result"][k] for k in ("content", "length", "eof")} or m.get("error"))
        bad += not ok
s.close()
sys.exit(1 if bad else 0)
