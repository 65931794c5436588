#!/usr/bin/env bash
# Option parsing: every size suffix (checked through the --json summary's
# expected_size, which is -s exactly as parsed), bad sizes, unknown options,
# missing arguments: a message naming the problem and exit 2.
# usage: test_options.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

: >"$T/empty"
check_size() { # ARG WANT
	"$CAT" -q --json -s "$1" "$T/empty" 2>"$T/err" >/dev/null
	expect_eq "-s $1: exit" "$?" 0
	expect_grep "-s $1 = $2" "\"expected_size\":$2," "$T/err"
}
check_size 0 0
check_size 123 123
check_size 5B 5
check_size 1K 1024
check_size 1k 1024
check_size 1KiB 1024
check_size 1KB 1000
check_size 2M 2097152
check_size 2m 2097152
check_size 2MiB 2097152
check_size 2MB 2000000
check_size 3G 3221225472
check_size 3GiB 3221225472
check_size 3GB 3000000000
check_size 1T 1099511627776
check_size 1TiB 1099511627776
check_size 1TB 1000000000000
check_size 16777215T 18446742974197923840

for s in '' abc 1X -1 +1 ' 1' 1.5K 1kb 1Kb 1KiBB 1iB K 0x10 '1 K'; do
	expect_usage "-s '$s'" "is not a size" -s "$s"
done
expect_usage "-s overflow" "too large" -s 99999999999999999999
expect_usage "-s 16777216T" "too large" -s 16777216T
expect_usage "-B too small" "out of range" -B 4K
expect_usage "-B too large" "out of range (8 KiB .. 8 TiB)" -B 9T
# Over the machine's memory (MemTotal is what sysconf's _SC_PHYS_PAGES
# counts): by 1 MiB, so that no rounding can let it pass.
mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
expect_usage "-B over the machine's memory" "is more than this machine's memory" -B "$((mem_kb + 1024))K"
expect_usage "-B bad" "is not a size" -B lots
expect_usage "--buffer=bad" "is not a size" --buffer=1Q
expect_usage "--page-size not 2^n" "not a power of two" --page-size 12K
expect_usage "--page-size range" "out of range" --page-size 2M
expect_usage "-B below two pages" "at least two pages" -B 64K --page-size 64K
expect_usage "--node bad" "not a NUMA node" --node x
expect_usage "--node impossible" "cannot create the pipe" --node 4000
expect_usage "unknown long option" "unrecognized option '--frobnicate'" --frobnicate
expect_usage "unknown short option" "invalid option -- 'x'" -x
expect_usage "missing argument" "needs an argument" -B
expect_usage "missing argument (long)" "needs an argument" --size
# Seconds are decimal (strtod() alone took hex, exponents and "inf"), and
# the meter's interval at least a millisecond (below a nanosecond its
# deadline never moved: the meter spun).
for v in 0x1 1e-300 inf 1.2.3 . 0.0005 0; do
	expect_usage "-i '$v'" "is not a number of seconds" -i "$v"
done
for v in 0x10 1e3 inf -1; do
	expect_usage "--wait '$v'" "is not a number of seconds" --wait "$v" --from @x
done
expect_usage "--tcp-timeout 0x10" "is not a number of seconds" --tcp-timeout 0x10 --from @x
expect_usage "--mode with --to tcp:" "only --to NAME listens" --mode 644 --to tcp:127.0.0.1:9
# "--bench" as an option's value is that value, not the benchmark: -N takes
# it as the meter's name and the copy runs.
printf abc >"$T/in3"
"$CAT" -q -N --bench "$T/in3" >"$T/out" 2>"$T/err"
expect_eq "-N --bench: a copy, exit" $? 0
same_file "-N --bench: a copy, output" "$T/in3" "$T/out"
"$CAT" -q --name --bench "$T/in3" >"$T/out" 2>"$T/err"
expect_eq "--name --bench: a copy, exit" $? 0
"$CAT" -q -qN --bench "$T/in3" >"$T/out" 2>"$T/err"
expect_eq "-qN --bench (a cluster): a copy, exit" $? 0
# -i is -N's value there, so --bench is the option: the benchmark's own
# parser then refuses -N (a usage error of --bench's, not a copy).
expect_usage "-N -i --bench: the benchmark" "bench" -N -i --bench
expect_usage "bench: unknown option" "unknown option" --bench --frobnicate
expect_usage "bench: bad size" "not a size" --bench --sizes 4Q
expect_usage "bench: empty size item" "empty item" --bench --sizes 4K,,1M

"$CAT" --help >"$T/out" 2>&1
expect_eq "--help exit" "$?" 0
expect_grep "--help documents exit status" "Exit status" "$T/out"
expect_grep "--help documents SIGPIPE" "141" "$T/out"
"$CAT" --version >"$T/out" 2>&1
expect_eq "--version exit" "$?" 0
expect_grep "--version names the wake backend" "^wake backend: \(io_uring\|io_uring-sqpoll\|futex\)$" "$T/out"
UP_FORCE_FUTEX=1 "$CAT" --version >"$T/out" 2>&1
expect_grep "--version with UP_FORCE_FUTEX=1" "^wake backend: futex$" "$T/out"
"$CAT" --bench --help >"$T/out" 2>&1
expect_eq "--bench --help exit" "$?" 0
expect_grep "--bench --help lists --sweep" "--sweep" "$T/out"

# A file named like an option after "--" is a file.
printf 'x' >"$T/--json"
(cd "$T" && "$CAT" -q -- --json) >"$T/out"
expect_eq "-- ends the options" "$(cat "$T/out")" x

# Progress: -p on a non-terminal prints a summary line; -q wins.
head -c 100000 /dev/zero >"$T/z"
"$CAT" -p "$T/z" 2>"$T/err" >/dev/null
expect_grep "-p prints progress" "100%" "$T/err"
"$CAT" -p -q "$T/z" 2>"$T/err" >/dev/null
expect_eq "-q silences -p" "$(wc -c <"$T/err")" 0
"$CAT" --json "$T/z" 2>"$T/err" >/dev/null
json_valid "$T/err"
expect_eq "--json summary is valid JSON" "$?" 0

cli_done
