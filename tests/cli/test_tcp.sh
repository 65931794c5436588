#!/bin/bash
# uringpipe-cat --to tcp:HOST:PORT / --from tcp:[HOST]:PORT, on 127.0.0.1 only:
# sizes 0, 1, 4095, 1 MiB + 1 and 64 MiB byte-identical, both start orders,
# --wait running out, the receiver killed mid-stream (the sender fails with a
# message), the sender killed mid-stream (the receiver fails with a message
# and its output is exactly the bytes sent so far), a hand-made stream with
# a wrong magic, a wrong version and a broken trailer, and 1 GiB with the
# receiver stopped for 2 s meanwhile (the sender's memory stays bounded;
# count and CRC32C confirmed by the trailer); -B on the receiver sizes its
# pipe.
. "$(dirname "$0")/lib.sh"
cli_init "$@"

# deadline SECONDS: a time $(now_s) must stay below.
deadline() { awk -v n="$(now_s)" -v s="$1" 'BEGIN { printf "%.3f", n + s }'; }

# start_from OUT ERR [ADDR] [OPTION]...: a receiver in the background; sets
# RPID and PORT (the port it listens on: for port 0, from its stderr).
start_from() {
	local out=$1 err=$2 addr=${3:-tcp:127.0.0.1:0} d
	shift 3 2>/dev/null || shift $#
	rm -f "$err" # not the last receiver's port
	"$CAT" -q --json --wait 30 "$@" --from "$addr" >"$out" 2>"$err" &
	RPID=$!
	PORT=
	case $addr in *:0) ;; *) PORT=${addr##*:}; return ;; esac # it says nothing
	d=$(deadline 10)
	while [ -z "$PORT" ] && fcmp "$(now_s)" '<' "$d"; do
		PORT=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$err" 2>/dev/null)
		kill -0 "$RPID" 2>/dev/null || break
		[ -n "$PORT" ] || sleep 0.01
	done
	[ -n "$PORT" ] || { fail "receiver did not say its port:"; sed 's/^/    /' "$err" >&2; }
}

# wait_size FILE BYTES: until FILE holds at least BYTES (10 s at most).
wait_size() {
	local d
	d=$(deadline 10)
	while [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -lt "$2" ]; do
		fcmp "$(now_s)" '<' "$d" || return 1
		sleep 0.01
	done
}

# rss PID: resident KiB, 0 once gone.
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

head -c $((64 << 20)) /dev/urandom >"$T/in64"

# 1. Sizes, the receiver first.
for n in 0 1 4095 $(((1 << 20) + 1)) $((64 << 20)); do
	head -c "$n" "$T/in64" >"$T/in"
	start_from "$T/out" "$T/rerr"
	"$CAT" -q --wait 30 --to "tcp:127.0.0.1:$PORT" "$T/in" 2>"$T/serr"
	src=$?
	wait "$RPID"
	rrc=$?
	expect_eq "size $n: sender exit" "$src" 0
	expect_eq "size $n: receiver exit" "$rrc" 0
	same_file "size $n: byte-identical" "$T/in" "$T/out"
	expect_eq "size $n: receiver counted" "$(json_get stream_bytes "$T/rerr")" "$n"
	# Under tests/noiouring the socket goes through send/recv.
	[ -z "${UP_NOIOURING:-}" ] ||
		expect_eq "size $n: no io_uring" "$(json_get socket_io "$T/rerr")" "send/recv"
done

# 2. The sender first: it retries until the receiver listens. The port is
# one the kernel gave a receiver that then left.
start_from "$T/out" "$T/rerr"
kill "$RPID"
wait "$RPID" 2>/dev/null
P=$PORT
head -c 100000 "$T/in64" >"$T/in"
"$CAT" -q --wait 20 --to "tcp:127.0.0.1:$P" "$T/in" 2>"$T/serr" &
SPID=$!
sleep 0.3 # let it try and fail at least once; checked below, not assumed
if kill -0 "$SPID" 2>/dev/null; then ok "sender first: still retrying"; else
	fail "sender first: the sender ended before anyone listened"; fi
