#!/bin/sh
# chain.sh N CMD...: runs CMD at the bottom of a chain of N shells, each waiting for the next.
n=$1; shift
if [ "$n" -gt 0 ]; then /bin/sh "$0" $((n-1)) "$@" </dev/null; exit 0; else exec "$@"; fi
