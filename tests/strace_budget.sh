#!/bin/sh
# strace_budget.sh - count, with strace, the wake/sleep system calls a
# saturated 1-writer/1-reader stream really makes (issue 3).
#
# Usage: strace_budget.sh TEST_SYSCALLS_BINARY [MIB]
# Runs "TEST_SYSCALLS_BINARY --stream-only --mib MIB" under strace -f -c and
# checks that the library's own system-call counter (up_stats().syscalls,
# which test_syscalls shows to be made of sleeps and wakes only) hides
# nothing: strace must not see more data-path calls than the library counted
# plus a fixed setup allowance. A kernel pipe would make two calls (write +
# read) per write; the counts and the per-GiB figure are printed.
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

# LeakSanitizer cannot run under ptrace; the leak check is the other tests'.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
if ! strace -f -c -o "$tmp/summary" "$bin" --stream-only --mib "$mib" >"$tmp/out" 2>&1; then
	echo "FAIL: the traced stream failed:"
	cat "$tmp/out"
	exit 1
fi
cat "$tmp/out"

writes=$(sed -n 's/.* writes=\([0-9][0-9]*\).*/\1/p' "$tmp/out" | head -n 1)
counted=$(sed -n 's/.* syscalls=\([0-9][0-9]*\).*/\1/p' "$tmp/out" | head -n 1)
if [ -z "$writes" ] || [ -z "$counted" ]; then
	echo "FAIL: no writes=N / syscalls=N in the program's output"
	exit 1
fi

# strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
# The name is the last field, the calls the fourth.
count() {
	awk -v name="$1" '$NF == name && $4 ~ /^[0-9]+$/ { print $4; found = 1 }
		END { if (!found) print 0 }' "$tmp/summary"
}
# Every call the library can make after setup: sleeping and waking, lock
# back-off, dead-peer checks, the pool trim and the orphan sweep.
total=0
# (read/close are left out: the sanitizer runtimes and the test's own setup
# make dozens of them, and the stream path makes none.)
for name in futex io_uring_enter sched_yield getpid kill pidfd_open poll ppoll \
	fallocate; do
	n=$(count "$name")
	printf '%s=%s ' "$name" "$n"
	total=$((total + n))
done
echo
echo "strace: $total candidate data-path calls; the library counted $counted;" \
	"writes=$writes MiB=$mib per_GiB(strace)=$((total * 1024 / mib))"
echo "--- strace -c summary ---"
cat "$tmp/summary"

# The counter must not hide calls: strace sees at most what the library
# counted plus setup (per endpoint: ring self-test, probe, pidfds; the test's
# own thread start and file closes). A data path that made uncounted calls,
# say one per write, would blow through this.
slack=64
if [ "$total" -gt $((counted + slack)) ]; then
	echo "FAIL: strace saw $total calls, the library counted $counted (+$slack setup):" \
		"the data path makes calls its counters do not show"
	exit 1
fi
echo "ok strace: $total <= $counted counted + $slack setup"
exit 0
