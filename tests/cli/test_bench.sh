#!/usr/bin/env bash
# --bench: a short run gives valid JSON with every transport and the ratios;
# --report writes a well-formed HTML page and SVG image; --memory-pressure
# without stress-ng fails clearly; --vs adds the kernel transports, each with
# its MB/s and ratio, in a table within 100 columns; --read-size sets the
# readers' bytes per call (their call counts show it); --sparse gives p50
# and p99 per gap, transport and reader; bad --vs, --read-size and --gap
# values exit 2 with one line.
# usage: test_bench.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

short=(--sizes '4K,64K' --bytes 8M --repeat 1)
"$CAT" --bench "${short[@]}" --json --report "$T/r.html" >"$T/j" 2>"$T/err"
expect_eq "bench --json exit" "$?" 0
json_valid "$T/j"
expect_eq "bench --json is valid JSON" "$?" 0
for k in '"kernel":' '"uringpipe":' '"uringpipe_zc":' '"ratio":' '"ratio_zc":' \
	'"mbps_median":' '"syscalls_per_gib_median":' '"p99":'; do
	expect_grep "bench JSON has $k" "$k" "$T/j"
done
if have_python; then
	python3 - "$T/j" <<'PY'
import json, sys
def no_dup(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), keys
    return dict(pairs)
d = json.load(open(sys.argv[1]), object_pairs_hook=no_dup)
rows = d["configs"][0]["rows"]
assert [r["size"] for r in rows] == [4096, 65536], rows
for r in rows:
    for t in ("kernel", "uringpipe", "uringpipe_zc"):
        assert r[t]["mbps_median"] > 0, (t, r[t])
        assert r[t]["verified_bytes"] >= 16 << 20
    assert abs(r["ratio"] - r["uringpipe"]["mbps_median"] / r["kernel"]["mbps_median"]) < 1e-3
    assert abs(r["ratio_zc"] - r["uringpipe_zc"]["mbps_median"] / r["kernel"]["mbps_median"]) \
        < 1e-3 * r["ratio_zc"], r
    # Zero copy over copy, round by round: each round's own pair.
    zc, cp = r["uringpipe_zc"]["mbps"], r["uringpipe"]["mbps"]
    assert len(r["zc_over_copy_rounds"]) == len(cp) == 1, r
    for q, z, c in zip(r["zc_over_copy_rounds"], zc, cp):
        assert abs(q - z / c) < 1e-3 * q, (q, z, c)
    assert r["zc_over_copy_median"] == r["zc_over_copy_rounds"][0], r
    # The machine's phase: a line round trip before the round and after it,
    # each measured (pinned CPUs) and within reason for any machine.
    if len(__import__("os").sched_getaffinity(0)) >= 2:
        assert len(r["line_rtt_ns"]) == 2, r["line_rtt_ns"]
        assert all(1 < x < 100000 for x in r["line_rtt_ns"]), r["line_rtt_ns"]
PY
	expect_eq "bench JSON content (sizes, transports, ratio)" "$?" 0
fi

# Three rounds: the summary is the median of the rounds' own ratios, which a
# ratio of the two medians is not, unless one round is the middle of both.
if have_python; then
	"$CAT" --bench --sizes 4K --bytes 4M --repeat 3 --json >"$T/j3" 2>"$T/err"
	expect_eq "bench --repeat 3 --json exit" "$?" 0
	python3 - "$T/j3" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))["rows"][0]
zc, cp = r["uringpipe_zc"]["mbps"], r["uringpipe"]["mbps"]
q = r["zc_over_copy_rounds"]
assert len(q) == len(zc) == len(cp) == 3, r
assert all(abs(a - z / c) < 1e-3 * a for a, z, c in zip(q, zc, cp)), (q, zc, cp)
assert abs(r["zc_over_copy_median"] - statistics.median(q)) < 1e-4, r
PY
	expect_eq "bench JSON: zc/copy is the median of each round's pair" "$?" 0
fi

test -s "$T/r.html"
expect_eq "HTML report written" "$?" 0
xml_valid "$T/r.html"
rc=$?
if [ $rc -eq 77 ]; then echo "skip: no XML parser"; else expect_eq "HTML report is well-formed" $rc 0; fi
expect_grep "HTML report has an inline SVG" "<svg xmlns=" "$T/r.html"
if grep -qi -e '<script' -e 'http://[^w]' -e 'https://' "$T/r.html"; then
	fail "HTML report must not contain scripts or fetches"
