#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run_model.sh - exhaustive spin checks of the sleep/wake handshake
# (wake.pml), the publish protocol (publish.pml), the biased writers'
# lock (bias.pml) and the futex mutex under both locks (lock.pml); see
# README.md.
#
# Passes (exit 0) when every model of the code as written has no error AND
# every deliberately broken variant (the store-buffered progress store, and
# a few mutants) does report one: a check that finds nothing in a known bug
# proves nothing. Exit 1 otherwise, 77 when spin or a C compiler is missing.
# Works in the current directory (CTest runs it in a build subdirectory);
# scratch files go to ./model-run/. Prints the state counts of every run.
#
# Environment: CC (default cc), MODEL_BIG=1 adds wake.pml with 2 writers x
# 2 items (about 91 million states: 3-4 minutes and ~3 GB of memory),
# MODEL_JOBS (default: the CPUs) runs that many checks at once; their
# reports are printed in the order below once all have finished.
set -u

here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
if ! command -v spin >/dev/null 2>&1; then
	echo "SKIP: spin is not installed (Debian: apt-get install spin)"
	exit 77
fi
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "SKIP: no C compiler ($cc) to build pan"
	exit 77
fi

work=$PWD/model-run
rm -rf "$work"
mkdir -p "$work" || exit 1
fail=0
n=0

# check NAME MODEL EXPECT(pass|fail) SPIN-DEFINES...: one model run, its
# report on stdout; a failure leaves $work/NAME/failed. Run in the
# background by run (below).
check() {
	local name=$1 model=$2 expect=$3
	shift 3
	local dir=$work/$name
	mkdir -p "$dir"
	cp "$here/$model" "$dir/" || { touch "$dir/failed"; return; }
	if ! (cd "$dir" && spin "$@" -a "$model" >spin.log 2>&1); then
		echo "FAIL $name: spin -a failed"; cat "$dir/spin.log"; touch "$dir/failed"; return
	fi
	# A broken variant whose error lies beyond what an exhaustive search
	# can store is looked for with bitstate hashing (names ending _bs): an
	# error found that way is an error; none found would fail the check.
	local store=-DCOLLAPSE panargs=
	case $name in *_bs) store=-DBITSTATE panargs=-w31 ;; esac
	if [ "$store" = -DBITSTATE ] && [ "$expect" = pass ]; then
		echo "FAIL $name: a bitstate search cannot show that a model passes"
		touch "$dir/failed"; return
	fi
	if ! (cd "$dir" && "$cc" -O2 -w -DSAFETY $store -DMEMLIM=4096 -o pan pan.c \
		>cc.log 2>&1); then
		echo "FAIL $name: cannot compile pan.c"; cat "$dir/cc.log"; touch "$dir/failed"; return
	fi
	local t0=$SECONDS
	(cd "$dir" && ./pan -m300000 $panargs >pan.log 2>&1)
	local log=$dir/pan.log
	local errors stored trans what
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -n1)
	stored=$(awk '/states, stored/ {print $1}' "$log" | tail -n1)
	trans=$(awk '/transitions \(= stored\+matched\)/ {print $1}' "$log" | tail -n1)
	what=$(grep -m1 -o 'pan:1: [^(]*' "$log" | sed 's/pan:1: //; s/ *$//')
	printf '%-28s %-5s errors=%s states_stored=%s transitions=%s time=%ss%s\n' \
		"$name" "$expect" "${errors:-?}" "${stored:-?}" "${trans:-?}" \
		"$((SECONDS - t0))" "${what:+  ($what)}"
	if grep -q -e 'out of memory' -e 'max search depth too small' "$log"; then
		echo "FAIL $name: the search was incomplete"; tail -n 20 "$log"; touch "$dir/failed"; return
	fi
	if [ -z "$errors" ]; then
		echo "FAIL $name: no verdict from pan"; tail -n 20 "$log"; touch "$dir/failed"; return
	fi
	if [ "$expect" = pass ] && [ "$errors" != 0 ]; then
		echo "FAIL $name: the model of the code has an error; trail:"
		(cd "$dir" && spin "$@" -t -p "$model" | tail -n 60)
		touch "$dir/failed"
	elif [ "$expect" = fail ] && [ "$errors" = 0 ]; then
		echo "FAIL $name: the broken variant was NOT caught"
		touch "$dir/failed"
	elif [ "$expect" = fail ]; then
		# Keep the counterexample for whoever wants to read it.
		(cd "$dir" && spin "$@" -t -p -g "$model" >trail.txt 2>&1)
	fi
}

