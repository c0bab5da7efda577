#!/bin/bash
# A sandboxed server whose profile opens the daemon's socket directory reads `broker.key`,
# which lets it say hello to the daemon as the user (sign in to the console, answer its own
# consent questions, add roots). Two ways the profile opened it: the server's script kept in
# $XDG_RUNTIME_DIR (its directory is inferred, and holds `fsbroker/`), and
# `--sandbox-allow $XDG_RUNTIME_DIR`. Also tried: the state directory's daemon log and the
# audit file, allowed by hand. Before the fix the server reads each; after it, the script
# runs alone (PermissionError on the key) and every allowance is refused with a message.
BIN=${FSBROKER:-$(dirname "$0")/../target/debug/fsbroker}
T=$(mktemp -d); mkdir -p $T/run $T/state $T/config $T/home $T/proj $T/logs
chmod 700 $T/run
export XDG_RUNTIME_DIR=$T/run XDG_STATE_HOME=$T/state XDG_CONFIG_HOME=$T/config HOME=$T/home
$BIN daemon --foreground --root $T/proj --audit-file $T/logs/audit.jsonl 2>$T/daemon.err &
DAEMON=$!
for _ in $(seq 100); do grep -q "daemon listening" $T/daemon.err && break; sleep 0.05; done
echo LOG > $T/state/fsbroker/daemon.log 2>/dev/null || { mkdir -p $T/state/fsbroker; echo LOG > $T/state/fsbroker/daemon.log; }
# The server reports what it could read on stderr, which the proxy copies, and ends.
cat > $T/run/server.py <<'PY'
import os, sys
for p in sys.argv[1:]:
    try:
        what = "READ " + repr(open(p).read()[:16])
    except Exception as e:
        what = type(e).__name__
    print(f"server: {p}: {what}", file=sys.stderr, flush=True)
PY
KEY=$T/run/fsbroker/broker.key
try() {
    echo "--- $*"
    sleep 2 | $BIN proxy --daemon --sandbox "$@" -- python3 $T/run/server.py \
        $KEY $T/state/fsbroker/daemon.log $T/logs/audit.jsonl 2>&1 |
        grep -E "^server:|fsbroker: --sandbox" | cut -c1-400
}
try
try --sandbox-allow $XDG_RUNTIME_DIR
try --sandbox-allow $T/run/fsbroker
try --sandbox-allow $T/state/fsbroker/daemon.log
try --sandbox-allow $T/logs
kill $DAEMON; wait $DAEMON 2>/dev/null
rm -rf $T
