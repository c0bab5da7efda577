#!/bin/bash
# F2: the pid of a sandboxing proxy stays in the daemon's sandboxers set after the proxy is gone
# (its describe-follow connection is never read: see F1). When the kernel hands that pid to a
# new process (pid_max is 32768 here), every process beneath it is refused by the daemon as
# "a sandboxed server's process": a false refusal of the user's own commands.
# The pid reuse is forced with /proc/sys/kernel/ns_last_pid (root), as wrap-around does by itself.
cd "$(dirname "$0")"; source ./lib.sh
mkbase f2; trap cleanup_base EXIT
mkdir -p $BASE/work/proj; chown -R $VICTIM: $BASE/work; cp host.py $BASE/host.py; chmod 755 $BASE/host.py
start_daemon --root proj=$BASE/work/proj --writable || exit 2
(cd $BASE/work && EXTRA_ENV="HOLD=1.5 PIDFILE=$BASE/work/proxy.pid" as_victim $PY $BASE/host.py "$FSBROKER" proxy --daemon --sandbox -- $PY -c "import sys,time; sys.stdin.readline(); time.sleep(30)") >/dev/null 2>&1
P=$(cat $BASE/work/proxy.pid); echo "sandboxing proxy was pid $P; alive now? $(kill -0 $P 2>/dev/null && echo yes || echo no)"
echo "status from an ordinary shell: $(as_victim "$FSBROKER" status 2>&1 | head -1)"
got=""
for try in 1 2 3 4 5 6 7 8; do
  echo $((P-1)) > /proc/sys/kernel/ns_last_pid
  # the user's new shell (a terminal, tmux, a host) happens to get pid P
  OUT=$(as_victim bash -c 'echo "shell pid $$"; '"$FSBROKER"' status 2>&1 | head -1')
  if echo "$OUT" | grep -q "shell pid $P\$"; then got=1; break; fi
done
echo "$OUT"
if [ -z "$got" ]; then echo "could not reuse pid $P (busy machine); inconclusive"; exit 3; fi
if echo "$OUT" | grep -q "refused"; then
  echo "FINDING: the user's own status, from a shell that reused a dead sandboxing proxy's pid, is refused"
else
  echo "HELD"
fi
