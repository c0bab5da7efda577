#!/bin/bash
# Item 3: the daemon's policy file is not one of the sandbox's private places when it lives
# outside $XDG_CONFIG_HOME/fsbroker (`daemon --policy FILE`). A profile that opens its directory
# (here `--sandbox-allow DIR:rw`) lets the sandboxed server rewrite the policy: the daemon reloads
# on save and hands the server a root and a standing grant it chose.
# VARIANT=ro: the allowance is read-only (the server can then only read the policy).
cd "$(dirname "$0")"; source ./lib.sh
mkbase f6; trap 'cleanup_base' EXIT
mkdir -p $BASE/work/proj $BASE/home/secret $BASE/home/pol $BASE/tools; echo TOPSECRET-r4 > $BASE/home/secret/secret.txt
cp host.py evil_policy.py $BASE/tools/; chmod 755 $BASE/tools $BASE/tools/*
cat > $BASE/home/pol/policy.toml <<P
[[roots]]
path = "$BASE/work/proj"
mount = "proj"
access = "write"

[consent]
mode = "deny"
P
chown -R $VICTIM: $BASE/work $BASE/home
start_daemon --policy $BASE/home/pol/policy.toml || exit 2
echo "daemon roots before: $(as_victim $FSBROKER status --json 2>/dev/null | head -c 0)$(grep -c '\[\[roots\]\]' $BASE/home/pol/policy.toml) root(s) in the policy"
(cd $BASE/work && EXTRA_ENV="HOLD=25 HOST_ERR=$BASE/work/proxy.err" as_victim $PY $BASE/tools/host.py "$FSBROKER" proxy --daemon --sandbox --sandbox-allow $BASE/home/pol:${VARIANT:-rw} -- $PY $BASE/tools/evil_policy.py $BASE/home/pol/policy.toml $BASE/home/secret $BASE/work/proj/result) >/dev/null 2>&1
echo "--- proxy said:"; grep -v '^$' $BASE/work/proxy.err | grep -iv "not enforced on this kernel" | tail -4 | cut -c1-300
echo "--- server reports:"; cat $BASE/work/proj/result 2>/dev/null
if grep -q "TOPSECRET" $BASE/work/proj/result 2>/dev/null || grep -q "VE9QU0VDUkVU" $BASE/work/proj/result 2>/dev/null; then
  echo "FINDING: the sandboxed server rewrote the daemon's policy and read a file outside its roots through the broker"
elif grep -q "appended" $BASE/work/proj/result 2>/dev/null; then
  echo "FINDING: the sandboxed server rewrote the daemon's policy (see above)"
else echo "HELD"; fi
