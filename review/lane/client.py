import json, os, subprocess, sys, time, select
BIN = os.environ.get("FSBROKER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/fsbroker"))
def start(root, name="R", timeout_ms=200, extra_policy="", stderr=subprocess.DEVNULL, **kw):
    pol = f"/tmp/r34pol_{os.getpid()}.toml"
    open(pol, "w").write(f"[limits]\ntimeout_ms = {timeout_ms}\n{extra_policy}")
    p = subprocess.Popen([BIN, "serve", "--root", f"{name}={root}", "--consent", "auto", "--policy", pol],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, **kw)
    send(p, {"jsonrpc":"2.0","id":0,"method":"files/consent","params":{"requestedPaths":[name]}})
    return p
def send(p, msg):
    p.stdin.write((json.dumps(msg)+"\n").encode()); p.stdin.flush()
import threading, queue
_qs = {}
def recv(p, t=10):
    if p not in _qs:
        q = _qs[p] = queue.Queue()
        def rd():
            for l in p.stdout: q.put(json.loads(l))
            q.put("EOF")
        threading.Thread(target=rd, daemon=True).start()
    try: return _qs[p].get(timeout=t)
    except queue.Empty: return None
def req(i, m, **params): return {"jsonrpc":"2.0","id":i,"method":m,"params":params}
