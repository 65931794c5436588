#!/bin/bash
# bench_tcp.sh - uringpipe-cat --to/--from tcp: against the tools people use
# to carry a stream over TCP, alternating in one run, every run printed.
#
#   bash tools/bench_tcp.sh [-n RUNS] [-s MIB] [--netns [--loss PCT] [--delay MS]] CAT
#
# Loopback (default): a file of MIB MiB (default 2048) from the page cache to
# /dev/null on the receiver, through uringpipe-cat, mbuffer -O/-I, socat -u,
# nc (netcat-openbsd) and iperf3 (a single stream, no file: the ceiling of
# TCP here; iperf3-file: the same stream read from the file, -F, which pays
# the copy out of the page cache that every other tool pays); the tools not
# installed are left out.
# --netns: two network namespaces joined by a veth pair, made and removed
# by the script (root); with --loss PCT, PCT% of the packets into the
# receiver are dropped (nftables numgen). With --delay MS the link is
# uringpipe-delayline's instead (beside CAT; TUN devices, for a kernel
# without netem): packets to the receiver are held MS ms, and --loss PCT of
# them are dropped there. uringpipe-cat and mbuffer only, the receiver's
# output through sha256sum, compared with the file's.
# MB/s are 10^6 bytes per second of wall time, sender start to receiver end.
set -euo pipefail

runs=3 mib=2048 netns=0 loss=0 delay=
while [ $# -gt 1 ]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-s) mib=$2; shift 2 ;;
	--netns) netns=1; shift ;;
	--loss) loss=$2; shift 2 ;;
	--delay) delay=$2; shift 2 ;;
	*) echo "bench_tcp.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
CAT=${1:?usage: bench_tcp.sh [-n RUNS] [-s MIB] [--netns [--loss PCT] [--delay MS]] /path/to/uringpipe-cat}
[ -x "$CAT" ] || { echo "bench_tcp.sh: not executable: $CAT" >&2; exit 2; }
case $runs$mib$delay in *[!0-9]*) echo "bench_tcp.sh: -n, -s and --delay take numbers" >&2; exit 2 ;; esac
if [ -n "$delay" ]; then
	[ "$netns" = 1 ] || { echo "bench_tcp.sh: --delay needs --netns" >&2; exit 2; }
	DL=$(dirname "$CAT")/uringpipe-delayline
	[ -x "$DL" ] || { echo "bench_tcp.sh: not executable: $DL" >&2; exit 2; }
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/bench_tcp.XXXXXX")
NA=bnA$$ NB=bnB$$
DLPID=
cleanup() {
	if [ -n "$DLPID" ]; then
		kill "$DLPID" 2>/dev/null || true
		wait "$DLPID" 2>/dev/null || true
	fi
	if [ "$netns" = 1 ]; then
		ip netns del "$NA" 2>/dev/null || true
		ip netns del "$NB" 2>/dev/null || true
	fi
	rm -rf "$W"
}
trap cleanup EXIT
F=$W/in
head -c $((mib << 20)) /dev/urandom >"$F"
size=$((mib << 20))

sx=() rx=() host=127.0.0.1 peer=127.0.0.1
if [ "$netns" = 1 ]; then
	ip netns add "$NA" && ip netns add "$NB"
	if [ -n "$delay" ]; then
		"$DL" --delay "$delay" --loss "$loss" "$NA" "$NB" >"$W/dl.out" 2>"$W/dl.err" &
		DLPID=$!
		for _ in $(seq 1 500); do
			grep -q ready "$W/dl.out" 2>/dev/null && break
			kill -0 "$DLPID" 2>/dev/null || { cat "$W/dl.err" >&2; exit 1; }
			sleep 0.01
		done
		ip -n "$NA" addr add 10.77.0.1 peer 10.77.0.2 dev updl0
		ip -n "$NB" addr add 10.77.0.2 peer 10.77.0.1 dev updl0
		ip -n "$NA" link set updl0 up
		ip -n "$NB" link set updl0 up
	else
		ip link add upv0 netns "$NA" gso_max_segs 1 type veth peer name upv0 netns "$NB" gso_max_segs 1
		ip -n "$NA" addr add 10.77.0.1/30 dev upv0
		ip -n "$NB" addr add 10.77.0.2/30 dev upv0
		ip -n "$NA" link set upv0 up
		ip -n "$NB" link set upv0 up
	fi
	ip -n "$NB" link set lo up
	if [ "$loss" != 0 ] && [ -z "$delay" ]; then
		ip netns exec "$NB" nft add table inet bnloss
		ip netns exec "$NB" nft 'add chain inet bnloss in { type filter hook input priority 0; }'
		ip netns exec "$NB" nft add rule inet bnloss in meta l4proto tcp \
			numgen random mod 100 '<' "$loss" counter drop
	fi
	sx=(ip netns exec "$NA") rx=(ip netns exec "$NB") host=10.77.0.2 peer=10.77.0.1
	want=$(sha256sum <"$F" | cut -d' ' -f1)
fi

