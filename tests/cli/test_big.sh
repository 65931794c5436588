#!/usr/bin/env bash
# 100 MiB of random data through uringpipe-cat, checked by sha256sum, as a
# file and as a pipe on both sides.
# usage: test_big.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

head -c $((100 * 1024 * 1024)) /dev/urandom >"$T/in"
want=$(sha256sum <"$T/in" | cut -d' ' -f1)
got=$("$CAT" -q "$T/in" | sha256sum | cut -d' ' -f1)
expect_eq "100 MiB file" "$got" "$want"
# shellcheck disable=SC2002 # a pipe as input, on purpose
got=$(cat "$T/in" | "$CAT" -q -B 256K | sha256sum | cut -d' ' -f1)
expect_eq "100 MiB pipe, 256 KiB ring" "$got" "$want"
got=$(UPCAT_NO_URING=1 "$CAT" -q --page-size 4K "$T/in" | sha256sum | cut -d' ' -f1)
expect_eq "100 MiB readv/writev, 4 KiB pages" "$got" "$want"
cli_done
