#!/usr/bin/env bash
# uringpipe-cat must be byte-identical to cat: sizes around the ring size,
# several inputs, stdin, '-', pipes and sockets as input, and each file I/O
# backend (io_uring, readv/writev) and wake backend (io_uring, futex).
# usage: test_copy.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"

ring=65536 # -B 64K --page-size 4K below: the ring holds exactly this much
for n in 0 1 4095 4096 4097 $((ring - 1)) $ring $((ring + 1)) $((3 * ring + 7)) 1048577; do
	head -c "$n" /dev/urandom >"$T/in.$n"
done

run_variant() {
	local name=$1
	shift
	for n in 0 1 4095 4096 4097 $((ring - 1)) $ring $((ring + 1)) $((3 * ring + 7)) 1048577; do
		"$@" "$CAT" -q -B 64K --page-size 4K "$T/in.$n" >"$T/out" 2>"$T/err"
		expect_eq "$name: $n B exit" "$?" 0
		same_file "$name: $n B" "$T/in.$n" "$T/out"
	done
	# Several files, stdin in the middle as '-', then a file again.
	cat "$T/in.1" "$T/in.$ring" "$T/in.4097" "$T/in.0" "$T/in.1048577" >"$T/want"
	"$@" "$CAT" -q -B 64K --page-size 4K "$T/in.1" - "$T/in.4097" "$T/in.0" "$T/in.1048577" \
		<"$T/in.$ring" >"$T/out"
	expect_eq "$name: several files exit" "$?" 0
	same_file "$name: several files with '-'" "$T/want" "$T/out"
	# No argument: stdin, here a pipe that delivers short reads.
	# shellcheck disable=SC2002 # a pipe as input, on purpose
	cat "$T/in.1048577" | "$@" "$CAT" -q -B 64K --page-size 4K >"$T/out"
	same_file "$name: stdin from a pipe" "$T/in.1048577" "$T/out"
	# Output into a pipe.
	"$@" "$CAT" -q "$T/in.1048577" | cat >"$T/out"
	same_file "$name: stdout into a pipe" "$T/in.1048577" "$T/out"
	# Default options, the file larger than the default ring (8 MiB).
	"$@" "$CAT" -q "$T/big" >"$T/out"
	same_file "$name: 9 MiB with default options" "$T/big" "$T/out"
}

head -c $((9 * 1024 * 1024 + 3)) /dev/urandom >"$T/big"
run_variant "io_uring" env
run_variant "readv/writev" env UPCAT_NO_URING=1
run_variant "futex" env UP_FORCE_FUTEX=1
run_variant "UPCAT_NO_URING=0" env UPCAT_NO_URING=0 # 0 means "do use io_uring"

# --no-uring: the summary must say which file I/O ran.
"$CAT" -q --no-uring --json "$T/in.4097" >"$T/out" 2>"$T/err"
same_file "--no-uring copy" "$T/in.4097" "$T/out"
expect_grep "--no-uring uses readv/writev" "\"file_io\":\"readv/writev\"" "$T/err"

# /dev/zero slice and a stdin that the shell already partly consumed.
head -c 100000 /dev/zero >"$T/zero"
head -c 100000 /dev/zero | "$CAT" -q >"$T/out"
same_file "/dev/zero slice via a pipe" "$T/zero" "$T/out"
{ head -c 4096 >/dev/null; "$CAT" -q; } <"$T/in.$ring" >"$T/out"
tail -c +4097 "$T/in.$ring" >"$T/want"
same_file "stdin continues at the caller's file position" "$T/want" "$T/out"

# A Unix socket as input and as output (python3 only: bash has no socketpair).
if have_python; then
	python3 - "$CAT" "$T/in.1048577" "$T/out" <<'PY'
import socket, subprocess, sys, threading
cat, src, dst = sys.argv[1:4]
data = open(src, "rb").read()
a, b = socket.socketpair()   # input socket
c, d = socket.socketpair()   # output socket
p = subprocess.Popen([cat, "-q"], stdin=b.fileno(), stdout=c.fileno())
b.close(); c.close()
def feed():
    a.sendall(data); a.shutdown(socket.SHUT_WR)
threading.Thread(target=feed).start()
out = bytearray()
while True:
    k = d.recv(1 << 20)
    if not k: break
    out += k
sys.exit(0 if p.wait() == 0 and bytes(out) == data else 1)
PY
	expect_eq "Unix sockets in and out" "$?" 0
else
	echo "skip: sockets (no python3)"
fi

cli_done
