#!/bin/bash
# On a root on another filesystem than the store, a user's restore (or undo) removes what
# stands at the place without keeping it when it is larger than copy_max_bytes.
BIN=${FSBROKER:-/work/review_rec/target/debug/fsbroker}
T=$(mktemp -d); R=$(mktemp -d -p /dev/shm); mkdir -p $T/state
cat > $T/policy.toml <<P
[recovery]
copy_max_bytes = 1000000
P
export XDG_STATE_HOME=$T/state
head -c 500000 /dev/urandom > $R/report.bin
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/write","params":{"path":"w/report.bin","content":"oops"}}' |
  $BIN serve --policy $T/policy.toml --root w=$R --writable --consent auto --server-id evil >/dev/null 2>&1
J=$T/state/fsbroker/recovery/journal.jsonl
ID=$(grep '"kept"' $J | python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())["id"])')
# The user writes a new, larger version of the file by hand, then restores the old one.
head -c 2000000 /dev/urandom > $R/report.bin; cp $R/report.bin $T/users-latest.bin
echo "--- restore $ID"
$BIN restore --policy $T/policy.toml $ID
echo "--- history"
$BIN history --policy $T/policy.toml
found=0
for f in $(find $T/state/fsbroker/recovery/objects $R -type f); do cmp -s $f $T/users-latest.bin && { echo "user's latest kept at $f"; found=1; }; done
[ $found = 1 ] || echo "BUG: the user's latest version (2 MB) is gone for good"
rm -rf $R
