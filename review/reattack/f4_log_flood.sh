#!/bin/bash
# F4: every connection the daemon refuses (a sandboxed server's, at accept) is one WARN line in
# daemon.log, which is rotated only when a daemon starts. A sandboxed server that connects in a
# loop grows the user's state directory (where the recovery store also lives) without bound.
cd "$(dirname "$0")"; source ./lib.sh
SECS=${SECS:-20}
mkbase f4; trap 'kill $HP 2>/dev/null; [ -n "${D:-}" ] && kill $D 2>/dev/null; sleep 0.5; cleanup_base' EXIT
mkdir -p $BASE/work/proj; chown -R $VICTIM: $BASE/work; mkdir -p $BASE/tools; cp host.py flood.py chain.sh $BASE/tools/; chmod 755 $BASE/tools $BASE/tools/*
(cd $BASE/work && as_victim "$FSBROKER" daemon --root proj=$BASE/work/proj --writable) || exit 2
D=$(pgrep -u $VUID -f "daemon --root proj=$BASE/work/proj" | head -1); echo "background daemon pid $D"
LOG=$BASE/state/fsbroker/daemon.log; s0=$(stat -c %s $LOG); echo "daemon.log before: $s0 bytes"
SOCK=$BASE/run/fsbroker/broker.sock
(cd $BASE/work && EXTRA_ENV="HOLD=$((SECS+5)) HOST_ERR=$BASE/work/proxy.err" as_victim $PY $BASE/tools/host.py "$FSBROKER" proxy --daemon --sandbox -- $PY $BASE/tools/flood.py $SOCK 0 4 $SECS 16) >/dev/null 2>&1 &
HP=$!; wait $HP
s1=$(stat -c %s $LOG); n=$(grep -c 'a proxy that sandboxes' $LOG)
rate=$(( (s1-s0)/SECS ))
echo "daemon.log after $SECS s of a sandboxed server's connect loop: $s1 bytes ($n refusal lines), $rate bytes/s = $((rate*3600/1048576)) MiB/hour"
grep -m1 'a proxy that sandboxes' $LOG | cut -c1-200
if [ $rate -gt 100000 ]; then echo "FINDING: a sandboxed server grows daemon.log without bound (~$((rate*86400/1073741824)) GiB/day)"; else echo "HELD"; fi
