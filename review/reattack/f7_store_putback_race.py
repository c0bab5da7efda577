#!/usr/bin/python3
"""F7 (item 4): a delete the store refuses is put back, unless the server took the name in the
meantime: then "the delete stands, journaled, and the store is over its bound by this one
change" (src/recovery/keep.rs). A server that races for the name on every refused delete grows
the store without bound, and its refused deletes succeed.
Runs as root; drops to the victim user for the broker. Prints FINDING or HELD."""
import os, sys, json, subprocess, threading, time, tempfile, pwd, shutil
FSB = os.environ.get("FSBROKER", "/tmp/fsb-review/fsbroker")
victim = os.environ.get("VICTIM", "fsbv4")
pw = pwd.getpwnam(victim)
ROUNDS = int(os.environ.get("ROUNDS", "5")); MB = int(os.environ.get("MB", "5"))
base = tempfile.mkdtemp(prefix="r4-f7."); os.chmod(base, 0o755)
def as_victim():
    os.setgid(pw.pw_gid); os.setgroups([]); os.setuid(pw.pw_uid)
if os.getuid() == 0:
    os.chown(base, pw.pw_uid, pw.pw_gid)
    # the whole test runs as the victim (the broker and the "server" that races are both the user's processes)
    pid = os.fork()
    if pid:
        _, st = os.waitpid(pid, 0); shutil.rmtree(base, ignore_errors=True); sys.exit(os.waitstatus_to_exitcode(st))
    as_victim()
root = os.path.join(base, "r"); store = os.path.join(base, "store"); os.mkdir(root)
pol = os.path.join(base, "policy.toml")
open(pol, "w").write(f'''[[roots]]
path = "{root}"
mount = "r"
access = "write"

[consent]
mode = "auto"

[[grants]]
servers = ["*"]
path = "r"
access = "write"

[recovery]
dir = "{store}"
max_bytes = 4194304
min_keep_hours = 24
''')
env = dict(PATH="/usr/bin:/bin", HOME=base, XDG_STATE_HOME=base + "/state", XDG_CONFIG_HOME=base + "/cfg")
p = subprocess.Popen([FSB, "serve", "--policy", pol, "--no-audit"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=open(base + "/serve.err", "w"), env=env, cwd=base)
def call(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()); p.stdin.flush()
    while True:
        line = p.stdout.readline()
        if not line: return {"error": "EOF"}
        m = json.loads(line)
        if m.get("id") == i: return m
def du(path):
    t = 0
    for d, _, fs in os.walk(path):
        for f in fs:
            try: t += os.lstat(os.path.join(d, f)).st_size
            except OSError: pass
    return t
def make_tree(d):
    os.mkdir(d)
    with open(os.path.join(d, "big.bin"), "wb") as f: f.write(os.urandom(MB << 20))
    # many small entries make the measuring walk longer (a wider window); not needed to win
    for k in range(int(os.environ.get("ENTRIES", "3000"))): open(os.path.join(d, f"s{k}"), "w").write("x")
print(f"store cap 4 MiB; each tree {MB} MiB (larger than the whole store)")
# control: without a race the delete is refused and the tree stays
make_tree(os.path.join(root, "ctl"))
a = call(1, "files/delete", {"path": "r/ctl", "recursive": True})
print("control delete (no race):", json.dumps(a.get("error", a.get("result")))[:160], "| tree still there:", os.path.exists(os.path.join(root, "ctl/big.bin")))
won = 0
for k in range(ROUNDS):
    name = os.path.join(root, f"t{k}"); make_tree(name)
    stop = threading.Event(); took = []
    def racer():
        end = time.time() + 20
        while not stop.is_set() and time.time() < end:
            try:
                os.mkdir(name); took.append(1); return   # the name is free: the broker moved the tree away
            except FileExistsError:
                pass
    t = threading.Thread(target=racer); t.start()
    a = call(10 + k, "files/delete", {"path": f"r/t{k}", "recursive": True})
    stop.set(); t.join()
    res = a.get("error", a.get("result"))
    gone = not os.path.exists(os.path.join(name, "big.bin"))
    won += 1 if (took and gone) else 0
    print(f"round {k}: delete answered {json.dumps(res)[:150]} | name retaken: {bool(took)} | tree gone from root: {gone} | store now {du(store)/1048576:.1f} MiB")
p.stdin.close(); p.wait(10)
total = du(store)
print(f"store holds {total/1048576:.1f} MiB with a cap of 4 MiB")
err = open(base + "/serve.err").read()
for l in err.splitlines():
    if "put back" in l: print("broker log:", l[:250]); break
if total > 2 * 4194304:
    print("FINDING: refused deletes stand when the server retakes the name; the store exceeds its cap by one change per race, without bound")
else:
    print("HELD")