else
	ok "HTML report: no script, no fetch"
fi

"$CAT" --bench --sizes 100 --bytes 1M --repeat 1 --report "$T/r.svg" >"$T/t" 2>"$T/err"
expect_eq "bench table + SVG exit" "$?" 0
expect_grep "table has the ratio column" "ratio" "$T/t"
xml_valid "$T/r.svg"
rc=$?
if [ $rc -eq 77 ]; then echo "skip: no XML parser"; else expect_eq "SVG report is well-formed" $rc 0; fi
expect_grep "SVG report root" "<svg xmlns=\"http://www.w3.org/2000/svg\"" "$T/r.svg"

"$CAT" --bench --report "$T/no/such/dir/r.html" --sizes 4K --bytes 1M --repeat 1 \
	>/dev/null 2>"$T/err"
expect_eq "unwritable report: exit 2, before any run" "$?" 2
expect_grep "unwritable report: message" "no/such/dir/r.html" "$T/err"

# --- --vs: every kernel transport beside uringpipe, with a number and a ratio.
vs=pipe,pipe-uring,vmsplice,unix,tcp
nt=7
if "$CAT" --bench --vs pipe-uring --sizes 4K --bytes 64K --repeat 1 >/dev/null 2>"$T/err"; then :
elif grep -q "io_uring refused here" "$T/err"; then
	echo "skip: pipe-uring, io_uring is refused here"
	vs=pipe,vmsplice,unix,tcp
	nt=6
fi
"$CAT" --bench --vs "$vs" --sizes 4K --bytes 4M --repeat 1 >"$T/vs" 2>"$T/err"
expect_eq "bench --vs all: exit" "$?" 0
sed 's/^/    /' "$T/vs"
# The throughput row: size, then MB/s and ratio per transport, in the order
# of the header; each ratio is its MB/s over the pipe's (rounded figures).
# (awk runs END after an exit in a rule, and END's exit wins: keep a flag.)
if awk '$1 == "size" && !hdr { hdr = NF; next }
	$1 == "4K" && hdr && !row { row = 1
		if (NF != 1 + 2 * (hdr - 1)) bad = 1
		k = $2
		for (i = 2; i <= NF; i += 2) {
			if ($i !~ /^[0-9]+$/ || $i <= 0 || $(i + 1) !~ /^[0-9]+\.[0-9][0-9]$/) bad = 1
			r = $i / k; if (r - $(i + 1) > 0.02 * r + 0.01 || $(i + 1) - r > 0.02 * r + 0.01) bad = 1
		} }
	END { exit bad || !row }' "$T/vs"; then
	ok "bench --vs: the 4K row has MB/s and a ratio for every transport"
else
	fail "bench --vs: no well-formed 4K throughput row"
