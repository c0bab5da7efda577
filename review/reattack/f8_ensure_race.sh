#!/bin/bash
# Item 5: K `daemon --ensure` starters at once, ROUNDS times: exactly one daemon answers
# afterwards (never two, never none), and every starter succeeds.
cd "$(dirname "$0")"; source ./lib.sh
K=${K:-4}; ROUNDS=${ROUNDS:-4}; bad=0
for r in $(seq 1 $ROUNDS); do
  mkbase f8; mkdir -p $BASE/work/proj; chown -R $VICTIM: $BASE/work
  (cd $BASE/work && as_victim $FSBROKER daemon --init --root $BASE/work/proj >/dev/null 2>&1)
  for k in $(seq 1 $K); do (cd $BASE/work && as_victim $FSBROKER daemon --ensure >$BASE/work/e$k.out 2>&1; echo $? > $BASE/work/e$k.rc) & done
  wait
  rcs=$(cat $BASE/work/e*.rc | tr '\n' ' ')
  n=$(pgrep -u $VUID -fc "daemon --socket $BASE/run")
  st=$(as_victim $FSBROKER status 2>&1 | head -1)
  echo "round $r: starters rc=[$rcs] daemons=$n status='$st'"
  { [ "$n" != 1 ] || echo "$rcs" | grep -q '[1-9]'; } && { bad=1; cat $BASE/work/e*.out | sort | uniq -c | head -5; }
  for p in $(pgrep -u $VUID -f "daemon --socket $BASE/run"); do kill $p; done; sleep 0.5; rm -rf $BASE
done
[ $bad = 0 ] && echo HELD || echo "FINDING: ensure starters raced"
