#!/usr/bin/env python3
"""The time of `fsbroker wrap` and `fsbroker unwrap` on a configuration with 20 servers.

    benches/wrap.py target/release/fsbroker

Writes a Claude Desktop file (JSON, 20 stdio servers, one argument a line) and a Codex file
(TOML, 20 `[mcp_servers.NAME]` tables) under a temporary HOME, then runs `wrap` and
`unwrap` on each alternately (and `wrap --dry-run`, which computes the same rewrite and
writes nothing), WRAP_BENCH_RUNS times each (default 50), checking that every
unwrap gives the original back byte for byte. Prints the median and the 90th percentile of
each, in milliseconds: the whole command, process start-up included, since that is what a
user waits for.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SERVERS = 20


def json_config():
    servers = {
        f"server-{i}": {
            "command": "npx",
            "args": ["-y", f"@example/mcp-server-{i}", f"/home/me/project-{i}"],
            "env": {"LOG_LEVEL": "info"},
        }
        for i in range(SERVERS)
    }
    return json.dumps({"mcpServers": servers, "preferences": {"sidebarMode": "chat"}}, indent=2) + "\n"


def toml_config():
    out = ['# Codex configuration\nmodel = "gpt-5-codex"\n']
    for i in range(SERVERS):
        out.append(
            f'\n# server {i}\n[mcp_servers.server-{i}]\ncommand = "uvx"\n'
            f'args = ["mcp-server-{i}", "--root", "/home/me/project-{i}"]\n'
            f'[mcp_servers.server-{i}.env]\nLOG_LEVEL = "info"\n'
        )
    return "".join(out)


def timed(exe, home, args):
    start = time.perf_counter()
    subprocess.run([exe, *args], env={**os.environ, "HOME": home}, cwd=home, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main():
    exe = os.path.abspath(sys.argv[1])
    runs = int(os.environ.get("WRAP_BENCH_RUNS", "50"))
    with tempfile.TemporaryDirectory() as home:
        files = {
            "claude-desktop": (os.path.join(home, ".config/Claude/claude_desktop_config.json"), json_config()),
            "codex": (os.path.join(home, ".codex/config.toml"), toml_config()),
        }
        for path, text in files.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        for host, (path, text) in files.items():
            dry, wraps, unwraps = [], [], []
            for _ in range(runs):
                dry.append(timed(exe, home, ["wrap", "--dry-run", host]))
                wraps.append(timed(exe, home, ["wrap", host]))
                unwraps.append(timed(exe, home, ["unwrap", host]))
                with open(path) as f:
                    assert f.read() == text, f"{host}: unwrap did not give the original back"
            for name, t in (("dry-run", dry), ("wrap", wraps), ("unwrap", unwraps)):
                p90 = statistics.quantiles(t, n=10)[-1]
                print(f"{host:15} {name:8} {SERVERS} servers: median {statistics.median(t):.1f} ms, p90 {p90:.1f} ms")


if __name__ == "__main__":
    main()
