#!/bin/bash
# F1: a sandboxing proxy's `{"op":"describe","follow":true}` connection (src/daemon/attach.rs
# `follow`) is never read by the daemon, so when the proxy exits, its control slot (and its pid
# in the sandboxers' set) stays until the next policy change. After 64 sandboxed servers have
# come and gone, every command of the user, and every new attach, is refused.
# MODE=host-leaves (default): the host closes the proxy after LIVE seconds.
# MODE=server-exits: the sandboxed server exits by itself after LIVE seconds (host keeps its pipe open).
cd "$(dirname "$0")"; source ./lib.sh
mkbase f1; trap cleanup_base EXIT
mkdir -p $BASE/work/proj; chown -R $VICTIM: $BASE/work
start_daemon --root proj=$BASE/work/proj --writable || exit 2
echo "daemon pid $DPID"
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}'
N=${N:-66}; LIVE=${LIVE:-1.0}; MODE=${MODE:-host-leaves}
if [ "$MODE" = server-exits ]; then HOSTWAIT=30; SRV="import sys,time; sys.stdin.readline(); time.sleep($LIVE)"
else HOSTWAIT=$LIVE; SRV="import sys,time; sys.stdin.readline(); time.sleep(30)"; fi
cp host.py $BASE/host.py; chmod 755 $BASE/host.py
t0=$(date +%s)
for i in $(seq 1 $N); do
  (cd $BASE/work && EXTRA_ENV="HOLD=$HOSTWAIT" as_victim $PY $BASE/host.py timeout 20 "$FSBROKER" proxy --daemon --sandbox -- $PY -c "$SRV") >/dev/null 2>&1
  if [ $((i % 16)) -eq 0 ]; then
    echo "after $i proxies ($(( $(date +%s)-t0 ))s): daemon fds=$(ls /proc/$DPID/fd | wc -l); status: $(as_victim "$FSBROKER" status 2>&1 | head -1)"
  fi
done
sleep 1
echo "sandboxed servers still running: $(pgrep -u $VUID -f 'sandbox-exec' | wc -l)"
OUT=$(as_victim "$FSBROKER" status 2>&1); RC=$?
echo "status after $N sandboxed servers came and went: rc=$RC: $OUT"
if [ $RC -ne 0 ] && echo "$OUT" | grep -q "too many connections"; then
  echo "FINDING: exited sandboxing proxies keep control slots: the user's own status is refused"
  as_victim "$FSBROKER" revoke --all 2>&1 | head -1 | sed 's/^/  revoke --all: /'
  echo "$INIT" | (cd $BASE/work && as_victim timeout 20 "$FSBROKER" serve --daemon 2>&1 | head -2 | sed 's/^/  serve --daemon: /')
else
  echo "HELD"
fi
