#!/bin/bash
# uringpipe-cat --to/--from tcp: between two network namespaces this test
# makes itself, joined by a veth pair (10.77.0.1 -> 10.77.0.2), nothing else
# touched:
#  1. 1% of the packets into the receiver dropped (nftables numgen; this
#     kernel has no sch_netem): the stream arrives byte-identical, both exit
#     0, and the drop counter shows the loss happened;
#  2. a half-open connection: mid-stream the receiver's namespace drops
#     every packet both ways, as a machine that vanished would. With
#     --tcp-timeout 3 the sender (sent bytes never acknowledged) and the
#     receiver (keepalive probes unanswered) each end with status 4 and a
#     message within the deadline, and the output is an exact prefix.
# Needs root, ip(8) and nft(8); skips (77) without them.
. "$(dirname "$0")/lib.sh"
cli_init "$@"

command -v nft >/dev/null 2>&1 || { echo "skip: no nft"; exit 77; }
netns_pair up
# gso_max_segs 1: packets of one MTU each, so that 1% of the packets is 1%
# of the segments, as on a wire.
ip link add upv0 netns "$NA" gso_max_segs 1 type veth peer name upv0 netns "$NB" gso_max_segs 1 &&
	ip -n "$NA" addr add 10.77.0.1/30 dev upv0 && ip -n "$NB" addr add 10.77.0.2/30 dev upv0 &&
	ip -n "$NA" link set upv0 up && ip -n "$NB" link set upv0 up ||
	{ fail "cannot set up the veth pair"; cli_done; }
ADDR=tcp:10.77.0.2:5000

# deadline SECONDS: a time $(now_s) must stay below.
deadline() { awk -v n="$(now_s)" -v s="$1" 'BEGIN { printf "%.3f", n + s }'; }

# ended PID DEADLINE: whether PID ended before DEADLINE, a $(now_s) time
# (it is killed if not).
ended() {
	while kill -0 "$1" 2>/dev/null; do
		if ! fcmp "$(now_s)" '<' "$2"; then
			kill -9 "$1" 2>/dev/null
			return 1
		fi
		sleep 0.05
	done
}

# 1. 1% loss into the receiver.
head -c $((32 << 20)) /dev/urandom >"$T/in"
inB nft add table inet uploss &&
	inB nft 'add chain inet uploss in { type filter hook input priority 0; }' &&
	inB nft add rule inet uploss in meta l4proto tcp numgen random mod 100 '<' 1 counter drop ||
	fail "cannot add the loss rule"
inB "$CAT" -q --json --wait 30 --from "$ADDR" >"$T/out" 2>"$T/rerr" &
RPID=$!
inA "$CAT" -q --json --wait 10 --to "$ADDR" "$T/in" 2>"$T/serr"
expect_eq "1% loss: sender exit" $? 0
wait "$RPID"
expect_eq "1% loss: receiver exit" $? 0
same_file "1% loss: byte-identical" "$T/in" "$T/out"
# Under tests/noiouring the socket goes through send/recv.
[ -z "${UP_NOIOURING:-}" ] ||
	expect_eq "1% loss: no io_uring" "$(json_get socket_io "$T/rerr")" "send/recv"
dropped=$(inB nft list chain inet uploss in | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
if [ "${dropped:-0}" -gt 0 ]; then ok "1% loss: $dropped packets dropped"; else
	fail "1% loss: no packet was dropped (the rule did not apply)"; fi
inB nft delete table inet uploss

# 2. Half-open: the receiver's side goes silent mid-stream. The sender is
# paced (-L) so that the stream is still running when it does.
head -c $((64 << 20)) /dev/zero >"$T/in"
inB "$CAT" -q --json --wait 30 --tcp-timeout 3 --from "$ADDR" >"$T/out" 2>"$T/rerr" &
RPID=$!
inA "$CAT" -q --json --wait 10 --tcp-timeout 3 -L 4M --to "$ADDR" "$T/in" 2>"$T/serr" &
SPID=$!
d=$(deadline 20)
while [ "$(stat -c %s "$T/out")" -lt $((1 << 20)) ] && fcmp "$(now_s)" '<' "$d"; do
	sleep 0.02
done
inB nft add table inet uphole &&
	inB nft 'add chain inet uphole in { type filter hook input priority 0; policy drop; }' &&
	inB nft 'add chain inet uphole out { type filter hook output priority 0; policy drop; }' ||
	fail "cannot add the drop-all rules"
# Four times the timeout: the kernel gives up 3-5 s after the silence; a
# keepalive that kept its 10 s default idle would take 15 s.
t0=$(now_s)
d=$(deadline 12)
if ended "$SPID" "$d"; then
	wait "$SPID"
	expect_eq "half-open: sender exit" $? 4
	expect_grep "half-open: sender says why" "timed out" "$T/serr"
else
	fail "half-open: the sender still ran 12 s after its peer went silent"
fi
if ended "$RPID" "$d"; then
	wait "$RPID"
	expect_eq "half-open: receiver exit" $? 4
	expect_grep "half-open: receiver says why" "timed out" "$T/rerr"
else
	fail "half-open: the receiver still ran 12 s after its peer went silent"
fi
echo "# half-open: both ended $(awk -v a="$(now_s)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s after the silence"
n=$(stat -c %s "$T/out")
if [ "$n" -ge $((1 << 20)) ] && [ "$n" -lt $((64 << 20)) ] && cmp -s -n "$n" "$T/in" "$T/out"; then
	ok "half-open: the output is an exact prefix ($n bytes)"
else
	fail "half-open: the output is not a strict prefix of at least 1 MiB ($n bytes)"
fi
cli_done