start_from "$T/out" "$T/rerr" "tcp:127.0.0.1:$P"
wait "$SPID"
expect_eq "sender first: sender exit" $? 0
wait "$RPID"
expect_eq "sender first: receiver exit" $? 0
same_file "sender first: byte-identical" "$T/in" "$T/out"

# 3. --wait runs out: exit 4 and a message.
"$CAT" -q --wait 0.3 --to "tcp:127.0.0.1:$P" "$T/in" 2>"$T/serr"
expect_eq "--wait: exit" $? 4
expect_grep "--wait: message" "nobody listening after" "$T/serr"
"$CAT" -q --wait 0.3 --from "tcp:127.0.0.1:0" >/dev/null 2>"$T/rerr"
expect_eq "--from --wait: exit" $? 4
expect_grep "--from --wait: message" "nobody connected within" "$T/rerr"
"$CAT" -q --to "tcp:no-port-here" "$T/in" 2>"$T/serr"
expect_eq "bad address: usage exit" $? 2

# 4. The receiver killed mid-stream: the sender fails, with a message.
mkfifo "$T/fifo"
start_from "$T/out" "$T/rerr"
head -c $((4 << 30)) /dev/zero >"$T/fifo" &
HPID=$!
"$CAT" -q --to "tcp:127.0.0.1:$PORT" "$T/fifo" 2>"$T/serr" &
SPID=$!
wait_size "$T/out" $((8 << 20)) || fail "receiver killed: no data arrived"
kill -9 "$RPID"
wait "$RPID" 2>/dev/null
wait "$SPID"
expect_eq "receiver killed: sender exit" $? 4
expect_grep "receiver killed: sender says why" "the receiver went away" "$T/serr"
kill "$HPID" 2>/dev/null
wait "$HPID" 2>/dev/null

# 5. The sender killed mid-stream: the receiver fails, with a message, and
# its output is exactly what was sent.
head -c $((1 << 20)) "$T/in64" >"$T/in"
start_from "$T/out" "$T/rerr"
"$CAT" -q --to "tcp:127.0.0.1:$PORT" "$T/fifo" 2>"$T/serr" &
SPID=$!
exec 7>"$T/fifo"
cat "$T/in" >&7
wait_size "$T/out" $((1 << 20)) || fail "sender killed: the first MiB did not arrive"
kill -9 "$SPID"
wait "$SPID" 2>/dev/null
exec 7>&-
wait "$RPID"
expect_eq "sender killed: receiver exit" $? 4
expect_grep "sender killed: receiver says why" "ended before its trailer" "$T/rerr"
same_file "sender killed: output is the exact prefix" "$T/in" "$T/out"

# 6. Hand-made streams (bash's /dev/tcp): the receiver refuses them.
# hand BYTES: send them (printf %b escapes) to a fresh receiver, then close.
hand() {
	start_from "$T/out" "$T/rerr"
	exec 8<>"/dev/tcp/127.0.0.1/$PORT"
	printf '%b' "$1" >&8
	exec 8>&-
	wait "$RPID"
}
HDR='UPBR\x01\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00'
hand 'UPBX\x01\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00'
expect_eq "wrong magic: exit" $? 4
expect_grep "wrong magic: message" "not a uringpipe stream" "$T/rerr"
hand 'UPBR\x02\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00'
expect_eq "wrong version: exit" $? 4
expect_grep "wrong version: message" "another version" "$T/rerr"
# "hello", then a trailer with the right count and CRC32C 0 (it is 9a71bb4c).
TR='UPEN\x10\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00'
hand "${HDR}UPDT\\x05\\x00\\x00\\x00hello${TR}\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
expect_eq "broken trailer: exit" $? 4
expect_grep "broken trailer: message" "does not match" "$T/rerr"
printf hello >"$T/hello"
same_file "broken trailer: the bytes still went out" "$T/hello" "$T/out"
hand "${HDR}UPDT\\x05\\x00\\x00\\x00hello${TR}\\x4c\\xbb\\x71\\x9a\\x00\\x00\\x00\\x00"
expect_eq "right trailer: exit" $? 0
hand "${HDR}UPDT\\x05\\x00\\x00\\x00hel"
expect_eq "short stream: exit" $? 4
expect_grep "short stream: message" "ended before its trailer after 3 bytes" "$T/rerr"

