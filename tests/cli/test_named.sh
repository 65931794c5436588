#!/usr/bin/env bash
# --to NAME / --from NAME between two processes, as a FIFO between
# `cat FILE > FIFO` and `cat FIFO`: both start orders, --from first with the
# listener 1 s later (time to the first byte measured and printed), two
# readers sharing one stream, how long --to stays, a reader that goes away,
# --wait running out, the usage errors, and --bench --processes.
# CTest runs it twice: as the host gives, and with UP_FORCE_FUTEX=1.
# usage: test_named.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
# shellcheck disable=SC2016 # bash -c scripts get their values as "$1"...
. "$(dirname "$0")/lib.sh"
cli_init "$@"

n=0
name() { n=$((n + 1)); echo "@upcat-test-$$-$n"; } # abstract: no file to clean up
W=(--wait 30) # a --from that finds nobody must not hang the test
head -c $((4 * 1024 * 1024 + 123)) /dev/urandom >"$T/in"

# --- --from first, the listener 1 s later ---------------------------------
# The one sleep that is not synchronisation: the gap asked for.
N=$(name)
"$CAT" -q --json "${W[@]}" --from "$N" >"$T/out" 2>"$T/from.json" &
from=$!
sleep 1
"$CAT" -q --json --to "$N" "$T/in" 2>"$T/to.json"
expect_eq "from first: --to exit" "$?" 0
wait $from
expect_eq "from first: --from exit" "$?" 0
same_file "from first: output" "$T/in" "$T/out"
fb=$(json_get first_byte_seconds "$T/from.json")
# When --to was listening and when --from was connected, on one clock.
lat=$(awk -v fs="$(json_get started_at "$T/from.json")" \
	-v fc="$(json_get connected_seconds "$T/from.json")" \
	-v ts="$(json_get started_at "$T/to.json")" \
	-v tl="$(json_get listening_seconds "$T/to.json")" \
	'BEGIN { printf "%.2f", ((fs + fc) - (ts + tl)) * 1000 }')
echo "measured: --from start to first byte ${fb} s (listener 1 s later);" \
	"listening to connected ${lat} ms"
if fcmp "${fb:-0}" '>=' 0.95 && fcmp "$fb" '<' 2.5; then
	ok "from first: first byte after the 1 s gap, not long after ($fb s)"
else
	fail "from first: first byte at '$fb' s, want 0.95 .. 2.5"
fi
if fcmp "$lat" '>=' 0 && fcmp "$lat" '<' 500; then ok "connect latency ${lat} ms"; else
	fail "connect latency '$lat' ms, want 0 .. 500"; fi
expect_eq "from first: --to saw its reader" "$(json_get reader_came "$T/to.json")" true
expect_eq "from first: --to counts the bytes in" "$(json_get bytes "$T/to.json")" \
	"$(wc -c <"$T/in")"
expect_eq "from first: role" "$(json_get role "$T/from.json")" from
if [ "${UP_FORCE_FUTEX:-0}" = 1 ]; then
	expect_eq "UP_FORCE_FUTEX=1: --from on futex" "$(json_get backend "$T/from.json")" futex
	expect_eq "UP_FORCE_FUTEX=1: --to on futex" "$(json_get backend "$T/to.json")" futex
fi

# --- --to first: it waits for a reader, then goes ---------------------------
# The input fits in the pipe: --to has written everything at once, and must
# still be there for the reader (its name is the way to the data).
N=$(name)
timeout 60 "$CAT" -q --json --to "$N" "$T/in" 2>"$T/to.json" &
to=$!
# No reader yet: it has to stay. Watch it for 0.3 s (tail ends early, 0,
# if it exits; timeout's 124 means it was still there).
timeout 0.3 tail -s 0.02 --pid=$to -f /dev/null
expect_eq "to first: --to waits for a reader (still there after 0.3 s)" "$?" 124
"$CAT" -q "${W[@]}" --from "$N" >"$T/out"
expect_eq "to first: --from exit" "$?" 0
wait $to
expect_eq "to first: --to exit" "$?" 0
same_file "to first: output" "$T/in" "$T/out"
# Gone with the last reader: the name is free again.
"$CAT" -q --wait 0 --from "$N" >/dev/null 2>"$T/err"
expect_eq "to first: the name went with --to" "$?" 4