# listening PORT: until something listens on PORT on the receiver's side.
listening() {
	local i
	for i in $(seq 1 500); do
		"${rx[@]}" ss -ltnH "sport = :$1" | grep -q . && return 0
		sleep 0.01
	done
	echo "bench_tcp.sh: nothing listened on port $1" >&2
	return 1
}
now() { date +%s.%N; }
port=47000
declare -A all
row() { # TOOL SECONDS [NOTE]
	local mbs
	mbs=$(awk -v b="$size" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }')
	all[$1]="${all[$1]:-} $mbs"
	printf "  %-12s %7.3f s %7s MB/s %s\n" "$1" "$2" "$mbs" "${3:-}"
}
# timed TOOL SENDER...: runs the sender; the receiver is $RPID, its output
# $W/out (a sha256 in netns mode).
timed() {
	local tool=$1 t0 t1 note=
	shift
	t0=$(now)
	timeout 600 "$@" || note="(sender failed)"
	# A receiver whose sender failed may wait for ever: it gets 10 s.
	[ -z "$note" ] || { sleep 10; pkill -P "$RPID" 2>/dev/null || true; }
	wait "$RPID" || note="$note(receiver failed)"
	t1=$(now)
	if [ "$netns" = 1 ] && [ "$(cut -d' ' -f1 "$W/out")" != "$want" ]; then
		note="$note(sha256 differs)"
	elif [ "$netns" = 1 ]; then
		note="sha256 ok"
	fi
	row "$tool" "$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')" "$note"
}
recv() { # RECEIVER...: in the receiver's namespace, into /dev/null or sha256sum
	if [ "$netns" = 1 ]; then "${rx[@]}" "$@" | sha256sum >"$W/out"; else "$@" >/dev/null; fi
}

tools=(uringpipe)
for t in mbuffer socat nc iperf3 iperf3-file; do
	command -v "${t%-file}" >/dev/null 2>&1 || continue
	[ "$netns" = 1 ] && [ "$t" != mbuffer ] && continue
	tools+=("$t")
done
echo "# $(uname -r), $(nproc) CPUs; $mib MiB; $(if [ -n "$delay" ]; then
	echo "uringpipe-delayline between two namespaces, delay $delay ms, loss $loss%"
elif [ "$netns" = 1 ]; then
	echo "veth between two namespaces, loss $loss%"
else echo loopback; fi); $(date -u +%FT%TZ)"
for r in $(seq 1 "$runs"); do
	echo "run $r"
	for t in "${tools[@]}"; do
		cat "$F" >/dev/null # the page cache, for every tool alike
		port=$((port + 1))
		case $t in
		uringpipe)
			recv "$CAT" -q --from "tcp:$host:$port" &
			RPID=$!
			listening "$port"
			timed "$t" "${sx[@]}" "$CAT" -q --wait 10 --to "tcp:$host:$port" "$F" ;;
		mbuffer)
			# -I HOST:PORT takes connections from HOST only: the sender's.
			recv mbuffer -q -s 256k -m 8M -I "$peer:$port" -o - 2>/dev/null &
			RPID=$!
			listening "$port"
			timed "$t" "${sx[@]}" mbuffer -q -s 256k -m 8M -i "$F" -O "$host:$port" 2>/dev/null ;;
		socat)
			recv socat -u "TCP-LISTEN:$port,bind=$host,reuseaddr" STDOUT &
			RPID=$!
			listening "$port"
			timed "$t" socat -u "OPEN:$F" "TCP:$host:$port" ;;
		nc)
			recv nc -l "$host" "$port" &
			RPID=$!
			listening "$port"
			timed "$t" sh -c 'exec nc -N "$1" "$2" <"$3"' nc "$host" "$port" "$F" ;;
		iperf3)
			iperf3 -s -1 -B "$host" -p "$port" >/dev/null 2>&1 &
			RPID=$!
			listening "$port"
			timed "$t" sh -c 'exec iperf3 -c "$1" -p "$2" -n "$3" >/dev/null 2>&1' iperf3 \
				"$host" "$port" "$size" ;;
		iperf3-file)
			iperf3 -s -1 -B "$host" -p "$port" >/dev/null 2>&1 &
			RPID=$!
			listening "$port"
			timed "$t" sh -c 'exec iperf3 -c "$1" -p "$2" -F "$3" >/dev/null 2>&1' iperf3 \
				"$host" "$port" "$F" ;;
		esac
	done
done
if [ -n "$DLPID" ]; then
	kill "$DLPID"
	wait "$DLPID" || true
	DLPID=
	echo "# $(cat "$W/dl.err")"
elif [ "$netns" = 1 ] && [ "$loss" != 0 ]; then
	echo "# dropped into the receiver: $(ip netns exec "$NB" nft list chain inet bnloss in |
		sed -n 's/.*counter packets \([0-9]*\).*/\1/p') packets"
fi
med() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
up=$(echo "${all[uringpipe]}" | med)
echo "median MB/s, and uringpipe's ratio to each:"
for t in "${tools[@]}"; do
	m=$(echo "${all[$t]}" | med)
	printf "  %-12s %7s   %s\n" "$t" "$m" "$(awk -v a="$up" -v b="$m" 'BEGIN { printf "%.2fx", a / b }')"
done
