#!/usr/bin/env bash
# check_malloc.sh PROGRAM [ARGS...] - run PROGRAM under LD_DEBUG=bindings and
# check that every binding of the symbol `malloc' goes to libc.so.6, the
# program's own included (it must call malloc: examples/consumer/main.c
# does). A library that brought jemalloc (or any malloc) into the link
# before libc would show up here as the host's malloc. Prints the program's
# own binding line; exit 0 ok, 1 a malloc bound elsewhere or none seen.
set -euo pipefail
prog=$1
log=$(mktemp "${TMPDIR:-/tmp}/check_malloc.XXXXXX")
trap 'rm -f "$log"' EXIT
LD_DEBUG=bindings LD_DEBUG_OUTPUT="$log" "$@" >/dev/null
# LD_DEBUG_OUTPUT appends .<pid>; the program may fork (one file each).
lines=$(cat "$log".* | grep "symbol \`malloc'" || true)
rm -f "$log".*
name=$(basename "$prog")
own=$(grep "binding file [^ ]*$name \[0\]" <<<"$lines" || true)
if [ -z "$own" ]; then
	echo "check_malloc: $name made no binding of malloc" >&2
	exit 1
fi
echo "$own" | head -1 | sed 's/^[[:space:]]*[0-9]*:[[:space:]]*//'
bad=$(grep -v "to /[^ ]*libc\.so\.6 \[0\]" <<<"$lines" || true)
if [ -n "$bad" ]; then
	echo "check_malloc: malloc bound outside libc in $name:" >&2
	echo "$bad" >&2
	exit 1
fi