fi
for t in ${vs//,/ } uringpipe uringpipe-zc; do
	expect_grep "bench --vs: $t in the throughput header" "^size .* $t\( \|$\)" "$T/vs"
	expect_grep "bench --vs: $t has a latency and calls line" \
		"^$t  *4K  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9][0-9]*  *[0-9][0-9]*  *[0-9][0-9]*$" "$T/vs"
done
if [ "$(nproc)" -ge 2 ]; then
	expect_grep "bench --vs: the line round trips, before the round and after it" \
		'^line rtt ns at 4K: [0-9][0-9]* [0-9][0-9]*$' "$T/vs"
fi
expect_grep "bench --vs: zero copy over copy, the round's pair and the median" \
	'^zc/copy at 4K: [0-9]*\.[0-9][0-9][0-9], median [0-9]*\.[0-9][0-9][0-9]$' "$T/vs"
wide=$(awk 'length($0) > 100' "$T/vs" | wc -l)
expect_eq "bench --vs: no line over 100 columns" "$wide" 0

# --- --read-size: the readers' calls per run follow it, for every transport.
# 8 MiB in 64 KiB writes: 4 KiB reads need at least 2048 calls; reads of the
# write size at most one per write and a little (a read may get a part).
if have_python; then
	for rs in 4K default; do
		arg=(--read-size "$rs"); [ "$rs" = default ] && arg=()
		"$CAT" --bench --vs "$vs" --sizes 64K --bytes 8M --repeat 1 "${arg[@]}" --json \
			>"$T/rs-$rs" 2>"$T/err"
		rc=$?
		expect_eq "bench --read-size $rs: exit" "$rc" 0
		[ "$rc" = 0 ] || sed 's/^/    /' "$T/err" >&2
	done
	python3 - "$T/rs-4K" "$T/rs-default" "$nt" <<'PY'
import json, sys
small, dflt = (json.load(open(f)) for f in sys.argv[1:3])
assert small["read_size_option"] == 4096 and dflt["read_size_option"] == 0
names = small["transports"]
assert len(names) == int(sys.argv[3]), names
for t in names:
    a = small["rows"][0][t]; b = dflt["rows"][0][t]
    assert small["rows"][0]["read_size"] == 4096 and dflt["rows"][0]["read_size"] == 65536
    assert a["read_calls"][0] >= 8 * 1024 // 4, (t, a["read_calls"])
    assert 128 <= b["read_calls"][0] < 1024, (t, b["read_calls"])
    assert b["write_calls"][0] >= 128
    assert abs(a["ratio"] - a["mbps_median"] / small["rows"][0]["kernel"]["mbps_median"]) < 1e-3
PY
	expect_eq "bench --read-size: every reader's calls follow it (JSON)" "$?" 0
fi

# --- --sparse: p50 and p99 per gap, transport and reader.
"$CAT" --bench --sparse --vs "$vs" --gap 100,300 --time 0.02 --repeat 1 >"$T/sp" 2>"$T/err"
expect_eq "bench --sparse: exit" "$?" 0
sed 's/^/    /' "$T/sp"
for g in 100 300; do
	if awk -v g="$g" -v nt="$nt" -v rounds=1 '$1 == "gap" { on = ($2 == g); next }
		$1 == "where" { on = 0; next }
		on && $2 ~ /^(blocking|epoll)$/ {
			if ($3 !~ /^[0-9.]+$/ || $4 !~ /^[0-9.]+$/ || $3 <= 0 || $4 < $3 || $5 < $4)
				bad = 1
			# the p99 rounds column holds the median (one round: both ends)
			if (split($8, sp, "-") != 2 || sp[1] + 0 > $4 + 0 || $4 + 0 > sp[2] + 0 ||
			    ($4 + 0 != sp[1] + 0 || sp[1] + 0 != sp[2] + 0) && rounds == 1)
				bad = 1
			# the reader thread CPU share: a percentage of one CPU
			if ($9 !~ /^[0-9.]+%$/ || $9 + 0 > 101)
				bad = 1
			if ($1 == "pipe") { k50[$2] = $3; k99[$2] = $4 }
			# the ratios to the pipe with the same reader (rounded figures)
			r = $3 / k50[$2]; if (r - $6 > 0.05 * r + 0.02 || $6 - r > 0.05 * r + 0.02) bad = 1
			r = $4 / k99[$2]; if (r - $7 > 0.05 * r + 0.02 || $7 - r > 0.05 * r + 0.02) bad = 1
			n[$1 " " $2] = 1 }
		END { c = 0; for (k in n) c++; exit bad || c != 2 * nt }' "$T/sp"; then
		ok "bench --sparse: gap $g us has p50 <= p99 <= max, the p99 rounds and the reader's CPU for $nt transports x 2 readers"
	else
		fail "bench --sparse: gap $g us: not every transport and reader has p50/p99/max and p99 rounds"
	fi
	# Where the time goes: every writer's call, and for an epoll reader
	# only its wait's return splitting the latency, each part at most the
	# cell's max, the read after the wake the shorter (a wake of an idle
	# CPU takes microseconds; a read of 64 bytes does not); a blocking
	# reader has no split.
	if awk -v g="$g" -v nt="$nt" '$1 == "gap" { on = ($2 == g); part = 0; next }
		!on { next }
		$1 == "where" { part = 1; next }
		!part && $2 ~ /^(blocking|epoll)$/ { mx[$1 " " $2] = $5; next }
		part && $2 ~ /^(blocking|epoll)$/ {
			k = $1 " " $2
			if ($3 !~ /^[0-9.]+$/ || $3 <= 0) bad = 1
			# pipe-uring waits inside io_uring, never in epoll_wait()
			if (($2 == "blocking" || $1 == "pipe-uring") && ($4 != "-" || $5 != "-"))
				bad = 1
			# The epoll reader of a kernel transport is woken by each write:
			# both parts, the wake the longer. The uringpipe reader reads ahead of
			# regular data: its wait may return at once around the write,
			# or before it for every message of a round ("-").
			if ($2 == "epoll" && $1 !~ /^(pipe-uring|uringpipe)/ &&
			    ($4 !~ /^[0-9.]+$/ || $5 !~ /^[0-9.]+$/ || $4 <= 0 || $5 <= 0 ||
			     $4 > mx[k] || $5 > mx[k] || $5 >= $4))
				bad = 1
			if ($2 == "epoll" && $1 ~ /^uringpipe/ &&
			    (($4 $5) != "--" && ($4 !~ /^[0-9.]+$/ || $5 !~ /^[0-9.]+$/ ||
					       $4 <= 0 || $5 <= 0 || $4 > mx[k] || $5 > mx[k])))
				bad = 1
			# Wakes per message: counted by uringpipe only, none for the
			# kernel transports (a reader woken for every message is
			# checked with --no-early, in the JSON below).
			if ($1 ~ /^uringpipe/ ? $6 !~ /^[0-9.]+%$/ : $6 != "-")
				bad = 1
			n[k] = 1 }
		END { c = 0; for (k in n) c++; exit bad || c != 2 * nt }' "$T/sp"; then
		ok "bench --sparse: gap $g us says where the time goes: the writer's call, an epoll reader's wake and read, uringpipe's wakes"
	else
		fail "bench --sparse: gap $g us: the where-the-time-goes table is wrong"
	fi
done
wide=$(awk 'length($0) > 100' "$T/sp" | wc -l)
expect_eq "bench --sparse: no line over 100 columns" "$wide" 0
# Three rounds: every p99 lies in its rounds' spread, and the spread is
# the rounds' own (some cell's three p99s differ by 0.1 us or more).
"$CAT" --bench --sparse --gap 100 --time 0.02 --repeat 3 >"$T/sp3" 2>"$T/err"
expect_eq "bench --sparse --repeat 3: exit" "$?" 0
if awk '$1 == "where" { part = 1 } !part && $2 ~ /^(blocking|epoll)$/ {
		if (split($8, sp, "-") != 2 || sp[1] + 0 > $4 + 0 || $4 + 0 > sp[2] + 0)
			bad = 1
		if (sp[1] + 0 < sp[2] + 0)
			apart = 1
		rows++ }
	END { exit bad || !apart || rows != 6 }' "$T/sp3"; then
	ok "bench --sparse --repeat 3: p99 within the rounds' p99 spread, which is theirs"
