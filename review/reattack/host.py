#!/usr/bin/python3
"""A minimal MCP host: runs ARGV, sends initialize, keeps the pipe open HOLD seconds (or until the
child exits), then closes stdin and waits at most 10 s. Prints the child's exit code."""
import os, subprocess, sys, time, json
hold = float(os.environ.get("HOLD", "1"))
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                     stderr=open(os.environ.get("HOST_ERR", "/dev/null"), "ab"))
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}
if os.environ.get("PIDFILE"): open(os.environ["PIDFILE"], "w").write(str(p.pid))
p.stdin.write((json.dumps(init) + "\n").encode()); p.stdin.flush()
end = time.time() + hold
while time.time() < end and p.poll() is None:
    time.sleep(0.05)
try: p.stdin.close()
except Exception: pass
try: p.wait(10)
except subprocess.TimeoutExpired:
    p.kill(); p.wait()
print(p.returncode)