# Section headers and checks, in order: a header is printed as is, a check
# is started at once (at most $jobs at a time) and its report printed at the
# end in this order.
jobs=${MODEL_JOBS:-$(nproc 2>/dev/null || echo 1)}
order=()
section() {
	order+=("#$1")
}
run() {
	local name=$1
	mkdir -p "$work/$name"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	check "$@" >"$work/$name.report" 2>&1 &
	order+=("$name")
	n=$((n + 1))
}

echo "spin: $(spin -V 2>&1 | head -n1)"
section "== sleep/wake handshake (core/wake.h): 2 sleeping readers"
run wake_w2_i1          wake.pml pass -DNR=2 -DNW=2 -DITEMS=1
run wake_w1_i3          wake.pml pass -DNR=2 -DNW=1 -DITEMS=3
run wake_w2_i1_BROKEN   wake.pml fail -DNR=2 -DNW=2 -DITEMS=1 -DBROKEN
run wake_w1_i3_BROKEN   wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DBROKEN
# The sleeper's membarrier() makes the buffered progress store safe again
# (the lone writer's release store of len, with a fencing sleeper).
run wake_w1_i3_FENCED   wake.pml pass -DNR=2 -DNW=1 -DITEMS=3 -DBROKEN -DFENCED
# Mutants 1 and 2 lose a wake of data; with the writers closing, the close's
# wake for all repairs that before the end, so they are checked below, with
# the writers staying open.
run wake_mutant3        wake.pml fail -DNR=2 -DNW=2 -DITEMS=1 -DMUTANT=3
run wake_mutant6        wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DMUTANT=6
section "== the same, writers staying open (NOCLOSE): no data left asleep"
run wake_open_w2_i1     wake.pml pass -DNR=2 -DNW=2 -DITEMS=1 -DNOCLOSE
run wake_open_w1_i3     wake.pml pass -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE
run wake_open_BROKEN    wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE -DBROKEN
run wake_open_FENCED    wake.pml pass -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE -DBROKEN -DFENCED
run wake_open_mutant1   wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE -DMUTANT=1
run wake_open_mutant2   wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE -DMUTANT=2
run wake_open_mutant4   wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE -DMUTANT=4
run wake_open_mutant5   wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DNOCLOSE -DMUTANT=5
section "== the same with a poll-mode end of the writers' process: pokes, parking, futex bits"
run wake_poll_w1_i3     wake.pml pass -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER
run wake_poll_open_w1_i3 wake.pml pass -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE
run wake_poll_open_w2_i1 wake.pml pass -DNR=2 -DNW=2 -DITEMS=1 -DPOLLER -DNOCLOSE
run wake_poll_open_FENCED wake.pml pass -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DBROKEN -DFENCED
run wake_poll_open_BROKEN wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DBROKEN
run wake_poll_pmutant1  wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DPMUTANT=1
run wake_poll_pmutant2  wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DPMUTANT=2
# The poll-mode end alone (NR=1): nobody else reads what it sleeps through.
run wake_poll_solo_w1_i3 wake.pml pass -DNR=1 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE
run wake_poll_solo_w2_i2 wake.pml pass -DNR=1 -DNW=2 -DITEMS=2 -DPOLLER -DNOCLOSE
run wake_poll_pmutant3  wake.pml fail -DNR=1 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DPMUTANT=3
run wake_poll_pmutant4  wake.pml fail -DNR=1 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DPMUTANT=4
run wake_poll_pmutant5  wake.pml fail -DNR=2 -DNW=1 -DITEMS=3 -DPOLLER -DNOCLOSE -DPMUTANT=5
if [ "${MODEL_BIG:-0}" = 1 ]; then
	run wake_w2_i2      wake.pml pass -DNR=2 -DNW=2 -DITEMS=2
	run wake_w2_i1_FENCED wake.pml pass -DNR=2 -DNW=2 -DITEMS=1 -DBROKEN -DFENCED
	run wake_poll_w2_i1 wake.pml pass -DNR=2 -DNW=2 -DITEMS=1 -DPOLLER
