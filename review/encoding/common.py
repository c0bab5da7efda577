"""Shared driver for the encoding reproductions: spawns `fsbroker serve` and checks every
response line strictly (one JSON value, valid UTF-8, no duplicate keys, newline-terminated)."""
import json, os, subprocess, sys, tempfile, itertools

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("FSBROKER", os.path.join(REPO, "target/release/fsbroker"))


def _no_dupes(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys {keys}")
    return dict(pairs)


def strict_parse(raw: bytes):
    """`raw` is one line including its newline."""
    assert raw.endswith(b"\n"), f"line without newline: {raw[:200]!r}"
    body = raw[:-1]
    assert b"\n" not in body
    text = body.decode("utf-8")  # strict
    return json.loads(text, object_pairs_hook=_no_dupes)


class Serve:
    def __init__(self, root, writable=True, extra=(), binary=None):
        self.state = tempfile.mkdtemp(prefix="fsb-state-")
        env = dict(os.environ, XDG_STATE_HOME=self.state)
        args = [binary or BIN, "serve", "--root", f"w={root}", "--consent", "auto", "--no-audit"]
        if writable:
            args.append("--writable")
        self.p = subprocess.Popen(args + list(extra), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=open(self.state + "/err", "wb"),
                                  env=env)
        self.ids = itertools.count(1000)
        self.notes = []

    def raw(self, line: bytes):
        self.p.stdin.write(line + b"\n")
        self.p.stdin.flush()

    def read_line(self):
        raw = self.p.stdout.readline()
        if not raw:
            raise RuntimeError("broker closed stdout")
        return raw, strict_parse(raw)

    def call_raw(self, line: bytes):
        """Sends one raw line, returns (raw, parsed) of the first non-notification answer."""
        self.raw(line)
        while True:
            raw, m = self.read_line()
            if isinstance(m, dict) and "method" in m and "id" not in m:
                self.notes.append(m)
                continue
            return raw, m

    def call(self, method, params=None, id=None):
        if id is None:
            id = next(self.ids)
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        raw, m = self.call_raw(json.dumps(msg, ensure_ascii=False).encode())
        assert m.get("id") == id, f"sent id {str(id)[:60]!r}, got {str(m)[:300]}"
        return m

    def consent(self):
        m = self.call("files/consent", {"requestedPaths": ["w"], "access": "write"}, id=1)
        assert m["result"]["granted"], m
        return m

    def close(self):
        try:
            self.p.stdin.close()
        except Exception:
            pass
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
