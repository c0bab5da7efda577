"""Tiny JSON-RPC driver for `fsbroker serve` (stdin/stdout)."""
import json, os, subprocess, sys, itertools, base64

BIN = os.environ.get("FSBROKER", "/work/review_rec/target/debug/fsbroker")

class Serve:
    def __init__(self, root, state, server_id="evil", extra=(), env=None, mount="w"):
        e = dict(os.environ)
        e["XDG_STATE_HOME"] = state
        e.update(env or {})
        self.p = subprocess.Popen(
            [BIN, "serve", "--root", f"{mount}={root}", "--writable", "--consent", "auto",
             "--server-id", server_id, *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(state + "/serve.err", "ab"), env=e)
        self.ids = itertools.count(1)
        self.notes = []

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params):
        i = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("broker closed")
            m = json.loads(line)
            if m.get("id") == i:
                return m
            self.notes.append(m)

    def consent(self, paths, access="write"):
        return self.request("files/consent", {"requestedPaths": paths, "access": access})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)

def cli(state, *args, env=None):
    e = dict(os.environ); e["XDG_STATE_HOME"] = state; e.update(env or {})
    r = subprocess.run([BIN, *args], capture_output=True, text=True, env=e)
    return r.returncode, r.stdout, r.stderr
