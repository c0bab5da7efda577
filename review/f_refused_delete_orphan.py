"""A delete refused for a full store moves the entry back; when the name is taken meanwhile
(the server's own local process, or another broker process), the user's tree stays in the
store's objects/ with no journal line: gone from the root, absent from `history`, never
restorable by id, never pruned."""
import mcp, os, sys, tempfile, time, json, threading
T = tempfile.mkdtemp(); root = T + "/root"; state = T + "/state"; os.makedirs(root); os.makedirs(state)
open(T + "/policy.toml", "w").write("[recovery]\nmax_bytes = 3000000\n")
# The user's project: 4,000 small files.
os.makedirs(f"{root}/userdir/src")
for i in range(4000):
    open(f"{root}/userdir/src/f{i}.c", "w").write(f"int f{i};\n")
open(f"{root}/filler", "wb").write(b"\0" * 2_900_000)
s = mcp.Serve(root, state, extra=["--policy", T + "/policy.toml"])
s.consent(["w"])
print("fill:", s.request("files/delete", {"path": "w/filler"}).get("result"))
stop = False
def racer():  # the server's local process: takes the name the moment it is free
    while not stop:
        try:
            os.mkdir(f"{root}/userdir"); return
        except FileExistsError:
            pass
t = threading.Thread(target=racer); t.start()
r = s.request("files/delete", {"path": "w/userdir", "recursive": True})
stop = True; t.join()
print("delete:", r.get("error", r.get("result")))
s.close()
print("root/userdir now:", os.listdir(f"{root}/userdir"))
print("history:\n" + mcp.cli(state, "history")[1])
objs = os.listdir(state + "/fsbroker/recovery/objects")
ids = mcp.cli(state, "history")[1]
for o in objs:
    n = sum(len(f) for _, _, f in os.walk(f"{state}/fsbroker/recovery/objects/{o}"))
    print("object", o, "files:", n, "journaled" if o in ids else "NOT IN THE JOURNAL")
print(open(state + "/serve.err").read()[-600:])
