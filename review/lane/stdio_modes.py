# Checks O_NONBLOCK on stdin/stdout file descriptions after fsbroker exits, in several ways.
import os, fcntl, subprocess, signal, time, socket, sys
BIN = os.environ.get("FSBROKER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/fsbroker"))
ARGS = [BIN, "serve", "--root", "R=/tmp/r34root", "--consent", "auto"]
def nb(fd): return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK)
def run(label, how, pre_nonblock=False):
    ir, iw = os.pipe(); or_, ow = os.pipe()
    if pre_nonblock:
        os.set_blocking(ir, False); os.set_blocking(ow, False)
    p = subprocess.Popen(ARGS, stdin=ir, stdout=ow, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    during = (nb(ir), nb(ow))
    if how == "eof": os.close(iw); iw=None
    elif how == "term": p.send_signal(signal.SIGTERM)
    elif how == "int": p.send_signal(signal.SIGINT)
    elif how == "kill": p.kill()
    elif how == "hup": p.send_signal(signal.SIGHUP)
    elif how == "bad":
        os.write(iw, b"x"*(40<<20)+b"\n")  # over-long line
    try: rc = p.wait(5)
    except subprocess.TimeoutExpired: rc = "HANG"; p.kill(); p.wait()
    print(f"{label:30s} rc={rc} during(in,out)={during} after(in,out)={(nb(ir), nb(ow))} (before: {pre_nonblock})")
    for fd in (ir, iw, or_, ow):
        if fd is not None: os.close(fd)
for how in ["eof","term","int","hup","kill"]:
    run("pipe "+how, how)
run("pipe eof, host had O_NONBLOCK", "eof", pre_nonblock=True)
# stdin as file, /dev/null, socketpair
for label, stdin in [("stdin=/dev/null", open("/dev/null","rb")), ("stdin=file", open("/tmp/r34root/target","rb"))]:
    p = subprocess.Popen(ARGS, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try: out, err = p.communicate(timeout=5); print(label, "rc", p.returncode, out[:100], err[-200:])
    except subprocess.TimeoutExpired: p.kill(); print(label, "HANG")
a, b = socket.socketpair()
p = subprocess.Popen(ARGS, stdin=b, stdout=b, stderr=subprocess.DEVNULL)
a.sendall(b'{"jsonrpc":"2.0","id":0,"method":"files/consent","params":{"requestedPaths":["R"]}}\n{"jsonrpc":"2.0","id":1,"method":"files/read","params":{"path":"R/target"}}\n')
a.settimeout(3); data=b""
try:
    while data.count(b"\n")<2: data += a.recv(65536)
except Exception as e: print("socketpair recv", e)
a.shutdown(socket.SHUT_WR)
try: print("socketpair rc", p.wait(5), data[-150:], "nb(b)", not b.getblocking() or nb(b.fileno()))
except subprocess.TimeoutExpired: p.kill(); print("socketpair HANG after SHUT_WR")
