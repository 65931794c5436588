#!/usr/bin/env bash
# What -B buys and costs.
#
# 1. A buffer of big pages absorbs its capacity from a kernel pipe. The input is
# a kernel pipe (a read returns 64 KiB at most), the pipe pages are 1 MiB,
# and the consumer reads nothing until the producer has written everything
# and exited: the producer can only finish if uringpipe-cat took all of it
# in. With one slot per read the 32-slot ring would hold 32 x 64 KiB = 2 MiB
# and the producer would block for good (the consumer gives up after 30 s).
# Then the consumer reads, and the output must be the input.
# 2. -B up to the machine's memory (MemTotal, which is what sysconf's
# _SC_PHYS_PAGES counts) is accepted and costs what it holds: 32 MiB held
# in a buffer just under the machine's memory leave the process's resident
# set near 32 MiB, not near the capacity.
# usage: test_buffer.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

# absorb WHAT BYTES CAT-OPTIONS...: BYTES through a kernel pipe into
# uringpipe-cat with CAT-OPTIONS, read only once the producer has exited.
absorb() {
	local what=$1 n=$2 rc
	shift 2
	head -c "$n" /dev/urandom >"$T/in"
	rm -f "$T/done" "$T/out" "$T/rc"
	mkfifo "$T/done"
	# The consumer opens the FIFO read-write, so that its open does not
	# wait for the producer; read -t bounds the wait for the producer's
	# line. Only then does it read stdin.
	{
		# dd: writes of 1 MiB, which the kernel pipe takes 64 KiB at a time.
		dd if="$T/in" bs=1M status=none
		echo "$?" >"$T/done"
	} | "$CAT" -q "$@" | {
		exec 4<>"$T/done"
		if read -r -t 30 -u 4 prc; then
			echo "$prc" >"$T/rc"
		else
			echo "timeout" >"$T/rc"
		fi
		cat >"$T/out"
	}
	rc=$(cat "$T/rc")
	expect_eq "$what: the producer finished before anything was read" "$rc" 0
	same_file "$what: output" "$T/in" "$T/out"
}

# 24 MiB: over 32 x 64 KiB, under the 32 MiB the buffer holds.
absorb "-B 32M --page-size 1M, 24 MiB" $((24 << 20)) -B 32M --page-size 1M
absorb "-B 32M --page-size 1M, readv/writev, 24 MiB" $((24 << 20)) -B 32M --page-size 1M \
	--no-uring
# Pages of 256 KiB: a read of 64 KiB is a quarter page.
absorb "-B 8M --page-size 256K, 6 MiB" $((6 << 20)) -B 8M --page-size 256K

mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
big_m=$((mem_kb / 1024 - 1)) # MiB, just under the machine's memory
n=$((32 << 20))
head -c "$n" /dev/urandom >"$T/in"
mkfifo "$T/fin" "$T/fout"
# The consumer's end, opened read-write so that nobody waits for it, and
# not read until the producer is done.
exec 6<>"$T/fout"
"$CAT" -q -B "${big_m}M" <"$T/fin" >"$T/fout" 2>"$T/err" &
cpid=$!
if timeout 30 dd if="$T/in" of="$T/fin" bs=1M status=none; then
	ok "-B ${big_m}M: 32 MiB taken in before anything was read"
else
	fail "-B ${big_m}M: the producer did not finish in 30 s"
fi
# Everything but what the kernel pipes hold (64 KiB each) is in the pipe's
# pages now, so the resident set is at least that; it must not be near the
# capacity. On top: the ring's bookkeeping, at most all of it resident (at
# most 44 bytes per 64 KiB page, under a thousandth of the capacity), and
# 16 MiB for the binary, its libraries and stacks.
rss_kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$cpid/status")
lo_kb=$(((n >> 10) - 1024))
hi_kb=$(((n >> 10) + big_m * 16 * 44 / 1024 + 16384))
echo "# -B ${big_m}M holding 32 MiB: VmRSS ${rss_kb} KiB (want ${lo_kb} .. ${hi_kb})"
if [ "$rss_kb" -ge "$lo_kb" ] && [ "$rss_kb" -le "$hi_kb" ]; then
	ok "-B ${big_m}M holding 32 MiB: resident ${rss_kb} KiB"
else
	fail "-B ${big_m}M holding 32 MiB: resident ${rss_kb} KiB, want ${lo_kb} .. ${hi_kb}"
fi
timeout 30 head -c "$n" <&6 >"$T/out"
exec 6<&-
wait "$cpid"
expect_eq "-B ${big_m}M: exit" "$?" 0
same_file "-B ${big_m}M: output" "$T/in" "$T/out"
if [ -s "$T/err" ]; then sed 's/^/    /' "$T/err" >&2; fi

cli_done
