#!/bin/bash
# A deleted read-only directory cannot be restored by an unprivileged user: moving a
# directory to another parent needs write permission on it (its `..`), and the store keeps
# the directory's own mode. (Also: a recursive delete of a read-only directory is refused.)
BIN=${FSBROKER:-/tmp/fsbroker-rev}
AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
T=$(mktemp -d); chmod 777 $T
$AS mkdir -p $T/root/ro $T/state; $AS chmod 555 $T/root/ro
run() { $AS env XDG_STATE_HOME=$T/state $BIN "$@"; }
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/delete","params":{"path":"w/ro"}}' |
  run serve --root w=$T/root --writable --consent auto --server-id evil 2>/dev/null | tail -1 | cut -c1-200
run undo --server evil
ls -la $T/root
