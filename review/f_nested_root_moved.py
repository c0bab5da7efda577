"""A recursive delete of a directory that holds another root moves that root into the store.
Is the nested root's handle (now inside objects/) still served?"""
import mcp, os, tempfile, json, subprocess
T = tempfile.mkdtemp(); x = T + "/x"; state = T + "/state"
os.makedirs(x + "/docs"); os.makedirs(state)
open(x + "/docs/notes.txt", "w").write("user's notes")
open(T + "/policy.toml", "w").write(f'''
[[roots]]
path = "{x}"
mount = "repo"
access = "write"
[[roots]]
path = "{x}/docs"
mount = "docs"
access = "write"
[consent]
mode = "auto"
''')
e = dict(os.environ, XDG_STATE_HOME=state)
p = subprocess.Popen([mcp.BIN, "serve", "--policy", T + "/policy.toml", "--server-id", "evil"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e)
n = 0
def req(m, params):
    global n; n += 1
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n, "method": m, "params": params}) + "\n").encode()); p.stdin.flush()
    while True:
        r = json.loads(p.stdout.readline())
        if r.get("id") == n: return r
print(req("files/consent", {"requestedPaths": ["repo", "docs"], "access": "write"})["result"]["granted"])
print("delete repo/docs:", req("files/delete", {"path": "repo/docs", "recursive": True}))
print("read docs/notes.txt:", req("files/read", {"path": "docs/notes.txt"}))
print("write docs/x:", req("files/write", {"path": "docs/x", "content": "into the store?"}))
print("list docs:", req("files/list", {"path": "docs"}))
p.stdin.close(); p.wait()
for dp, dn, fn in os.walk(state + "/fsbroker/recovery/objects"):
    print(dp, fn)
