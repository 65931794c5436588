#!/bin/sh
# strace_budget.sh - count, with strace, the wake/sleep system calls a
# saturated 1-writer/1-reader stream really makes (issue 3).
#
# Usage: strace_budget.sh TEST_SYSCALLS_BINARY [MIB]
# Runs "TEST_SYSCALLS_BINARY --stream-only --mib MIB" under strace -f -c and
# sums the calls of futex, io_uring_enter and sched_yield (the only calls the
# data path may make: sleeping, waking, yielding on a busy lock). The budget
# is "fewer than one per 16 writes"; the writes count comes from the program.
# A kernel pipe would make two calls (write + read) per write.
# Exit 0 pass, 1 fail, 77 skip (no strace, or ptrace refused here).
set -u

bin=${1:?usage: strace_budget.sh TEST_SYSCALLS_BINARY [MIB]}
mib=${2:-256}

if ! command -v strace >/dev/null 2>&1; then
	echo "SKIP: strace is not installed"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/up_strace.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# Can we trace at all (containers often refuse ptrace)?
if ! strace -f -qq -o /dev/null true >/dev/null 2>&1; then
	echo "SKIP: strace cannot trace here (ptrace refused?)"
	exit 77
fi

if ! strace -f -c -o "$tmp/summary" "$bin" --stream-only --mib "$mib" >"$tmp/out" 2>&1; then
	echo "FAIL: the traced stream failed:"
	cat "$tmp/out"
	exit 1
fi
cat "$tmp/out"

writes=$(sed -n 's/.* writes=\([0-9][0-9]*\).*/\1/p' "$tmp/out" | head -n 1)
if [ -z "$writes" ]; then
	echo "FAIL: no writes=N in the program's output"
	exit 1
fi

# strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
# The name is the last field, the calls the fourth.
count() {
	awk -v name="$1" '$NF == name && $4 ~ /^[0-9]+$/ { print $4; found = 1 }
		END { if (!found) print 0 }' "$tmp/summary"
}
futex=$(count futex)
enter=$(count io_uring_enter)
yield=$(count sched_yield)
total=$((futex + enter + yield))
# Other calls the data path makes (dead-peer checks before a sleep): the
# library's own counter should include them too.
getpid=$(count getpid)
kill_=$(count kill)
pidfd=$(count pidfd_open)
other=$((getpid + kill_ + pidfd))

echo "strace: futex=$futex io_uring_enter=$enter sched_yield=$yield total=$total" \
	"writes=$writes MiB=$mib per_GiB=$((total * 1024 / mib))"
echo "strace: also getpid=$getpid kill=$kill_ pidfd_open=$pidfd" \
	"(all data-path calls: $((total + other)), per_GiB=$(((total + other) * 1024 / mib)))"
echo "--- strace -c summary ---"
cat "$tmp/summary"

rc=0
if [ $((total * 16)) -ge "$writes" ]; then
	echo "FAIL: $total wake/sleep system calls for $writes writes (budget: calls * 16 < writes)"
	rc=1
else
	echo "ok strace budget: $total wake/sleep calls * 16 < $writes writes"
fi
# getpid/kill/pidfd_open: a handful come from setup (one per endpoint and
# waker); more than that means per-sleep calls the counters do not show.
if [ $(((total + other) * 16)) -ge "$writes" ]; then
	echo "FAIL: $((total + other)) data-path system calls (with getpid/kill/pidfd_open)" \
		"for $writes writes (budget: calls * 16 < writes)"
	rc=1
else
	echo "ok strace budget: $((total + other)) data-path calls * 16 < $writes writes"
fi
exit $rc
