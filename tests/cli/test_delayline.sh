#!/bin/bash
# uringpipe-delayline (beside uringpipe-cat), the link that tools/bench_tcp.sh
# --delay uses where the kernel has no netem, between two network namespaces
# this test makes itself (10.78.0.1 -> 10.78.0.2), nothing else touched:
#  1. --delay 40: a stream through it arrives byte-identical and the sender
#     takes at least 80 ms (its SYN and its data each held 40 ms), none lost;
#  2. --loss 10: byte-identical still, and between 3% and 20% of the
#     packets from A to B were dropped by its count;
#  3. --loss 100: nothing reaches B and nothing resets the SYN, so the
#     sender's connect is given up when its --wait runs out, or without
#     --wait its --tcp-timeout (status 4, a message naming which), not
#     after the kernel's two minutes of SYN retries;
#  4. a bad option: exit 2 and a message.
# Needs root and ip(8); skips (77) without them or without /dev/net/tun.
. "$(dirname "$0")/lib.sh"
cli_init "$@"
DL=$(dirname "$CAT")/uringpipe-delayline
[ -x "$DL" ] || { fail "not executable: $DL"; cli_done; }

"$DL" --delay x a b 2>"$T/usage.err"
expect_eq "--delay x: exit" $? 2
expect_grep "--delay x: message" "^uringpipe-delayline: --delay: 'x' is not a number" "$T/usage.err"

[ -c /dev/net/tun ] || { echo "skip: no /dev/net/tun"; exit 77; }
DLPID=
netns_extra_cleanup() { [ -z "$DLPID" ] || kill "$DLPID" 2>/dev/null; }
netns_pair dl

# line OPTION...: the delay line between the namespaces, addressed and up.
# The last line's "ready" is removed first: the new one's shell truncates
# dl.out only once it runs, so a look before then would find the old word.
line() {
	rm -f "$T/dl.out" "$T/dl.err"
	"$DL" "$@" "$NA" "$NB" >"$T/dl.out" 2>"$T/dl.err" &
	DLPID=$!
	for _ in $(seq 1 500); do
		grep -q ready "$T/dl.out" 2>/dev/null && break
		kill -0 "$DLPID" 2>/dev/null || break
		sleep 0.01
	done
	grep -q ready "$T/dl.out" || { fail "delay line $*: not ready:"; sed 's/^/    /' "$T/dl.err" >&2; }
	ip -n "$NA" addr add 10.78.0.1 peer 10.78.0.2 dev updl0 &&
		ip -n "$NB" addr add 10.78.0.2 peer 10.78.0.1 dev updl0 &&
		ip -n "$NA" link set updl0 up && ip -n "$NB" link set updl0 up ||
		fail "delay line $*: cannot address its devices"
}

# line_end: stop it; sets SENT and LOST from what it printed.
line_end() {
	kill "$DLPID"
	wait "$DLPID"
	expect_eq "delay line: exit on SIGTERM" $? 0
	DLPID=
	SENT=$(sed -n 's/.*A->B \([0-9]*\) packets.*/\1/p' "$T/dl.err")
	LOST=$(sed -n 's/.*packets, \([0-9]*\) lost.*/\1/p' "$T/dl.err")
	[ -n "$SENT" ] && [ -n "$LOST" ] || { fail "delay line: no counts:"; sed 's/^/    /' "$T/dl.err" >&2; SENT=0 LOST=0; }
}

# through N PORT: N bytes from A to B with uringpipe-cat; sets SECS (the
# sender's), SRC and RRC (the exit statuses) and compares the bytes.
through() {
	local t0 t1 rp
	head -c "$1" /dev/urandom >"$T/in"
	inB "$CAT" -q --wait 30 --from "tcp:10.78.0.2:$2" >"$T/out" 2>"$T/rerr" &
	rp=$!
	for _ in $(seq 1 500); do
		inB ss -ltnH "sport = :$2" | grep -q . && break
		sleep 0.01
	done
	t0=$(now_s)
	inA "$CAT" -q --wait 10 --to "tcp:10.78.0.2:$2" "$T/in" 2>"$T/serr"
	SRC=$?
	t1=$(now_s)
	wait "$rp"
	RRC=$?
	SECS=$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')
}

# 1. Delay.
line --delay 40
through $((4 << 20)) 5101
expect_eq "delay 40: sender exit" "$SRC" 0
expect_eq "delay 40: receiver exit" "$RRC" 0
if cmp -s "$T/in" "$T/out"; then ok "delay 40: byte-identical"; else fail "delay 40: output differs"; fi
if fcmp "$SECS" '>=' 0.080; then ok "delay 40: the sender took $SECS s"
else fail "delay 40: the sender took $SECS s, under the 80 ms its SYN and data must wait"; fi
line_end
expect_eq "delay 40: lost" "$LOST" 0

# 2. Loss.
line --loss 10
through $((2 << 20)) 5102
expect_eq "loss 10: sender exit" "$SRC" 0
expect_eq "loss 10: receiver exit" "$RRC" 0
if cmp -s "$T/in" "$T/out"; then ok "loss 10: byte-identical"; else fail "loss 10: output differs"; fi
line_end
if [ "$SENT" -gt 100 ] && [ $((LOST * 100)) -ge $((SENT * 3)) ] && [ $((LOST * 100)) -le $((SENT * 20)) ]; then
	ok "loss 10: $LOST of $SENT packets lost"
else
	fail "loss 10: $LOST of $SENT packets lost, not 3-20%"
fi

# 3. Everything lost: the connect never completes.
line --loss 100
inB "$CAT" -q --wait 5 --from tcp:10.78.0.2:5103 >/dev/null 2>&1 &
rp=$!
inA "$CAT" -q --wait 1 --to tcp:10.78.0.2:5103 /dev/null 2>"$T/serr"
src=$?
kill "$rp" 2>/dev/null
wait "$rp" 2>/dev/null
expect_eq "loss 100: sender exit" "$src" 4
expect_grep "loss 100: sender's message" "^uringpipe-cat: --to tcp:10.78.0.2:5103: no answer in 1 s (--wait)$" "$T/serr"
# Without --wait, the peer is gone after --tcp-timeout.
inA "$CAT" -q --tcp-timeout 1 --to tcp:10.78.0.2:5103 /dev/null 2>"$T/serr"
expect_eq "loss 100, --tcp-timeout 1: sender exit" $? 4
expect_grep "loss 100, --tcp-timeout 1: sender's message" "^uringpipe-cat: --to tcp:10.78.0.2:5103: no answer in 1 s (--tcp-timeout)$" "$T/serr"
line_end
if [ "$SENT" -gt 0 ] && [ "$LOST" = "$SENT" ]; then ok "loss 100: all $SENT lost"
else fail "loss 100: $LOST of $SENT lost"; fi

cli_done