# --tcp-timeout: usage errors, exit 2 with one line.
expect_usage "--tcp-timeout under a second" "at least 1" --tcp-timeout 0.5 --to tcp:127.0.0.1:1
expect_usage "--tcp-timeout not a number" "not a number of seconds" --tcp-timeout 3x \
	--from tcp:127.0.0.1:0
expect_usage "--tcp-timeout without tcp:" "only --to tcp: and --from tcp:" --tcp-timeout 5 "$T/in"
expect_usage "-B on a named --from" "belongs to the side that makes the pipe" -B 1M --from @x

# 7. 1 GiB with the receiver stopped for 2 s: the sender's resident memory
# stays near its pipe (-B 8M) while it waits; then everything arrives.
start_from /dev/null "$T/rerr"
head -c $((1 << 30)) /dev/zero >"$T/fifo" &
HPID=$!
"$CAT" -q -B 8M --to "tcp:127.0.0.1:$PORT" "$T/fifo" 2>"$T/serr" &
SPID=$!
kill -STOP "$RPID"
peak=0
for i in $(seq 1 20); do
	r=$(rss "$SPID")
	[ "${r:-0}" -gt "$peak" ] && peak=$r
	sleep 0.1
done
if kill -0 "$SPID" 2>/dev/null; then ok "receiver stopped: sender waits"; else
	fail "receiver stopped: the sender ended"; fi
if [ "$peak" -gt 0 ] && [ "$peak" -lt $((48 * 1024)) ]; then
	ok "receiver stopped: sender resident ${peak} KiB"
else
	fail "receiver stopped: sender resident ${peak} KiB (bound 48 MiB)"
fi
kill -CONT "$RPID"
wait "$SPID"
expect_eq "1 GiB: sender exit" $? 0
wait "$RPID"
expect_eq "1 GiB: receiver exit" $? 0
expect_eq "1 GiB: count confirmed" "$(json_get stream_bytes "$T/rerr")" $((1 << 30))
wait "$HPID" 2>/dev/null

# 8. -B sizes the receiver's own pipe: with its standard output's reader
# stopped, a receiver with -B 64M holds more than the default 8 MiB pipe
# could, and one with -B 1M stays near its megabyte (TCP's backpressure
# holds the rest in the sender). Then everything arrives.
for B in 64M 1M; do
	rm -f "$T/ofifo"
	mkfifo "$T/ofifo"
	# The reader opens the FIFO, then stops itself until kill -CONT.
	(exec <"$T/ofifo" && kill -STOP "$BASHPID" && exec cat >/dev/null) &
	CPID=$!
	start_from "$T/ofifo" "$T/rerr" tcp:127.0.0.1:0 -B "$B"
	# Before it accepts, the receiver has no pipe: its resident base
	# (larger under a sanitizer), from which the growth is judged.
	base=$(rss "$RPID")
	head -c $((128 << 20)) /dev/zero | "$CAT" -q --to "tcp:127.0.0.1:$PORT" 2>"$T/serr" &
	SPID=$!
	peak=0
	d=$(deadline 3)
	# -B 64M: until the receiver holds 48 MiB; -B 1M: a 3 s look.
	while fcmp "$(now_s)" '<' "$d"; do
		r=$(rss "$RPID")
		[ "${r:-0}" -gt "$peak" ] && peak=$r
		[ "$B" = 64M ] && [ $((peak - base)) -gt $((48 * 1024)) ] && break
		sleep 0.05
	done
	grow=$((peak - base))
	echo "# -B $B on the receiver, its reader stopped: resident ${peak} KiB, ${grow} KiB over its base"
	if [ "$B" = 64M ]; then
		if [ "$grow" -gt $((48 * 1024)) ]; then ok "--from tcp: -B 64M: its pipe holds more"
		else fail "--from tcp: -B 64M: grew ${grow} KiB, not over 48 MiB (-B not applied?)"; fi
	elif [ "$base" -gt 0 ] && [ "$grow" -lt $((5 * 1024)) ]; then
		ok "--from tcp: -B 1M: grew ${grow} KiB"
	else
		fail "--from tcp: -B 1M: grew ${grow} KiB over ${base} KiB (bound 5 MiB; the default pipe is 8)"
	fi
	kill -CONT "$CPID"
	wait "$SPID"
	expect_eq "-B $B receiver: sender exit" $? 0
	wait "$RPID"
	expect_eq "-B $B receiver: receiver exit" $? 0
	expect_eq "-B $B receiver: count" "$(json_get stream_bytes "$T/rerr")" $((128 << 20))
	wait "$CPID"
