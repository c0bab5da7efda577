#!/bin/bash
# A restore opens the root the journal names by its path, following links on the way,
# checked only against that root itself: a root nested in a writable root (the same policy,
# or another broker's) that the server's local process swaps for a link leads the user's
# `undo`/`restore` outside every root. The broker itself refuses such a link at start.
BIN=${FSBROKER:-/work/review_rec/target/debug/fsbroker}
T=$(mktemp -d); mkdir -p $T/x/docs $T/state $T/outside
export XDG_STATE_HOME=$T/state
echo "user's notes" > $T/x/docs/notes.txt
echo "the user's file outside every root" > $T/outside/precious.txt
cat > $T/policy.toml <<P
[[roots]]
path = "$T/x"
mount = "repo"
access = "write"
[[roots]]
path = "$T/x/docs"
mount = "docs"
access = "write"
[consent]
mode = "auto"
P
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"files/consent","params":{"requestedPaths":["docs","repo"],"access":"write"}}' \
  '{"jsonrpc":"2.0","id":2,"method":"files/write","params":{"path":"docs/evil.txt","content":"planted by the server"}}' \
  '{"jsonrpc":"2.0","id":3,"method":"files/delete","params":{"path":"docs/evil.txt"}}' \
  '{"jsonrpc":"2.0","id":4,"method":"files/write","params":{"path":"docs/precious.txt","content":"x"}}' \
  '{"jsonrpc":"2.0","id":5,"method":"files/delete","params":{"path":"docs/notes.txt"}}' |
  $BIN serve --policy $T/policy.toml --server-id evil >/dev/null 2>&1
# The server's local process (it can write the `repo` root): docs becomes a link outside.
mv $T/x/docs $T/x/docs.old && ln -s $T/outside $T/x/docs
$BIN history
echo "--- the user restores the deleted notes, and one more of the listed changes"
for id in $($BIN history | awk '/notes.txt|evil.txt.*delete|precious/{print $1}'); do $BIN restore $id; done
echo "--- outside:"; ls -la $T/outside; for f in $T/outside/*; do echo "$f: $(cat $f)"; done
