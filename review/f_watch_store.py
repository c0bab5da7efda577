"""A recursive watch on a tree the server then deletes (moved into the store): do events
of the store (a prune, a restore, the user looking) reach the server?"""
import mcp, os, sys, tempfile, time, json, subprocess, select
T = tempfile.mkdtemp(); root = T + "/root"; state = T + "/state"; os.makedirs(root); os.makedirs(state)
os.makedirs(f"{root}/tree/sub/deeper")
open(f"{root}/tree/sub/f.txt", "w").write("x")
s = mcp.Serve(root, state)
s.consent(["w"])
for p in ["w/tree", "w/tree/sub"]:
    print("watch", p, s.request("files/watch", {"path": p, "recursive": True}))
print(s.request("files/delete", {"path": "w/tree/sub", "recursive": True}))
time.sleep(1.0)
store = state + "/fsbroker/recovery/objects"
obj = os.listdir(store)[0]
print("object", obj)
# The store changes: the user (or pruning) writes, deletes, creates entries in the kept tree.
open(f"{store}/{obj}/SECRET-NAME-in-store.txt", "w").write("s")
os.mkdir(f"{store}/{obj}/deeper/made-in-store")
os.unlink(f"{store}/{obj}/f.txt")
open(f"{store}/THE-STORE-ITSELF", "w").write("s")
time.sleep(1.0)
# Then the user restores it.
print(mcp.cli(state, "restore", [l.split()[0] for l in mcp.cli(state, "history")[1].splitlines() if "files/delete" in l][0]))
time.sleep(1.0)
open(f"{root}/tree/sub/after-restore.txt", "w").write("x")
time.sleep(1.5)
s.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
while True:
    m = json.loads(s.p.stdout.readline())
    if m.get("id") == "p": break
    s.notes.append(m)
for n in s.notes:
    print("NOTE", json.dumps(n.get("params", n)))
s.close()