done

# The pipes' capacity: the sender's is 1 MiB unless -B sets it (at least two
# pages), the receiver's the default 8 MiB; --json says which.
printf x >"$T/in"
for opt in "" "-B 4M" "--page-size 1M"; do
	case $opt in "") want=$((1 << 20)) ;; -B*) want=$((4 << 20)) ;; *) want=$((2 << 20)) ;; esac
	start_from "$T/out" "$T/rerr"
	# shellcheck disable=SC2086 # $opt is zero or two words
	"$CAT" -q --json --wait 30 $opt --to "tcp:127.0.0.1:$PORT" "$T/in" 2>"$T/serr"
	expect_eq "--to tcp: [$opt]: sender exit" $? 0
	wait "$RPID"
	expect_eq "--to tcp: [$opt]: receiver exit" $? 0
	expect_eq "--to tcp: [$opt]: sender's capacity" "$(json_get capacity "$T/serr")" "$want"
	expect_eq "--to tcp: [$opt]: receiver's capacity" "$(json_get capacity "$T/rerr")" $((8 << 20))
done

# The receiver's output fails (/dev/full): its confirmation waits for the
# output, so the sender does not end 0 with nothing delivered, and says why.
for n in 1000 $((3 << 20)); do
	head -c "$n" "$T/in64" >"$T/in"
	start_from /dev/full "$T/rerr"
	"$CAT" -q --wait 30 --to "tcp:127.0.0.1:$PORT" "$T/in" 2>"$T/serr"
	expect_eq "receiver to /dev/full ($n B): sender exit" $? 4
	expect_grep "receiver to /dev/full ($n B): sender's message" \
		"could not write the stream out" "$T/serr"
	wait "$RPID"
	expect_eq "receiver to /dev/full ($n B): receiver exit" $? 3
done

# Ports are 16 bits: 70000 is no port (getaddrinfo() alone took it as 4464).
expect_usage "--from tcp: port 70000" "not \[HOST\]:PORT" --wait 1 --from tcp:127.0.0.1:70000
expect_usage "--from tcp: port 65536" "not \[HOST\]:PORT" --wait 1 --from tcp:127.0.0.1:65536
expect_usage "--to tcp: port 999999" "not HOST:PORT" --wait 1 --to tcp:127.0.0.1:999999
# --wait 0 is a single look for a connection, not a wait for ever.
timeout 10 "$CAT" -q --wait 0 --from tcp:127.0.0.1:0 >/dev/null 2>"$T/err"
expect_eq "--from tcp: --wait 0: a single look" $? 4
expect_grep "--from tcp: --wait 0: message" "nobody connected" "$T/err"
# A network that cannot be reached is not retried for ever ("refused" is).
if unshare -n true 2>/dev/null; then
	timeout 10 unshare -n "$CAT" -q --to tcp:10.1.2.3:5000 "$T/in" 2>"$T/err"
	expect_eq "--to tcp: unreachable network: exit" $? 4
	expect_grep "--to tcp: unreachable network: message" "unreachable" "$T/err"
else
	echo "skip: unshare -n (not root?)"
fi

cli_done
