#!/bin/bash
# Item 2: a sandboxed server (proxy --daemon --sandbox -- python3 flood.py) floods the daemon's
# socket while the user runs `fsbroker status` 30 times. DEPTH puts the flooding processes at
# the bottom of a chain of DEPTH forked processes (the daemon walks /proc parent by parent
# from each peer, up to 4096 hops, in its accept loop).
cd "$(dirname "$0")"; source ./lib.sh
DEPTH=${DEPTH:-0}; WORKERS=${WORKERS:-8}; OUT=${OUT:-32}; SECS=${SECS:-40}; RUNS=${RUNS:-30}
mkbase f3; trap 'kill $HP 2>/dev/null; cat $BASE/work/proxy.err 2>/dev/null | grep -v "^$" | tail -5; cleanup_base' EXIT
mkdir -p $BASE/work/proj; chown -R $VICTIM: $BASE/work; mkdir -p $BASE/tools; cp host.py flood.py chain.sh $BASE/tools/; chmod 755 $BASE/tools $BASE/tools/*
start_daemon --root proj=$BASE/work/proj --writable || exit 2
SOCK=$BASE/run/fsbroker/broker.sock
INIT='{"jsonrpc":"2.0","id":1,"method":"ping"}'
(cd $BASE/work && EXTRA_ENV="HOLD=$((SECS+5)) HOST_ERR=$BASE/work/proxy.err FLOOD_STATS=$BASE/work/proj/stats ${FLOOD_SH:+FLOOD_SH=1}" as_victim $PY $BASE/tools/host.py "$FSBROKER" proxy --daemon --sandbox -- $PY $BASE/tools/flood.py $SOCK $DEPTH $WORKERS $SECS $OUT) >/dev/null 2>&1 &
HP=$!
for k in $(seq 1 120); do grep -q "^chain" $BASE/work/proj/stats 2>/dev/null && break; sleep 0.5; done; sleep 2
grep "^chain" $BASE/work/proj/stats
echo "flood: depth $DEPTH, $WORKERS workers x $OUT pending; server processes: $(pgrep -u $VUID -c python3)"
fail=0; slow=0; t_start=$(date +%s)
for i in $(seq 1 $RUNS); do
  t0=$(date +%s.%N)
  if [ -n "${ATTACH:-}" ] && [ $((i % 2)) -eq 0 ]; then
    # the user's host starts another server: an attaching `serve --daemon` must answer initialize
    OUT_S=$( (echo "$INIT"; sleep 70) | timeout 80 setpriv --reuid=$VUID --regid=$VGID --clear-groups env -i PATH=/usr/bin:/bin HOME=$BASE/home XDG_RUNTIME_DIR=$BASE/run XDG_STATE_HOME=$BASE/state XDG_CONFIG_HOME=$BASE/config "$FSBROKER" serve --daemon 2>&1 | head -1); rc=1
    echo "$OUT_S" | grep -q '"result"' && rc=0; OUT_S="serve --daemon: $OUT_S"
  else
  OUT_S=$(timeout 90 setpriv --reuid=$VUID --regid=$VGID --clear-groups env -i PATH=/usr/bin:/bin HOME=$BASE/home XDG_RUNTIME_DIR=$BASE/run "$FSBROKER" status 2>&1); rc=$?
  fi
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ $rc -ne 0 ]; then fail=$((fail+1)); echo "  run $i: FAILED after ${dt}s: $(echo "$OUT_S" | head -1 | cut -c1-220)"; fi
  TIMES="${TIMES:-} $(printf %.2f $dt)"
  if [ $(echo "$dt > 5" | bc) = 1 ]; then slow=$((slow+1)); [ $rc -eq 0 ] && echo "  run $i: ok but took ${dt}s"; fi
  [ $(( $(date +%s) - t_start )) -gt $((SECS-2)) ] && { echo "  (flood window over after $i runs)"; RUNS=$i; break; }
done
wait $HP 2>/dev/null
echo "refused-at-accept warnings in the daemon's log: $(grep -c 'a proxy that sandboxes' $BASE/daemon.out)"
[ -f $BASE/work/proj/stats ] && awk '{m+=$4; a+=$6} END {print "flood made " m " connections, " a " answered/closed"}' $BASE/work/proj/stats
echo "status durations (s):$TIMES"
echo "status: $fail of $RUNS failed, $slow took over 5 s"
if [ $fail -gt 0 ]; then echo "FINDING: the user's status failed during a sandboxed server's flood"; else echo "HELD"; fi
