#!/usr/bin/python3
"""An impostor: listens on argv[1], answers every line with {"ok":true,...}, records what it hears
in argv[2]. Ends after argv[3] seconds."""
import socket, sys, os, time, threading, signal
path, rec, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
signal.alarm(int(secs) + 2)
try: os.unlink(path)
except OSError: pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(path); os.chmod(path, 0o777); s.listen(16)
s.settimeout(0.5); end = time.time() + secs
while time.time() < end:
    try: c, _ = s.accept()
    except socket.timeout: continue
    c.settimeout(1)
    try:
        c.sendall(b'{"ok":true,"daemon":"fsbroker","version":"0"}\n')
        data = c.recv(65536)
        if data:
            with open(rec, "ab") as f: f.write(b"HEARD: " + data[:200] + b"\n")
            c.sendall(b'{"ok":true,"sessions":[]}\n')
    except OSError: pass
    c.close()