else
	fail "bench --sparse --repeat 3: the p99 rounds column is wrong"
	sed 's/^/    /' "$T/sp3"
fi
# The sparse JSON of $1: every transport and reader at gap 150 us, ratios
# and the reader's CPU share per round; no_early set (and early_poll not)
# when $2 is "no-early".
check_sparse_json() {
	python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "sparse" and [g["gap_us"] for g in d["gaps"]] == [150]
res = d["gaps"][0]["results"]
assert {(r["transport"], r["reader"]) for r in res} == {
    (t, k) for t in ("kernel", "uringpipe", "uringpipe_zc") for k in ("blocking", "epoll")}
k = {r["reader"]: r for r in res if r["transport"] == "kernel"}
mode = sys.argv[2] if len(sys.argv) > 2 else ""
assert d["early_poll"] is (mode != "no-early") and d["no_early"] is (mode == "no-early")
for r in res:
    assert len(r["p50_runs"]) == 2 and 0 < r["p50_us"] <= r["p99_us"] <= r["max_us"], r
    assert len(r["writer_call_p50_runs"]) == 2 and all(0 < v for v in r["writer_call_p50_runs"]), r
    for part in ("to_wake_p50_runs", "to_data_p50_runs"):
        v = r[part]
        if r["reader"] == "blocking":
            assert v == [None, None], r
        else:
            # uringpipe's early readiness may come before the write: a
            # round may then have no wait that returned after one.
            assert len(v) == 2 and all(x is None and mode != "no-early" and
                                       r["transport"] != "kernel" or
                                       x is not None and 0 < x <= r["max_us"] for x in v), r
    w = r["wakes_per_message_runs"]
    if r["transport"] == "kernel":
        assert w == [None, None], r
    else:
        assert len(w) == 2 and all(x is not None and x >= 0 for x in w), r
        # A reader that sleeps until woken, in a loop, is woken for about
        # every message. A quarter at least: one stalled for a few ms of a
        # 20 ms run takes some messages in one wake, and 0 is the fault.
        if r["reader"] == "epoll" and mode == "no-early":
            assert all(x >= 0.25 for x in w), r
    assert len(r["reader_cpu_runs"]) == 2 and all(0 <= c <= 1.01 for c in r["reader_cpu_runs"]), r
    for p in ("p50", "p99"):
        want = r[p + "_us"] / k[r["reader"]][p + "_us"]
        assert abs(r["ratio_" + p] - want) < 1e-3 * want + 1e-3, (r, want)
PY
}
if have_python; then
	"$CAT" --bench --sparse --gap 150 --time 0.02 --repeat 2 --json >"$T/spj" 2>"$T/err"
	expect_eq "bench --sparse --json: exit" "$?" 0
	check_sparse_json "$T/spj"
	expect_eq "bench --sparse --json: p50/p99/max per transport and reader" "$?" 0
	"$CAT" --bench --sparse --early-poll --gap 150 --time 0.02 --repeat 2 --json >"$T/spe" \
		2>"$T/err"
	expect_eq "bench --sparse --early-poll --json: exit" "$?" 0
	check_sparse_json "$T/spe"
	expect_eq "bench --sparse --early-poll --json: the same cells, as the default" "$?" 0
	"$CAT" --bench --sparse --no-early --gap 150 --time 0.02 --repeat 2 --json >"$T/spn" \
		2>"$T/err"
	expect_eq "bench --sparse --no-early --json: exit" "$?" 0
	check_sparse_json "$T/spn" no-early
	expect_eq "bench --sparse --no-early --json: the same cells, no_early set" "$?" 0