# Several inputs and '-' through --to, bigger than the pipe (-B 64K).
N=$(name)
head -c 100000 /dev/urandom >"$T/mid"
cat "$T/in" "$T/mid" "$T/in" >"$T/want"
timeout 60 "$CAT" -q -B 64K --page-size 4K --to "$N" "$T/in" - "$T/in" <"$T/mid" &
to=$!
"$CAT" -q "${W[@]}" --from "$N" >"$T/out"
wait $to
expect_eq "several inputs: --to exit" "$?" 0
same_file "several inputs with '-', 64 KiB pipe" "$T/want" "$T/out"

# A path name with --mode: the socket file has the mode, and is removed.
P="$T/sock"
timeout 60 "$CAT" -q --mode 640 --to "$P" /dev/null &
to=$!
while [ ! -S "$P" ] && kill -0 $to 2>/dev/null; do :; done
expect_eq "path name: socket mode" "$(stat -c %A "$P" 2>/dev/null)" "srw-r-----"
"$CAT" -q "${W[@]}" --from "$P" >"$T/out"
expect_eq "path name, empty input: --from exit" "$?" 0
expect_eq "path name, empty input: nothing read" "$(wc -c <"$T/out")" 0
wait $to
expect_eq "path name: --to exit" "$?" 0
if [ -e "$P" ]; then fail "path name: socket left at $P"; else ok "path name removed"; fi

# --- two readers share the stream -------------------------------------------
# Numbered lines of 8 bytes (seq -w: 7 digits and a newline), which divide
# the 4 KiB pages: readers take whole pages, so whole lines. Both wait first,
# and the stream starts only once both have the pipe mapped: the first to
# connect could otherwise read all of it (8 MB take a few ms) before the
# other's next try (up_connect backs off up to 5 ms). Mapped is not yet
# reading: a reader still starting its threads missed the whole unthrottled
# stream in 2 runs of 12, so the writer is held to 40 MB/s (0.2 s), long
# past any start-up; a reader shut out of a stream that long is a fault.
seq -w 1 1000000 >"$T/lines"
N=$(name)
"$CAT" -q "${W[@]}" --from "$N" >"$T/r1" &
r1=$!
"$CAT" -q "${W[@]}" --from "$N" >"$T/r2" &
r2=$!
both_mapped() {
	local i
	for i in $(seq 20000); do
		if grep -q memfd:uringpipe "/proc/$r1/maps" 2>/dev/null &&
		   grep -q memfd:uringpipe "/proc/$r2/maps" 2>/dev/null; then
			return 0
		fi
		kill -0 $r1 2>/dev/null && kill -0 $r2 2>/dev/null || return 1
	done
	return 1
}
{ both_mapped || echo "two readers: not both connected" >&2; cat "$T/lines"; } |
	"$CAT" -q -B 64K --page-size 4K -L 40M --to "$N" -
expect_eq "two readers: --to exit" "$?" 0
wait $r1
expect_eq "two readers: first exit" "$?" 0
wait $r2
expect_eq "two readers: second exit" "$?" 0
s1=$(wc -c <"$T/r1")
s2=$(wc -c <"$T/r2")
echo "two readers: $s1 + $s2 bytes"
expect_eq "two readers: total bytes" "$((s1 + s2))" "$(wc -c <"$T/lines")"
if [ "$s1" -gt 0 ] && [ "$s2" -gt 0 ]; then ok "two readers: both got a share"; else
	fail "two readers: one got nothing ($s1, $s2)"; fi
sort "$T/r1" "$T/r2" >"$T/sorted"
same_file "two readers: every line once" "$T/lines" "$T/sorted"

# --- the reader goes away ---------------------------------------------------
# All readers gone while --to still writes: as cat into a FIFO whose reader
# left, SIGPIPE (141); with SIGPIPE ignored a write error (3).
N=$(name)
timeout 60 bash -c '"$1" -q --to "$2" /dev/zero; echo $? >"$3"' _ "$CAT" "$N" "$T/st" &
to=$!
"$CAT" -q "${W[@]}" --from "$N" | head -c 10 >"$T/out"
wait $to
expect_eq "reader gone: --to killed by SIGPIPE" "$(cat "$T/st")" 141
expect_eq "reader gone: 10 bytes" "$(wc -c <"$T/out")" 10
N=$(name)
timeout 60 bash -c 'trap "" PIPE; "$1" -q --to "$2" /dev/zero 2>"$3"; echo $? >"$4"' \
	_ "$CAT" "$N" "$T/err" "$T/st" &
