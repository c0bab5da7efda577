#!/bin/bash
# Item 1: the client's proof of the socket (src/daemon/proof.rs) and the daemon's own check,
# against another user's impostor. Each case prints HELD or FINDING.
cd "$(dirname "$0")"; source ./lib.sh
mkbase f5; trap 'kill $(jobs -p) 2>/dev/null; rm -rf /tmp/r4-att-* /tmp/r4-gw-* /tmp/r4-stk-*; cleanup_base' EXIT
findings=0
cp listener.py /tmp/r4-listener.py; chmod 755 /tmp/r4-listener.py
REC=/tmp/r4-att-rec; 
impostor() { # $1 socket path (attacker creates it)
  rm -f $REC; as_attacker $PY /tmp/r4-listener.py "$1" $REC 6 & sleep 0.7; }
# a listener of the victim's own uid (a daemon-like program) in a place whose ancestor another user controls:
# the client must refuse the place, not just the uid
victim_listener() { rm -f $REC; touch $REC; chmod 666 $REC; : > $REC; as_victim $PY /tmp/r4-listener.py "$1" $REC 6 & sleep 0.7; }
judge() { # $1 case name, $2 client output
  if [ -s $REC ] || echo "$2" | grep -q "^No sessions\|no sessions"; then
    echo "FINDING [$1]: the client talked to the impostor: $(head -c 200 $REC 2>/dev/null) / $2"; findings=$((findings+1))
  else echo "HELD [$1]: $(echo "$2" | head -1 | cut -c1-230)"; fi; wait; }
# 1. XDG_RUNTIME_DIR through a link in a directory the attacker controls, to the attacker's dir
A=/tmp/r4-att-1; mkdir -p $A/real/fsbroker; chown -R $ATTACKER: $A; chmod 755 $A $A/real; chmod 700 $A/real/fsbroker; chmod 711 $A/real/fsbroker
as_attacker ln -s $A/real $A/link; impostor $A/real/fsbroker/broker.sock
judge "runtime dir through attacker's link" "$(XRD=$A/link as_victim $FSBROKER status 2>&1)"
# 1b. the attacker's link points at a directory owned by the victim inside the attacker's dir (victim made it)
A=/tmp/r4-att-1b; mkdir -p $A/v/fsbroker; chown $ATTACKER: $A; chown -R $VICTIM: $A/v; chmod 755 $A; chmod 700 $A/v/fsbroker; chmod 755 $A/v
victim_listener $A/v/fsbroker/broker.sock
judge "victim's dir below attacker's dir" "$(XRD=$A/v as_victim $FSBROKER status 2>&1)"
# 2. group-writable ancestor owned by root, whose group holds the attacker
G=/tmp/r4-gw-2; mkdir -p $G; chgrp $AGID $G; chmod 775 $G; mkdir -p $G/v/fsbroker; chown -R $VICTIM: $G/v; chmod 700 $G/v $G/v/fsbroker
victim_listener $G/v/fsbroker/broker.sock
judge "group-writable ancestor" "$(XRD=$G/v as_victim $FSBROKER status 2>&1)"
# 2b. the daemon refuses to start there too
OUT=$(XRD=$G/v as_victim timeout 10 $FSBROKER daemon --foreground --root $BASE/work 2>&1 | head -2)
echo "$OUT" | grep -qi "refus" && echo "HELD [daemon below group-writable dir]: $(echo "$OUT" | head -1 | cut -c1-200)" || { echo "FINDING [daemon below group-writable dir]: $OUT"; findings=$((findings+1)); }
# 3. sticky parent with the attacker's subdirectory on the path
S=/tmp/r4-stk-3; mkdir -p $S; chmod 1777 $S; as_attacker mkdir -p $S/att; chmod 755 $S/att 2>/dev/null; as_attacker chmod 777 $S/att; as_attacker mkdir $S/att/fsbroker; as_attacker chmod 700 $S/att/fsbroker
impostor $S/att/fsbroker/broker.sock
judge "sticky parent, attacker's subdir" "$(XRD=$S/att as_victim $FSBROKER status 2>&1)"
# 3b. the victim's dir inside the attacker's 0777 subdir of a sticky dir (attacker can rename it away)
as_victim mkdir -p $S/att/v/fsbroker; as_victim chmod 700 $S/att/v/fsbroker
victim_listener $S/att/v/fsbroker/broker.sock
judge "victim's dir in attacker's subdir of sticky dir" "$(XRD=$S/att/v as_victim $FSBROKER status 2>&1)"
# 4. relative --socket
judge "relative --socket" "$(cd $BASE/work && as_victim $FSBROKER status --daemon broker.sock 2>&1)"
# 5. a socket path that fits only before canonicalisation: a short link to a long real dir
L=$BASE/home/$(printf 'd%.0s' $(seq 1 80)); as_victim mkdir -p $L/fsbroker; as_victim chmod 700 $L/fsbroker
as_victim ln -s $L $BASE/home/s
victim_listener $L/fsbroker/broker.sock
judge "path over 107 bytes after canonicalisation" "$(XRD=$BASE/home/s as_victim $FSBROKER status 2>&1)"
# 6. the peer is another uid in a directory that passes (root-owned 0755 dir the attacker was handed a socket in is not possible);
#    the victim's own dir, listener of another uid: the attacker can't create there. Root's listener in the victim's dir:
as_victim mkdir -p $BASE/home/r6/fsbroker; as_victim chmod 700 $BASE/home/r6/fsbroker
rm -f $REC; $PY /tmp/r4-listener.py $BASE/home/r6/fsbroker/broker.sock $REC 6 & sleep 0.7
judge "listener of uid 0 at the victim's path" "$(XRD=$BASE/home/r6 as_victim $FSBROKER status 2>&1)"
echo "findings: $findings"