fi
section "== publish protocol (core/writer.c, core/reader.c): merge vs retire"
run publish_s2_p2_b5    publish.pml pass
run publish_s4_p3_b7    publish.pml pass -DS=4 -DP=3 -DB=7
run publish_RETIRE      publish.pml fail -DBROKEN_RETIRE
run publish_REREAD      publish.pml fail -DBROKEN_REREAD
section "== writers' lock biased to a lone writer (core/wlock.h): TSO store buffers"
run bias_n2             bias.pml pass
run bias_n3             bias.pml pass -DN=3
run bias_nofence        bias.pml pass -DNOFENCE
run bias_nofence_idle   bias.pml pass -DNOFENCE -DIDLE
run bias_idle           bias.pml pass -DIDLE
run bias_mutant1        bias.pml fail -DMUTANT=1
run bias_mutant2        bias.pml fail -DMUTANT=2
run bias_nofence_mutant3 bias.pml fail -DNOFENCE -DMUTANT=3
run bias_idle_mutant4   bias.pml fail -DNOFENCE -DIDLE -DMUTANT=4
section "== the futex mutex of both locks (core/lock.h, lock.c, take.c): every sleeper is woken in turn"
run lock_n3_r2          lock.pml pass
run lock_n2_r3          lock.pml pass -DN=2 -DROUNDS=3
run lock_mutant1        lock.pml fail -DMUTANT=1
run lock_mutant2        lock.pml fail -DMUTANT=2
run lock_death_n3_r1    lock.pml pass -DDEATH -DROUNDS=1
run lock_death_n2_r3    lock.pml pass -DDEATH -DN=2 -DROUNDS=3
run lock_death_mutant3  lock.pml fail -DDEATH -DROUNDS=1 -DMUTANT=3
run lock_poller_n2_r2   lock.pml pass -DPOLLER -DN=2
run lock_poller_mutant4 lock.pml fail -DPOLLER -DN=2 -DMUTANT=4
section "== the hand-off to a queued sleeper (core/lock.c, up__lock_pass())"
run lock_handoff_mutant5 lock.pml fail -DMUTANT=5
run lock_timeout_n3_r1  lock.pml pass -DTIMEOUT -DROUNDS=1
run lock_timeout_n2_r4  lock.pml pass -DTIMEOUT -DN=2 -DROUNDS=4
run lock_timeout_death  lock.pml pass -DTIMEOUT -DDEATH -DN=2 -DROUNDS=3
section "== the take-back of a word handed too late (core/takeback.c, up__take_back())"
run lock_takeback_n3_r2 lock.pml pass -DTIMEOUT -DROUNDS=2 -DLAST_ROUNDS=1
run lock_takeback_noslice lock.pml pass -DTIMEOUT -DNOSLICE -DN=2 -DROUNDS=3
run lock_takeback_mutant6 lock.pml fail -DTIMEOUT -DNOSLICE -DN=2 -DROUNDS=3 -DMUTANT=6
run lock_takeback_mutant7 lock.pml fail -DTIMEOUT -DNOSLICE -DN=2 -DROUNDS=3 -DMUTANT=7
run lock_takeback_mutant9 lock.pml fail -DTIMEOUT -DNOSLICE -DN=2 -DROUNDS=3 -DMUTANT=9
run lock_takeback_mutant10 lock.pml fail -DTIMEOUT -DNOSLICE -DN=2 -DROUNDS=3 -DMUTANT=10
run lock_takeback_mutant11 lock.pml fail -DTIMEOUT -DROUNDS=2 -DLAST_ROUNDS=1 -DMUTANT=11
run lock_takeback_mutant12 lock.pml fail -DTIMEOUT -DROUNDS=2 -DLAST_ROUNDS=1 -DMUTANT=12
run lock_takeback_mutant13_bs lock.pml fail -DTIMEOUT -DROUNDS=2 -DMUTANT=13
section "== a take-back's claimer that dies inside its claim (core/takeback.c, up__dead_claim())"
run lock_claimdeath_n3  lock.pml pass -DTIMEOUT -DCLAIMDEATH -DROUNDS=1 -DFIRST_ROUNDS=2
run lock_claimdeath_mutant14 lock.pml fail -DTIMEOUT -DCLAIMDEATH -DROUNDS=1 -DFIRST_ROUNDS=2 -DMUTANT=14

wait
for item in "${order[@]}"; do
	case $item in
	\#*) echo "${item#\#}" ;;
	*)
		cat "$work/$item.report"
		[ -e "$work/$item/failed" ] && fail=1
		;;
	esac
done
if [ "$fail" != 0 ]; then
	echo "model check: FAILED (scratch files in $work)"
	exit 1
fi
echo "model check: $n runs as expected (counterexamples: $work/*/trail.txt)"
exit 0
