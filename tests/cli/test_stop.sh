#!/usr/bin/env bash
# Stopped and continued (SIGSTOP/SIGCONT, as Ctrl-Z and fg) while the reader
# thread waits for input on a FIFO: the copy goes on. With io_uring file I/O
# the interrupted wait used to return with no completion, and the tool took
# the empty queue's -EAGAIN for a read error ("-: Resource temporarily
# unavailable", exit 1), losing the rest of the input.
# usage: test_stop.sh /path/to/uringpipe-cat
# shellcheck source=tests/cli/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cli_init "$@"
trap '' PIPE # a write into the FIFO of a tool that died is an error, not our death

# state PID: the one-letter state of a process (R, S, T, ...), or empty if gone.
state() { sed -n 's/^[0-9]* (.*) \([A-Za-z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null; }

# wait_for WHAT CMD...: until CMD succeeds, 10 s at most.
wait_for() {
	local what=$1 i
	shift
	for ((i = 0; i < 1000; i++)); do
		"$@" && return 0
		sleep 0.01
	done
	fail "$what: not within 10 s"
	return 1
}

# every thread of PID asleep (S): the reader thread in its read, the writer
# thread waiting for data.
all_asleep() {
	local f s
	for f in /proc/"$1"/task/*/stat; do
		s=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\).*/\1/p' "$f" 2>/dev/null)
		[ "$s" = S ] || return 1
	done
}
is_stopped() { [ "$(state "$1")" = T ]; }
not_stopped() { [ "$(state "$1")" != T ]; }

stop_variant() {
	local name=$1 pid line rc
	shift
	rm -f "$T/fin" "$T/fout"
	mkfifo "$T/fin" "$T/fout"
	exec 8<>"$T/fout" # the consumer: open before the tool, read line by line
	"$CAT" -q "$@" <"$T/fin" >"$T/fout" 2>"$T/err" &
	pid=$!
	exec 7>"$T/fin"
	echo first >&7
	if read -r -t 10 -u 8 line; then expect_eq "$name: first line" "$line" first; else
		fail "$name: first line not copied within 10 s"; fi
	wait_for "$name: both threads asleep" all_asleep "$pid"
	kill -STOP "$pid"
	wait_for "$name: stopped" is_stopped "$pid"
	kill -CONT "$pid"
	wait_for "$name: continued" not_stopped "$pid"
	echo second >&7
	exec 7>&-
	if read -r -t 10 -u 8 line; then expect_eq "$name: line after SIGCONT" "$line" second
	else fail "$name: no line after SIGCONT within 10 s"; fi
	wait "$pid"
	rc=$?
	exec 8<&-
	expect_eq "$name: exit" "$rc" 0
	if [ -s "$T/err" ]; then fail "$name: stderr: $(cat "$T/err")"; else
		ok "$name: nothing on stderr"; fi
}

stop_variant "io_uring"
stop_variant "readv/writev" --no-uring

cli_done
