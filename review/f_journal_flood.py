"""A server that renames one file back and forth: every rename is journaled, costs the
store nothing, and no bound applies: the journal grows without limit (for keep_days), and
every `history`, `restore`, `undo` and console view reads all of it into memory."""
import mcp, os, sys, tempfile, time, json
T = tempfile.mkdtemp(); root = T + "/root"; state = T + "/state"; os.makedirs(root); os.makedirs(state)
s = mcp.Serve(root, state)
s.consent(["w"])
long = "d" * 200
os.makedirs(f"{root}/{long}/{long}/{long}/{long}/{long}")
base = f"w/{long}/{long}/{long}/{long}/{long}/"
s.request("files/write", {"path": base + "a" * 200, "content": "x"})
N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
t = time.time()
names = [base + "a" * 200, base + "b" * 200]
# Pipelined: send many at once.
bad = 0
W = 64
for k in range(0, N, W):
    for i in range(k, min(N, k + W)):
        s.send({"jsonrpc": "2.0", "id": f"r{i}", "method": "files/rename",
                "params": {"oldPath": names[i % 2], "newPath": names[(i + 1) % 2]}})
    for i in range(k, min(N, k + W)):
        m = json.loads(s.p.stdout.readline())
        if "error" in m: bad += 1; print(m) if bad < 3 else None
dt = time.time() - t
j = os.path.getsize(state + "/fsbroker/recovery/journal.jsonl")
print(f"{N} renames in {dt:.1f}s ({N/dt:.0f}/s), {bad} errors; journal {j/1e6:.1f} MB "
      f"({j/N:.0f} B a rename, {j/dt/1e6:.2f} MB/s = {j/dt*86400/1e9:.0f} GB/day, kept 30 days)")
print(mcp.cli(state, "history", "--json")[1][:0] or "history read ok")
s.close()
t = time.time(); rc = os.system(f"XDG_STATE_HOME={state} /usr/bin/time -f 'history: %M KB max RSS, %e s' {mcp.BIN} history >/dev/null"); 
