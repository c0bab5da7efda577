#!/bin/bash
# Through the broker alone (create with parents, write, recursive delete), a 5 MiB file 131
# levels down, deleted three times, left 15 MiB in a store capped at 4 MiB: measuring a kept
# tree stopped at depth 128, so what lay deeper cost the store nothing. The same file at the
# top is refused. Fixed: every delete is refused (QUOTA_EXCEEDED not_recoverable), as the
# same file at the top is; the tree stays where it was, and the store holds nothing.
BIN=${FSBROKER:-$(dirname "$0")/../target/debug/fsbroker}
T=$(mktemp -d); mkdir -p $T/root $T/state
printf '[recovery]\nmax_bytes = 4194304\nmin_keep_hours = 1\n' > $T/policy.toml
python3 - "$T" <<'PY'
import base64, json, sys
t = sys.argv[1]
deep = "w/t/" + "/".join(["d"] * 130)
content = base64.b64encode(b"\x07" * (5 << 20)).decode()
reqs = [{"method": "files/consent", "params": {"requestedPaths": ["w"], "access": "write"}}]
for _ in range(3):
    reqs += [
        {"method": "files/create", "params": {"path": deep, "type": "directory", "parents": True}},
        {"method": "files/write", "params": {"path": deep + "/big", "content": content, "encoding": "base64"}},
        {"method": "files/delete", "params": {"path": "w/t", "recursive": True}},
    ]
with open(t + "/requests", "w") as f:
    for i, r in enumerate(reqs, 1):
        f.write(json.dumps({"jsonrpc": "2.0", "id": i, **r}) + "\n")
PY
XDG_STATE_HOME=$T/state $BIN serve --policy $T/policy.toml --root w=$T/root --writable --consent auto \
  --server-id deep < $T/requests 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r.get("id") in (4, 7, 10):
        print("delete", (r["id"] - 1) // 3, json.dumps(r.get("result", r.get("error")))[:200])'
echo "--- history (max_bytes = 4194304)"
XDG_STATE_HOME=$T/state $BIN history --policy $T/policy.toml | grep -i delete
echo "store on disk: $(du -sb $T/state/fsbroker/recovery/objects | cut -f1) bytes (max_bytes 4194304)"
echo "still in the root: $(find $T/root -name big | wc -l) file(s)"
rm -rf $T
