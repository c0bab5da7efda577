"""Finding: every files/list answer line carries a buffer reserved for limit.min(1024)*128
bytes (128 KiB at the default limit of 1000) however few entries it holds, and the output
queue counts a line by its length, not by what it holds. A server that sends listings of an
empty directory and does not read its stdout makes the broker keep ~256 lines x 128 KiB
(the queue's 256 lines) while they are counted as 256 KiB.

Prints the broker's VmRSS before and after the flood. Compare FSBROKER=<old build>."""
import json, os, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Serve

N = int(os.environ.get("N", "3000"))
LIMIT = int(os.environ.get("LIMIT", "1000"))

def rss(pid):
    v = {}
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(("VmRSS", "VmData")):
            v[l.split(":")[0]] = int(l.split()[1])
    return v

root = tempfile.mkdtemp(prefix="fsb-cap-")
os.mkdir(os.path.join(root, "empty"))
s = Serve(root)
s.consent()
s.call("files/list", {"path": "w/empty", "limit": LIMIT})
time.sleep(0.3)
before = rss(s.p.pid)
# Flood without reading stdout: lines stop in the pipe (64 KiB) and then in the queue.
os.set_blocking(s.p.stdin.fileno(), False)
req = b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "files/list",
                           "params": {"path": "w/empty", "limit": LIMIT}}).encode() + b"\n"
               for i in range(10, 10 + N))
sent = 0
deadline = time.time() + 20
while sent < len(req) and time.time() < deadline:
    try:
        sent += os.write(s.p.stdin.fileno(), req[sent:])
    except BlockingIOError:
        time.sleep(0.05)
time.sleep(2)
after = rss(s.p.pid)
print(f"limit={LIMIT} requests sent (bytes) {sent}/{len(req)}; before {before} KiB, after {after} KiB: VmRSS grew {after['VmRSS'] - before['VmRSS']} KiB, VmData grew {after['VmData'] - before['VmData']} KiB")
# Drain and check every answer is an empty listing with its id.
os.set_blocking(s.p.stdin.fileno(), True)
s.p.stdin.close()
n = 0
for raw in s.p.stdout:
    m = json.loads(raw)
    if m.get("result") != {"entries": []}:
        print("answer", str(m)[:300]); continue
    n += 1
print("answers", n)
