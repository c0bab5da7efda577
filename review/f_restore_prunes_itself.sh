#!/bin/bash
# A user's restore prunes, to make room for what stands at the place, the very change it restores.
set -e; trap - ERR
BIN=${FSBROKER:-/work/review_rec/target/debug/fsbroker}
T=$(mktemp -d); mkdir -p $T/root $T/state
cat > $T/policy.toml <<P
[recovery]
max_bytes = 10000000
min_keep_hours = 1
P
export XDG_STATE_HOME=$T/state
head -c 6000000 /dev/urandom > $T/root/big.bin
cp $T/root/big.bin $T/original.bin
# The server overwrites the user's 6 MB file.
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["w"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/write","params":{"path":"w/big.bin","content":"oops"}}' |
  $BIN serve --policy $T/policy.toml --root w=$T/root --writable --consent auto --server-id evil >/dev/null 2>&1
J=$T/state/fsbroker/recovery/journal.jsonl
ID=$(grep '"kept"' $J | python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())["id"])')
# Two hours pass (the change is now older than min_keep_hours): backdate its `at`.
python3 - "$J" <<'PY'
import sys,json,time
p=sys.argv[1]; out=[]
for l in open(p):
    d=json.loads(l); d["at"]-=2*3600*1000; out.append(json.dumps(d))
open(p,"w").write("\n".join(out)+"\n")
PY
# Meanwhile the user wrote another 6 MB version by hand.
head -c 6000000 /dev/urandom > $T/root/big.bin
echo "--- restore $ID"
$BIN restore --policy $T/policy.toml $ID && echo "exit 0" || echo "exit $?"
echo "--- history"
$BIN history --policy $T/policy.toml
echo "--- objects"; ls $T/state/fsbroker/recovery/objects
if cmp -s $T/root/big.bin $T/original.bin; then echo "OK: original restored"; else echo "BUG: original not at w/big.bin"; fi
ls -la $T/root