fi

# Trace events left enabled slow every system call, the kernel transports'
# most: the header warns and the JSON lists them. As root, with an event
# that fires only on an OOM kill enabled for the run, and taken off after.
SE=/sys/kernel/tracing/set_event
if [ "$(id -u)" = 0 ] && [ -w "$SE" ] && ! grep -qx 'oom:mark_victim' "$SE" &&
	echo 'oom:mark_victim' >>"$SE" 2>/dev/null; then
	trap 'echo "!oom:mark_victim" >>"$SE"; rm -rf "$T"' EXIT
	"$CAT" --bench --sizes 4K --bytes 4M --repeat 1 >"$T/tr" 2>"$T/err"
	expect_eq "bench with a trace event: exit" "$?" 0
	expect_grep "bench with a trace event: warns" "warning: trace events enabled" "$T/tr"
	expect_grep "bench with a trace event: names it" "oom:mark_victim" "$T/tr"
	"$CAT" --bench --sizes 4K --bytes 4M --repeat 1 --json >"$T/trj" 2>"$T/err"
	expect_grep "bench --json with a trace event: lists it" \
		'"trace_events":"[^"]*oom:mark_victim' "$T/trj"
	echo '!oom:mark_victim' >>"$SE"
	trap 'rm -rf "$T"' EXIT
	"$CAT" --bench --sizes 4K --bytes 4M --repeat 1 >"$T/tr" 2>"$T/err"
	expect_eq "bench after the event is off: names it no more" \
		"$(grep -c 'oom:mark_victim' "$T/tr")" 0
else
	echo "skip: the trace-event warning needs root and a writable $SE"
fi

# --- usage errors: exit 2 and one line (the message and where the help is).
bad1() {
	"$CAT" --bench --sizes 4K --bytes 1M --repeat 1 "$@" >/dev/null 2>"$T/err"
	expect_eq "bench $*: exit 2" "$?" 2
	expect_eq "bench $*: one line" "$(wc -l <"$T/err")" 1
	expect_grep "bench $*: names the option" "${1}" "$T/err"
}
bad1 --vs pipe,sctp
bad1 --vs ''
bad1 --vs pipe,,tcp
bad1 --read-size 0
bad1 --read-size 2M
bad1 --read-size lots
bad1 --gap 0 --sparse
bad1 --early-poll
bad1 --no-early
bad1 --no-early --sparse --early-poll
bad1 --sizes 4Q

# --memory-pressure with a PATH that has no stress-ng.
mkdir "$T/bin"
PATH="$T/bin" "$CAT" --bench --memory-pressure "${short[@]}" >/dev/null 2>"$T/err"
expect_eq "memory pressure without stress-ng: exit 1" "$?" 1
expect_grep "memory pressure without stress-ng: message" "needs stress-ng" "$T/err"

cli_done
