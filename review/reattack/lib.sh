# Shared helpers for the round-4 review scripts. Source me.
set -u
FSBROKER=${FSBROKER:-/tmp/fsb-review/fsbroker}
VICTIM=${VICTIM:-fsbv4}
ATTACKER=${ATTACKER:-fsba4}
PY=/usr/bin/python3
id "$VICTIM" >/dev/null 2>&1 || useradd -r -m -d /home/$VICTIM -s /bin/bash "$VICTIM"
id "$ATTACKER" >/dev/null 2>&1 || useradd -r -m -d /home/$ATTACKER -s /bin/bash "$ATTACKER"
VUID=$(id -u "$VICTIM"); VGID=$(id -g "$VICTIM")
AUID=$(id -u "$ATTACKER"); AGID=$(id -g "$ATTACKER")
# a private, per-script base owned by the victim
mkbase() { # $1 name -> sets BASE
  BASE=$(mktemp -d /tmp/r4-$1.XXXX); chmod 755 "$BASE"
  mkdir -p "$BASE"/{run,state,config,home,work}; chown -R "$VICTIM:" "$BASE"/{run,state,config,home,work}
  chmod 700 "$BASE"/{run,state,config,home}
}
as_victim() { # run as victim with private XDG env
  setpriv --reuid="$VUID" --regid="$VGID" --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin \
    HOME="$BASE/home" XDG_RUNTIME_DIR="${XRD:-$BASE/run}" XDG_STATE_HOME="$BASE/state" \
    XDG_CONFIG_HOME="$BASE/config" ${EXTRA_ENV:-} "$@"
}
as_attacker() {
  setpriv --reuid="$AUID" --regid="$AGID" --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin \
    HOME=/home/$ATTACKER "$@"
}
start_daemon() { # extra args -> daemon runs in foreground in background; sets DPID
  ( exec setpriv --reuid="$VUID" --regid="$VGID" --clear-groups env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$BASE/home" XDG_RUNTIME_DIR="${XRD:-$BASE/run}" XDG_STATE_HOME="$BASE/state" XDG_CONFIG_HOME="$BASE/config" "$FSBROKER" daemon --foreground "$@" >"$BASE/daemon.out" 2>&1 ) &
  DPID=$!
  for i in $(seq 1 100); do
    [ -S "$BASE/run/fsbroker/broker.sock" ] && as_victim "$FSBROKER" status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "daemon did not come up"; cat "$BASE/daemon.out"; return 1
}
cleanup_base() {
  [ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null
  sleep 0.3; [ -n "${DPID:-}" ] && kill -9 "$DPID" 2>/dev/null
  wait 2>/dev/null
  [ -n "${BASE:-}" ] && rm -rf "$BASE"
}
