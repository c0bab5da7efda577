#!/bin/bash
# A server names a file with escape sequences (window title, clear screen, a forged line,
# hidden text) and a direction override, links to it and asks consent for the link: the
# grant is recorded under the real path, the journal keeps it, and `status`, `revoke`,
# `history` and `log` print it. Each verb's output is searched for raw ESC, BEL, U+202E,
# U+200B and U+2028: before the fix `status` and `revoke` carried the escape sequences and
# `history` the direction override; after it every count is 0 and the escapes are visible.
BIN=${FSBROKER:-$(dirname "$0")/../target/debug/fsbroker}
T=$(mktemp -d); mkdir -p $T/run $T/state $T/home $T/config $T/root
export XDG_RUNTIME_DIR=$T/run XDG_STATE_HOME=$T/state XDG_CONFIG_HOME=$T/config HOME=$T/home
NAME=$(printf '\033]0;owned\007\033[2J\033[1;1HSESSION ok (no grants)\033[8m\u202etxt.exe\u200b\u2028')
echo old > "$T/root/$NAME"; ln -s "$NAME" $T/root/link
$BIN daemon --foreground --root root=$T/root --writable --consent auto 2>$T/daemon.err &
DAEMON=$!
for _ in $(seq 1 100); do grep -q "daemon listening" $T/daemon.err && break; sleep 0.05; done
# The session stays attached while the verbs run: its input stays open for a few seconds.
{ printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["root/link"],"access":"write"}}' \
    '{"jsonrpc":"2.0","id":2,"method":"files/write","params":{"path":"root/link","content":"new"}}'; sleep 3; } |
  $BIN serve --daemon --server-id evil >/dev/null 2>&1 &
for _ in $(seq 1 100); do $BIN status --json 2>/dev/null | grep -q '"bytesWritten": 3' && break; sleep 0.05; done
raw() { # what, then the output on stdin
  local out; out=$(cat)
  printf '%-16s ESC %s  BEL %s  U+202E %s  U+200B %s  U+2028 %s\n' "$1" \
    "$(grep -c $'\033' <<<"$out")" "$(grep -c $'\007' <<<"$out")" \
    "$(grep -c $'\u202e' <<<"$out")" "$(grep -c $'\u200b' <<<"$out")" "$(grep -c $'\u2028' <<<"$out")"
}
$BIN status 2>&1 | raw status
$BIN status --json 2>&1 | raw "status --json"
$BIN history 2>&1 | raw history
$BIN history --json 2>&1 | raw "history --json"
$BIN log 2>&1 | raw log
$BIN revoke --server evil 2>&1 | raw revoke
echo "--- history as printed (escaped after the fix):"
$BIN history | cat -v | head -3
kill $DAEMON; wait $DAEMON 2>/dev/null
rm -rf $T
