#!/usr/bin/env bash
# uringpipe-cat under an address-space limit (ulimit -v 16384, as services
# are deployed): --version, --help and a small copy work; a copy whose pipe
# cannot be mapped fails with a message and a non-zero exit, never a signal.
# It used to die of SIGSEGV before main even for --version: linked with
# jemalloc as its malloc, libnuma's constructor called jemalloc, which
# crashes when it cannot map its first extents (tools/CMakeLists.txt).
# Skips (77) for sanitizer builds, whose shadow memory needs terabytes.
# usage: test_ulimit.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

LIMIT_KB=16384
if ldd "$CAT" 2>/dev/null | grep -q 'lib[atu]*san\|libtsan' ||
	grep -qa '__asan_init\|__tsan_init' "$CAT"; then
	echo "skip: sanitizer build (its shadow memory cannot fit under ulimit -v)"
	exit 77
fi

# limited CMD...: CMD under the limit, stdout/stderr to $T/out and $T/err.
limited() { (ulimit -v "$LIMIT_KB" && exec "$@") >"$T/out" 2>"$T/err"; }

limited "$CAT" --version
rc=$?
expect_eq "--version under ulimit -v $LIMIT_KB: exit" "$rc" 0
expect_grep "--version under ulimit -v: prints the version" "^uringpipe-cat [0-9]" "$T/out"
expect_grep "--version under ulimit -v: names the wake backend" "^wake backend: " "$T/out"

limited "$CAT" --help
expect_eq "--help under ulimit -v $LIMIT_KB: exit" "$?" 0
expect_grep "--help under ulimit -v: usage" "^Usage: \|^usage: " "$T/out"

head -c 100000 /dev/urandom >"$T/in"
limited "$CAT" "$T/in"
rc=$?
expect_eq "small copy under ulimit -v $LIMIT_KB: exit" "$rc" 0
same_file "small copy under ulimit -v: output" "$T/in" "$T/out"
if [ "$rc" -ne 0 ]; then sed 's/^/    /' "$T/err" >&2; fi

# 64 MiB of pipe cannot be mapped under 16 MiB: a message, exit 4 (a
# uringpipe failure), and no signal.
(ulimit -v "$LIMIT_KB" && exec "$CAT" -B 64M "$T/in") >"$T/out2" 2>"$T/err"
rc=$?
expect_eq "copy that cannot get memory: exit 4" "$rc" 4
expect_grep "copy that cannot get memory: says so" "out of memory\|Cannot allocate memory" "$T/err"
if [ -s "$T/out2" ]; then fail "copy that cannot get memory: wrote to stdout"; else
	ok "copy that cannot get memory: nothing on stdout"; fi

cli_done
