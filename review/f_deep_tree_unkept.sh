#!/bin/bash
# On a root on another filesystem than the store, a tree deeper than 128 levels -- a few
# bytes in all -- is deleted without being kept (unkept = "proceed", the default), and the
# journal says it was larger than copy_max_bytes.
BIN=${FSBROKER:-/work/review_rec/target/debug/fsbroker}
T=$(mktemp -d); mkdir -p $T/state; R=$(mktemp -d -p /dev/shm)
export XDG_STATE_HOME=$T/state
d=$R/deep; for i in $(seq 1 130); do d=$d/d; done; mkdir -p $d; echo "the user's notes" > $d/notes.txt
echo "tree: $(find $R/deep | wc -l) entries, $(du -sb $R/deep | cut -f1) bytes"
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/delete","params":{"path":"w/deep","recursive":true}}' |
  $BIN serve --root w=$R --writable --consent auto --server-id evil 2>/dev/null | tail -1
ls $R
$BIN history
rm -rf $R
