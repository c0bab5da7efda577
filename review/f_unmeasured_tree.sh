#!/bin/bash
# A deleted tree the broker cannot measure (one unreadable directory in it, made by the
# server's own local process) costs the store 0 bytes: unbounded by max_bytes, and never
# removed, not even after keep_days. Run as an unprivileged user (root reads a 000 dir).
BIN=${FSBROKER:-/tmp/fsbroker-rev}
AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
T=$(mktemp -d); chmod 777 $T
$AS mkdir -p $T/root $T/state
cat > $T/policy.toml <<P
[recovery]
max_bytes = 5000000
P
chmod 644 $T/policy.toml
# The server's local process: a 20 MB tree with one unreadable directory in it.
$AS bash -c "mkdir -p $T/root/junk/locked && for i in 1 2 3 4; do head -c 5000000 /dev/zero > $T/root/junk/f\$i; done && chmod 000 $T/root/junk/locked"
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/delete","params":{"path":"w/junk","recursive":true}}' |
  $AS env XDG_STATE_HOME=$T/state $BIN serve --policy $T/policy.toml --root w=$T/root --writable --consent auto --server-id evil 2>&1 | tail -1 | cut -c1-300
echo "--- history (max_bytes = 5000000)"
$AS env XDG_STATE_HOME=$T/state $BIN history --policy $T/policy.toml
du -sh $T/state/fsbroker/recovery/objects; echo "root:"; ls -la $T/root/junk | head -4
