#!/usr/bin/env bash
# uringpipe-cat for pv users (issue 19): -L's timing, -n's numbers, each
# field of -t -e -r -a -b -p alone, -l, -N, -W, -u, cat's "input file is
# output file", one-line usage errors, and on a terminal (tmux): the current
# rate of a stalled producer at 0 B/s, the bar as wide as the terminal, a
# clean final line, and -c's one row per meter.
# usage: test_pv.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"
CAT=$(readlink -f "$CAT") # the tmux scripts run elsewhere
trap '' PIPE

# wait_for WHAT CMD...: until CMD succeeds, 20 s at most (polling).
wait_for() {
	local what=$1 i
	shift
	for ((i = 0; i < 200; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	fail "$what: not within 20 s"
	return 1
}

# open_gate: one line into the FIFO $T/gate, for the reader blocked on it;
# a fail, not a hang, if nobody opens it within 20 s.
open_gate() {
	timeout 20 sh -c 'echo >"$1"' _ "$T/gate" || fail "the gate: nobody read it within 20 s"
}

# last_line FILE: its last line, without a trailing \r.
last_line() { tail -n 1 "$1" | tr -d '\r'; }

# expect_match WHAT ERE STRING
expect_match() {
	if printf '%s\n' "$3" | grep -Eq -- "$2"; then ok "$1"; else
		fail "$1: '$3' does not match /$2/"
	fi
}

head -c $((64 * 1024 * 1024)) /dev/urandom >"$T/r64"
head -c $((2 * 1024 * 1024)) /dev/urandom >"$T/r2"

# ----------------------------------------------------------------- -L
t0=$(now_s)
"$CAT" -q -L 32M "$T/r64" >"$T/out"
t1=$(now_s)
el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
if fcmp "$el" '>=' 1.6 && fcmp "$el" '<=' 2.6; then ok "-L 32M: 64 MiB in $el s"; else
	fail "-L 32M: 64 MiB in $el s, want 1.6 .. 2.6"
fi
same_file "-L 32M: the copy" "$T/r64" "$T/out"

# --from's side has the limit in its writer thread.
name=@upcat-pv-$$
"$CAT" -q --to "$name" "$T/r64" &
to_pid=$!
t0=$(now_s)
"$CAT" -q --from "$name" --wait 10 -L 64M >"$T/out"
t1=$(now_s)
wait "$to_pid"
el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
# The bound above is wide: it includes --to's start and the connection.
if fcmp "$el" '>=' 0.8 && fcmp "$el" '<=' 3.0; then ok "--from -L 64M: 64 MiB in $el s"; else
	fail "--from -L 64M: 64 MiB in $el s, want 0.8 .. 3.0"
fi
same_file "--from -L 64M: the copy" "$T/r64" "$T/out"

# ----------------------------------------------------------------- -n
# Size known: integer percentages, never going back, the last 100.
"$CAT" -n -i 0.1 -L 8M "$T/r2" >/dev/null 2>"$T/err"
if awk 'BEGIN { p = -1 } !/^[0-9]+$/ || $1 < p || $1 > 100 { exit 1 } { p = $1; n++ }
	END { exit !(n >= 2 && p == 100) }' "$T/err"; then
	ok "-n: $(wc -l <"$T/err") percentages, rising to 100"
else
	fail "-n: not one percentage per line rising to 100:"; sed 's/^/    /' "$T/err" >&2
fi
# Size unknown (a pipe): bytes, the last the whole count.
cat "$T/r2" | "$CAT" -n -i 0.1 -L 8M >/dev/null 2>"$T/err"
if awk '!/^[0-9]+$/ { exit 1 }' "$T/err"; then ok "-n, size unknown: numbers only"; else
	fail "-n, size unknown: not one number per line:"; sed 's/^/    /' "$T/err" >&2
fi
expect_eq "-n, size unknown: the last is the byte count" "$(last_line "$T/err")" 2097152
# -t -b: seconds and bytes.
"$CAT" -n -t -b -i 0.1 -L 8M "$T/r2" >/dev/null 2>"$T/err"
if awk 'NF != 2 || $1 !~ /^[0-9]+\.[0-9]+$/ || $2 !~ /^[0-9]+$/ { exit 1 }' "$T/err"; then
	ok "-n -t -b: seconds and bytes"
else
	fail "-n -t -b: not 'seconds bytes' per line:"; sed 's/^/    /' "$T/err" >&2
fi
expect_match "-n -t -b: the last line" '^[0-9]+\.[0-9]+ 2097152$' "$(last_line "$T/err")"

# -i: 2 MiB at 2 MiB/s, an update every 0.1 s: 1 s of them.
"$CAT" -n -t -i 0.1 -L 2M "$T/r2" >/dev/null 2>"$T/err"
n=$(wc -l <"$T/err")
if [ "$n" -ge 7 ]; then ok "-i 0.1: $n updates in 1 s"; else
	fail "-i 0.1: $n updates in 1 s, want 7 or more"; sed 's/^/    /' "$T/err" >&2
fi

# ------------------------------------------------------- field selection
# Each field alone, forced off a terminal (-f): the final line holds it only.
field() { # WHAT ERE OPTION...
	local what=$1 re=$2
	shift 2
	"$CAT" -f "$@" "$T/r2" >/dev/null 2>"$T/err"
	expect_match "$what: the final line" "$re" "$(last_line "$T/err")"
}
field "-b" '^ *2\.00 MiB$' -b
field "-t" '^0:00:0[0-9]$' -t
field "-r" '^\[ *[0-9.]+ (B|KiB|MiB|GiB)/s\]$' -r
field "-a" '^\[ *[0-9.]+ (B|KiB|MiB|GiB)/s\]$' -a
field "-p" '^\[=+\] 100%$' -p
field "-b -t" '^ *2\.00 MiB 0:00:0[0-9]$' -b -t
rate='\[ *[0-9.]+ [KMG]?i?B/s\]'
field "default set" "^ *2\\.00 MiB 0:00:0[0-9] $rate $rate \\[=+\\] 100%\$"
# -e: the time left, on the updates before the end.
"$CAT" -f -e -i 0.1 -L 8M "$T/r2" >/dev/null 2>"$T/err"
if head -n -1 "$T/err" | grep -Eqv '^ETA ([0-9]+:[0-9]{2}:[0-9]{2}|\?:\?\?:\?\?)$' ||
	[ "$(wc -l <"$T/err")" -lt 2 ]; then
	fail "-e: updates that are not 'ETA h:mm:ss':"; sed 's/^/    /' "$T/err" >&2
else
	ok "-e: $(($(wc -l <"$T/err") - 1)) updates of 'ETA h:mm:ss'"
fi
# -r is the rate over the last interval, -a the average: with the input at
# 8 MiB/s and then a stall, -r reads 0 while -a does not.
mkfifo "$T/gate"
{ head -c 1M "$T/r2"; read -r _ <"$T/gate"; } | "$CAT" -f -r -a -i 0.1 >/dev/null 2>"$T/err" &
pv_pid=$!
stalled() { grep -Eq '^\[ *0 B/s\] \[ *[0-9.]+ (KiB|MiB)/s\]$' "$T/err"; }
wait_for "-r at 0 B/s beside a non-zero -a while stalled" stalled &&
	ok "-r reads 0 B/s while stalled, -a does not: $(grep -E '^\[ *0 B/s\]' "$T/err" | tail -1)"
open_gate
wait "$pv_pid"
# The width: $COLUMNS off a terminal, else 80; the line one column short.
COLUMNS=60 "$CAT" -f "$T/r2" >/dev/null 2>"$T/err"
expect_eq "COLUMNS=60: the line is 59 columns" "$(last_line "$T/err" | awk '{ print length }')" 59
(unset COLUMNS; "$CAT" -f "$T/r2" >/dev/null 2>"$T/err")
expect_eq "no COLUMNS: the line is 79 columns" "$(last_line "$T/err" | awk '{ print length }')" 79

# ----------------------------------------------------------------- -l
seq 1 1000 >"$T/lines"
"$CAT" -l -f -b "$T/lines" >/dev/null 2>"$T/err"
expect_match "-l -b: the final count" '^ *1000$' "$(last_line "$T/err")"
seq 1 1000 | "$CAT" -l -n -b >/dev/null 2>"$T/err"
expect_eq "-l -n -b from a pipe" "$(last_line "$T/err")" 1000
"$CAT" -l -n -s 4000 "$T/lines" >/dev/null 2>"$T/err"
expect_eq "-l -s 4000: 1000 lines are 25%" "$(last_line "$T/err")" 25
"$CAT" -l -n "$T/lines" >/dev/null 2>"$T/err"
expect_eq "-l without -s: the size in lines is unknown, so the count" "$(last_line "$T/err")" 1000
printf 'a\nb\nc' | "$CAT" -l -n -b >/dev/null 2>"$T/err"
expect_eq "-l: a last line without its newline is not counted (as wc -l)" \
	"$(last_line "$T/err")" 2
"$CAT" -l -f -r "$T/lines" >/dev/null 2>"$T/err"
expect_match "-l -r: lines per second" '^\[ *[0-9.]+/s\]$' "$(last_line "$T/err")"
# --to counts in its reader thread.
"$CAT" -q --to "$name" "$T/lines" &
to_pid=$!
"$CAT" -l -n -b --from "$name" --wait 10 >"$T/out" 2>"$T/err"
wait "$to_pid"
expect_eq "-l -n -b --from" "$(last_line "$T/err")" 1000
"$CAT" -l -n -b --to "$name" "$T/lines" 2>"$T/err" &
to_pid=$!
"$CAT" -q --from "$name" --wait 10 >"$T/out"
wait "$to_pid"
expect_eq "-l -n -b --to" "$(last_line "$T/err")" 1000

# ----------------------------------------------------------------- -N
"$CAT" -f -b -N src "$T/r2" >/dev/null 2>"$T/err"
expect_match "-N src: the prefix" '^src: +2\.00 MiB$' "$(last_line "$T/err")"
"$CAT" -n -N src "$T/r2" >/dev/null 2>"$T/err"
expect_eq "-n -N: numbers stay numbers" "$(last_line "$T/err")" 100

# ----------------------------------------------------------------- -W
# The producer's first byte comes after 1.5 s: with -W no update before it
# (every count > 0) and the timer starts there (the first update within 1 s).
{ sleep 1.5; head -c 1M "$T/r2"; } | "$CAT" -W -n -t -b -i 0.1 >/dev/null 2>"$T/err"
if awk '$2 == 0 { exit 1 }' "$T/err" && [ -s "$T/err" ]; then
	ok "-W: no update before the first byte"
else fail "-W: an update before the first byte:"; sed 's/^/    /' "$T/err" >&2; fi
first=$(head -n 1 "$T/err" | awk '{ print $1 }')
if fcmp "${first:-9}" '<' 1.0; then ok "-W: the timer starts at the first byte ($first s)"
else fail "-W: the first update at $first s, want < 1.0 (the 1.5 s stall not counted)"; fi
{ sleep 1.5; head -c 1M "$T/r2"; } | "$CAT" -n -t -b -i 0.1 >/dev/null 2>"$T/err"
if awk '$2 == 0 { z = 1 } END { exit !z }' "$T/err"; then
	ok "without -W: updates before the first byte"
else fail "without -W: no update showed 0 bytes"; fi

# ----------------------------------------------------------------- -u
"$CAT" -u "$T/r2" >"$T/out" 2>"$T/err"
expect_eq "-u: exit" "$?" 0
same_file "-u: the copy" "$T/r2" "$T/out"

# ------------------------------------------------ input file is output file
printf 'hello\n' >"$T/f"
printf 'other\n' >"$T/g"
: >"$T/e"
"$CAT" -q "$T/g" "$T/f" >>"$T/f" 2>"$T/err"
expect_eq "f >> f: exit 1" "$?" 1
expect_grep "f >> f: cat's message" "^uringpipe-cat: $T/f: input file is output file$" "$T/err"
expect_eq "f >> f: the other input still copied, f not grown" "$(cat "$T/f")" \
	"$(printf 'hello\nother')"
"$CAT" -q <"$T/f" >>"$T/f" 2>"$T/err"
expect_eq "< f >> f: exit 1" "$?" 1
expect_grep "< f >> f: message" "^uringpipe-cat: -: input file is output file$" "$T/err"
expect_eq "< f >> f: f not grown" "$(wc -c <"$T/f")" 12
"$CAT" -q "$T/e" >>"$T/e" 2>"$T/err"
expect_eq "an empty file onto itself is harmless (as cat): exit" "$?" 0
# An input already at its end (the position at the size) is let through,
# as by cat: nothing is left to feed itself.
(cat >/dev/null; "$CAT" -q) <"$T/f" >>"$T/f" 2>"$T/err"
expect_eq "f >> f with f read to its end first: exit 0" "$?" 0
expect_eq "f >> f with f read to its end first: f not grown" "$(wc -c <"$T/f")" 12

# ------------------------------------------------------- usage errors
usage_err() { # WHAT ARGS...
	local what=$1
	shift
	"$CAT" "$@" </dev/null >"$T/out" 2>"$T/err"
	expect_eq "$what: exit 2" "$?" 2
	expect_eq "$what: two lines, the error and the hint" "$(wc -l <"$T/err")" 2
	expect_eq "$what: the hint" "$(sed -n 2p "$T/err")" \
		"Try 'uringpipe-cat --help' for more information."
	if [ -s "$T/out" ]; then fail "$what: wrote to stdout"; fi
}
usage_err "unknown option" -Q
usage_err "unknown long option" --frobnicate
usage_err "-L bad" -L fast
usage_err "-L 0" -L 0
usage_err "-i 0" -i 0
usage_err "-i bad" -i 1s
usage_err "-N control character" -N "$(printf 'a\033b')"
usage_err "missing argument" -i

# ----------------------------------------------------------------- tmux
if ! command -v tmux >/dev/null 2>&1; then
	echo "skip: no tmux, the terminal checks did not run"
	cli_done
fi
sock="upcat-pv-$$"
tm() { tmux -L "$sock" -f /dev/null "$@"; }
tm_sock="${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$sock"
trap 'tm kill-server 2>/dev/null; rm -rf "$T"; rm -f "$tm_sock"' EXIT
# A session that stays, so that the server does not exit between runs (a
# new session could land on a server that is on its way out).
tm new-session -d -s keep 'exec tail -f /dev/null'
run=0
pane() { tm capture-pane -p -t "pv$run"; }

# run_in_tmux SCRIPT: a 100x12 terminal running SCRIPT; the script signals
# "done" (tmux wait-for) when its pipeline ended, then holds the pane until
# the gate is opened a second time.
run_in_tmux() {
	run=$((run + 1))
	tm new-session -d -s "pv$run" -x 100 -y 12 "bash $1"
}
# finish_tmux WHAT: the producer goes on; until the pipeline ended. The pane
# may still be behind the pty then, so the final checks poll the pane
# (pane_shows) rather than take one capture.
finish_tmux() {
	open_gate
	timeout 20 tmux -L "$sock" -f /dev/null wait-for pvdone || fail "$1: the pipeline did not end"
}
# pane_shows WHAT ERE [COUNT]: until COUNT (1) lines of the pane match ERE.
pane_has() { pane >"$T/pane"; [ "$(grep -Ec -- "$1" "$T/pane")" -ge "$2" ]; }
pane_shows() {
	wait_for "$1" pane_has "$2" "${3:-1}" && ok "$1: $(grep -E -m 1 -- "$2" "$T/pane")"
}
release_pane() { open_gate; }

# 1 MiB, then a stall until the test opens the gate, then 1 MiB; -s 2M.
cat >"$T/stall.sh" <<EOF
{ head -c 1M /dev/zero; read -r _ <"$T/gate"; head -c 1M /dev/zero; } |
	"$CAT" -i 0.2 -s 2M >/dev/null
tmux -L "$sock" wait-for -S pvdone
read -r _ <"$T/gate"
EOF
run_in_tmux "$T/stall.sh"
meter_line() { pane | grep -m 1 'MiB'; }
stalled_pane() { meter_line | grep -Eq '^ *1\.00 MiB .*\[ *0 B/s\] \[ *[0-9.]+ KiB/s\]'; }
wait_for "tmux: the current rate at 0 B/s while stalled" stalled_pane
line=$(meter_line)
echo "stalled: $line"
expect_match "tmux: stalled, current 0 B/s, average not, 50%" \
	'^ *1\.00 MiB 0:00:[0-9]{2} \[ *0 B/s\] \[ *[0-9.]+ KiB/s\] \[=+> +\]  50% ETA ' "$line"
expect_eq "tmux: the line fills the 100 columns but the last" "${#line}" 99
finish_tmux "tmux stall"
pane_shows "tmux: the final line" \
	'^ *2\.00 MiB 0:00:[0-9]{2} \[ *[0-9.]+ [KM]iB/s\] \[ *[0-9.]+ [KM]iB/s\] \[=+\] 100%$'
release_pane

# A final line shorter than the updates before it (the ETA goes) must not
# keep their tail.
cat >"$T/short.sh" <<EOF
{ head -c 1M /dev/zero; read -r _ <"$T/gate"; head -c 1M /dev/zero; } |
	"$CAT" -i 0.2 -s 2M -b -e >/dev/null
tmux -L "$sock" wait-for -S pvdone
read -r _ <"$T/gate"
EOF
run_in_tmux "$T/short.sh"
eta_pane() { meter_line | grep -q 'ETA'; }
wait_for "tmux -b -e: an update with the ETA" eta_pane
finish_tmux "tmux -b -e"
pane_shows "tmux -b -e: the final line is clean (no stale ETA)" '^ *2\.00 MiB$'
release_pane

# -c: two meters in one pipeline, a row each, both kept.
cat >"$T/cursor.sh" <<EOF
clear
echo top
{ head -c 1M /dev/zero; read -r _ <"$T/gate"; head -c 1M /dev/zero; } |
	"$CAT" -c -N aaa -i 0.2 | "$CAT" -c -N bbb -i 0.2 >/dev/null
tmux -L "$sock" wait-for -S pvdone
read -r _ <"$T/gate"
EOF
run_in_tmux "$T/cursor.sh"
both_rows() {
	pane | grep -q '^aaa: *1\.00 MiB' && pane | grep -q '^bbb: *1\.00 MiB'
}
wait_for "tmux -c: a row for each meter" both_rows && ok "tmux -c: a row for each meter"
finish_tmux "tmux -c"
pane_shows "tmux -c: the final lines, one each" '^(aaa|bbb): +2\.00 MiB' 2
expect_eq "tmux -c: the text above them kept" "$(head -n 1 "$T/pane")" top
release_pane

# -c at the bottom of the screen: each meter's newline scrolls the ones
# before it up a row; they follow (the lock file's size counts the scrolls).
cat >"$T/scroll.sh" <<EOF
seq 1 30
{ head -c 1M /dev/zero; read -r _ <"$T/gate"; head -c 1M /dev/zero; } |
	"$CAT" -c -N aaa -i 0.2 | "$CAT" -c -N bbb -i 0.2 | "$CAT" -c -N ccc -i 0.2 >/dev/null
tmux -L "$sock" wait-for -S pvdone
read -r _ <"$T/gate"
EOF
run_in_tmux "$T/scroll.sh"
three_rows() {
	pane >"$T/pane"
	[ "$(grep -Ec '^(aaa|bbb|ccc): +1\.00 MiB' "$T/pane")" = 3 ]
}
wait_for "tmux -c at the bottom: three rows" three_rows && ok "tmux -c at the bottom: three rows"
finish_tmux "tmux -c at the bottom"
pane_shows "tmux -c at the bottom: three final lines" '^(aaa|bbb|ccc): +2\.00 MiB' 3
expect_eq "tmux -c at the bottom: the last line of seq kept above them" \
	"$(grep -B1 -m1 -E '^(aaa|bbb|ccc):' "$T/pane" | head -n 1)" 30
release_pane

cli_done
