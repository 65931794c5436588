#!/usr/bin/env bash
# A buffer of big pages absorbs its capacity from a kernel pipe. The input is
# a kernel pipe (a read returns 64 KiB at most), the pipe pages are 1 MiB,
# and the consumer reads nothing until the producer has written everything
# and exited: the producer can only finish if uringpipe-cat took all of it
# in. With one slot per read the 32-slot ring would hold 32 x 64 KiB = 2 MiB
# and the producer would block for good (the consumer gives up after 30 s).
# Then the consumer reads, and the output must be the input.
# usage: test_absorb.sh /path/to/uringpipe-cat
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

cli_done
