#!/bin/bash
# A kept tree with a read-only directory in it (a Go module cache, or one the server's local
# process made read-only) cannot be pruned: the journal marks it pruned and stops counting it,
# but its content stays in the store for good. Run unprivileged (root ignores modes).
BIN=${FSBROKER:-/tmp/fsbroker-rev}
AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
T=$(mktemp -d); chmod 777 $T
$AS mkdir -p $T/root $T/state
printf '[recovery]\nmax_bytes = 12000000\nmin_keep_hours = 1\n' > $T/policy.toml; chmod 644 $T/policy.toml
$AS bash -c "mkdir -p $T/root/junk/ro && head -c 10000000 /dev/zero > $T/root/junk/ro/big && chmod 555 $T/root/junk/ro"
run() { $AS env XDG_STATE_HOME=$T/state $BIN "$@"; }
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/delete","params":{"path":"w/junk","recursive":true}}' |
  run serve --policy $T/policy.toml --root w=$T/root --writable --consent auto --server-id evil >/dev/null 2>&1
J=$T/state/fsbroker/recovery/journal.jsonl
# Two hours pass.
$AS /usr/bin/python3 -c "
import json,sys; p='$J'; L=[json.loads(l) for l in open(p)]
for d in L: d['at']-=2*3600*1000
open(p,'w').write(''.join(json.dumps(d)+'\n' for d in L))"
# Another change needs the room: the old tree is pruned for space.
$AS bash -c "head -c 8000000 /dev/zero > $T/root/other"
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/delete","params":{"path":"w/other"}}' |
  run serve --policy $T/policy.toml --root w=$T/root --writable --consent auto --server-id evil 2>&1 | grep -i "warn\|error" | cut -c1-220
run history --policy $T/policy.toml
echo "store on disk: $(du -sb $T/state/fsbroker/recovery/objects | cut -f1) bytes (max_bytes 12000000)"