to=$!
"$CAT" -q "${W[@]}" --from "$N" | head -c 10 >/dev/null
wait $to
expect_eq "reader gone, SIGPIPE ignored: status 3" "$(cat "$T/st")" 3
expect_grep "reader gone, SIGPIPE ignored: message" "every reader left" "$T/err"

# --- --wait with nobody listening -------------------------------------------
N=$(name)
t0=$(now_s)
"$CAT" -q --wait 0.2 --from "$N" >"$T/out" 2>"$T/err"
rc=$?
el=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.3f", b - a }')
expect_eq "--wait 0.2, nobody: exit 4" "$rc" 4
expect_grep "--wait 0.2, nobody: message" "--from $N: nobody listening after 0.2 s" "$T/err"
expect_eq "--wait 0.2, nobody: one line" "$(wc -l <"$T/err")" 1
if fcmp "$el" '>=' 0.19 && fcmp "$el" '<' 0.7; then ok "--wait 0.2 took $el s"; else
	fail "--wait 0.2 took $el s, want 0.2 .. 0.7"; fi
"$CAT" -q --wait 0 --from "$N" >"$T/out" 2>"$T/err"
expect_eq "--wait 0, nobody: exit 4" "$?" 4
expect_grep "--wait 0, nobody: message" "nobody listening (--wait 0" "$T/err"

# --- usage ------------------------------------------------------------------
# Exit 2, nothing on stdout, and one line that says what is wrong (then
# the usual one-line pointer to --help, as for every usage error).
expect_usage "--from with a FILE" "--from takes no FILE" --from @x "$T/in"
expect_usage "--from with FILEs after options" "--from takes no FILE" -q --from @x -- a b
expect_usage "--to without NAME" "option '--to' needs an argument" --to
expect_usage "--from without NAME" "option '--from' needs an argument" --from
expect_usage "--to with --from" "--to and --from exclude each other" --to @a --from @b
expect_usage "--to empty name" "--to: empty name" --to ''
expect_usage "--from '@' alone" "needs a name after it" --from @
expect_usage "--to name too long" "too long for a socket name" --to "@$(printf 'x%.0s' {1..108})"
expect_usage "--from with -B" "--from: -B/--buffer belongs to" --from @x -B 1M
expect_usage "--mode without --to" "only --to NAME listens" --mode 600
expect_usage "--mode not octal" "not an octal mode" --to @x --mode 9
expect_usage "--mode too large" "not an octal mode" --to @x --mode 1777
expect_usage "--wait without --from" "only --from waits" --wait 1
expect_usage "--wait negative" "not a number of seconds" --from @x --wait -1
expect_usage "--wait junk" "not a number of seconds" --from @x --wait 1s
"$CAT" --help >"$T/out"
for o in --to --from --mode --wait; do expect_grep "--help lists $o" "^ *$o " "$T/out"; done

# --- --bench --processes ----------------------------------------------------
# The threaded bench's table, parsed: the header says processes, the row
# has every column (MB/s and ratio for pipe, uringpipe, uringpipe-zc), the
# ratio is uringpipe / kernel; no FIFO directory is left behind.
mkdir "$T/tmp"
TMPDIR="$T/tmp" "$CAT" --bench --processes --sizes 4K --repeat 1 >"$T/tab" 2>"$T/err"
expect_eq "bench --processes: exit" "$?" 0
sed 's/^/    /' "$T/tab"
expect_grep "bench --processes: header says processes" "^  processes: " "$T/tab"
expect_grep "bench --processes: configuration line" \
	"^1 writer, 1 reader (processes), \(pinned\|not pinned\)" "$T/tab"
# (awk runs END after an exit in a rule, and END's exit wins: keep a flag.)
if awk '$1 == "4K" { row++
		if (NF != 7) bad = 1
		for (i = 2; i <= 7; i++) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) bad = 1
		if ($2 <= 0 || $4 <= 0 || $6 <= 0 || $3 != 1) bad = 1
		r = $4 / $2; if (r - $5 > 0.02 * r + 0.01 || $5 - r > 0.02 * r + 0.01) bad = 1 }
	END { exit bad || row != 1 }' "$T/tab"; then
	ok "bench --processes: the 4K row parses"
else
	fail "bench --processes: no well-formed 4K row"
fi
if [ -z "$(ls -A "$T/tmp")" ]; then ok "bench --processes: FIFO directory removed"; else
	fail "bench --processes: left in TMPDIR: $(ls -A "$T/tmp")"; fi

cli_done
