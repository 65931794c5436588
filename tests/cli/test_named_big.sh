#!/usr/bin/env bash
# 1 GiB from --to NAME to --from NAME, in both start orders, checked by
# sha256sum. CTest runs it twice: as the host gives, and with
# UP_FORCE_FUTEX=1.
#
# The input is made fast (about 3 s): 1 MiB + 7 bytes of /dev/urandom,
# repeated. The odd period is not a multiple of the 4 KiB page, so a page
# delivered at any wrong place within the 1 GiB (period x 4096 is about
# 4 GiB) changes the checksum. sha256sum (about 5 s per GiB here) is what
# takes the time; it reads --from's output through a pipe, nothing else is
# stored.
# usage: test_named_big.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
# shellcheck disable=SC2016 # bash -c scripts get their values as "$1"...
. "$(dirname "$0")/lib.sh"
cli_init "$@"

head -c 1048583 /dev/urandom >"$T/chunk"
chunks=()
for _ in $(seq 1025); do chunks+=("$T/chunk"); done
cat "${chunks[@]}" | head -c $((1024 * 1024 * 1024)) >"$T/in"
expect_eq "1 GiB input made" "$(wc -c <"$T/in")" 1073741824
want=$(sha256sum <"$T/in" | cut -d' ' -f1)

# --from first: it waits for the name.
N="@upcat-test-$$-big1"
t0=$(now_s)
timeout 120 bash -c '"$1" -q --wait 60 --from "$2" | sha256sum >"$3"; echo "${PIPESTATUS[*]}" >"$4"' \
	_ "$CAT" "$N" "$T/h1" "$T/st1" &
rd=$!
timeout 120 "$CAT" -q --to "$N" "$T/in"
expect_eq "from first: --to exit" "$?" 0
wait $rd
expect_eq "from first: statuses (--from, sha256sum)" "$(cat "$T/st1")" "0 0"
expect_eq "from first: 1 GiB sha256" "$(cut -d' ' -f1 "$T/h1")" "$want"
echo "from first: $(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }') s"

# --to first: it fills the pipe and waits for a reader.
N="@upcat-test-$$-big2"
t0=$(now_s)
timeout 120 "$CAT" -q --to "$N" "$T/in" &
wr=$!
timeout 120 "$CAT" -q --wait 60 --from "$N" | sha256sum >"$T/h2"
expect_eq "to first: statuses (--from, sha256sum)" "${PIPESTATUS[*]}" "0 0"
wait $wr
expect_eq "to first: --to exit" "$?" 0
expect_eq "to first: 1 GiB sha256" "$(cut -d' ' -f1 "$T/h2")" "$want"
echo "to first: $(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }') s"

cli_done
