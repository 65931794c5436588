#!/usr/bin/env bash
# Failures: unreadable inputs among good ones, a reader of stdout that goes
# away (SIGPIPE as cat; EPIPE as a write error when SIGPIPE is ignored), and
# an output that cannot be written.
# usage: test_errors.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
# shellcheck disable=SC2016 # bash -c scripts get their values as "$1"...
. "$(dirname "$0")/lib.sh"
cli_init "$@"

head -c 70000 /dev/urandom >"$T/a"
head -c 5000 /dev/urandom >"$T/b"
mkdir "$T/dir"

# A missing file and a directory between good files: exit 1, each named,
# the good ones still copied in order.
"$CAT" -q "$T/a" "$T/missing" "$T/b" "$T/dir" "$T/a" >"$T/out" 2>"$T/err"
expect_eq "bad inputs: exit status" "$?" 1
cat "$T/a" "$T/b" "$T/a" >"$T/want"
same_file "bad inputs: good files copied" "$T/want" "$T/out"
expect_grep "bad inputs: missing file named" "$T/missing: No such file or directory" "$T/err"
expect_grep "bad inputs: directory named" "$T/dir: Is a directory" "$T/err"

# An unreadable file (not when root: root reads everything).
if [ "$(id -u)" -ne 0 ]; then
	cp "$T/b" "$T/secret" && chmod 000 "$T/secret"
	"$CAT" -q "$T/secret" "$T/a" >"$T/out" 2>"$T/err"
	expect_eq "unreadable: exit status" "$?" 1
	same_file "unreadable: the other file copied" "$T/a" "$T/out"
	expect_grep "unreadable: named" "$T/secret: Permission denied" "$T/err"
fi

# Endless input, the reader stops after 10 bytes: the tool must end (the
# timeout only bounds a failure; success does not wait for it) and, like
# cat, die of SIGPIPE: 141 in the shell.
timeout 60 bash -c '"$1" -q /dev/zero | head -c 10 >"$2"; echo "${PIPESTATUS[*]}" >"$3"' \
	_ "$CAT" "$T/ten" "$T/status"
expect_eq "head -c 10: ended in time" "$?" 0
expect_eq "head -c 10: statuses (cat, head)" "$(cat "$T/status")" "141 0"
expect_eq "head -c 10: 10 bytes" "$(wc -c <"$T/ten")" 10

# The same with a regular file larger than the ring.
head -c $((20 * 1024 * 1024)) /dev/urandom >"$T/big"
timeout 60 bash -c '"$1" -q -B 1M "$2" | head -c 10 >/dev/null; echo "${PIPESTATUS[*]}" >"$3"' \
	_ "$CAT" "$T/big" "$T/status"
expect_eq "bigfile | head -c 10: statuses" "$(cat "$T/status")" "141 0"

# SIGPIPE ignored by the caller: cat reports a write error; so do we (3).
timeout 60 bash -c 'trap "" PIPE; "$1" -q /dev/zero 2>"$2" | head -c 10 >/dev/null;
	echo "${PIPESTATUS[*]}" >"$3"' _ "$CAT" "$T/err" "$T/status"
expect_eq "SIGPIPE ignored: statuses" "$(cat "$T/status")" "3 0"
expect_grep "SIGPIPE ignored: message" "write error: Broken pipe" "$T/err"

# Output that fails: /dev/full gives ENOSPC.
if [ -w /dev/full ]; then
	"$CAT" -q "$T/a" >/dev/full 2>"$T/err"
	expect_eq "/dev/full: exit status" "$?" 3
	expect_grep "/dev/full: message" "write error: No space left on device" "$T/err"
fi

# Closed stdout: EBADF is an output error too.
"$CAT" -q "$T/a" >&- 2>"$T/err"
expect_eq "closed stdout: exit status" "$?" 3

cli_done
