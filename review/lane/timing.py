# Measures response time of various requests against timeout_ms=200.
import os, sys, time; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client import *
p = start("/tmp/r34root")
print("consent:", str(recv(p))[:120])
deep = "R/deep/" + "/".join(["a"]*2040) + "/f"
cases = [
  ("stat deep", "files/stat", dict(path=deep)),
  ("read deep", "files/read", dict(path=deep)),
  ("stat long symlink chain", "files/stat", dict(path="R/s38")),
  ("read long symlink chain", "files/read", dict(path="R/s38")),
  ("read symlink chain", "files/read", dict(path="R/l38")),
  ("read big small len", "files/read", dict(path="R/big", length=10)),
  ("read big huge offset", "files/read", dict(path="R/big", offset=(1<<40)-3, length=10)),
  ("read big offset u64max", "files/read", dict(path="R/big", offset=2**64-1, length=10)),
  ("read big offset i64max", "files/read", dict(path="R/big", offset=2**63-1, length=2**63)),
  ("read big 16MiB", "files/read", dict(path="R/big", length=16<<20)),
  ("read big 16MiB b64", "files/read", dict(path="R/big", length=16<<20, encoding="base64")),
  ("read u8 split 64K", "files/read", dict(path="R/u8", offset=11, length=65536)),
  ("read u8 split 1", "files/read", dict(path="R/u8", offset=11, length=1)),
  ("read u8 split 1 utf8", "files/read", dict(path="R/u8", offset=11, length=1, encoding="utf8")),
  ("read fifo", "files/read", dict(path="R/fifo")),
  ("stat fifo", "files/stat", dict(path="R/fifo")),
]
for i,(name,m,pr) in enumerate(cases, 1):
    t=time.time(); send(p, req(i, m, **pr)); r = recv(p, 10); dt=(time.time()-t)*1000
    s = json.dumps(r)
    print(f"{name:28s} {dt:8.1f} ms  {s[:160] if len(s)<400 else s[:160]+'...len=%d'%len(s)}")
p.stdin.close(); print("exit", p.wait(5))
