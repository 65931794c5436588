/* SPDX-License-Identifier: MIT */
/*
 * wake.pml - the sleep/wake handshake of core/wake.h, as core/wait.c and core/wake.c run it
 * on the readers' line (rd_wait): readers sleep in wait_ready(), writers
 * wake them in wake_line() after publishing (publish()/try_merge()) and
 * after the last close (up_close(): writers -= 1, then wake).
 *
 *   spin -a wake.pml            the code as it is: all handshake accesses
 *                               seq_cst, modelled as sequentially consistent
 *   spin -DBROKEN -a wake.pml   the progress store may become visible after
 *                               the waker's load of nwait (store buffering:
 *                               what a release store, or a missing fence,
 *                               allows on x86-TSO and on arm64)
 *   spin -DBROKEN -DFENCED ...  the same stores, with the sleeper running
 *                               membarrier() between its announcement and
 *                               its re-check (wait.c, up__wait_fence()):
 *                               every writer's buffer is drained at once,
 *                               as a full barrier on every CPU does. The
 *                               lone writer's release store of len relies
 *                               on this (writer.h, up__merge_close()).
 *
 * Checked (pan -DSAFETY): no invalid end state, i.e. the run never stops
 * with a reader blocked in futex_wait; the readers leave only at end of
 * stream, so every final state has had all data read and EOF seen; and the
 * assertions below (EOF is reported only after every byte was consumed).
 * A reader stuck in futex_wait while the stream has ended is exactly the
 * lost wakeup. Note that the library also bounds every sleep by a 50 ms
 * slice (UP_WAIT_SLICE_NS): a lost wakeup there costs latency, not a hang.
 * The model has no timeouts on purpose: the handshake must be right by
 * itself. Spurious futex returns are allowed, at most MAXSPUR per reader
 * (an unbounded number would always offer a way out of a lost wakeup and
 * hide it from the end-state check).
 *
 * Bounds: NR readers (2), NW writers (1 or 2), ITEMS publications each.
 * Progress is a count per writer (a writer publishes only its own; the
 * writers' lock serialises them in the library, which is immaterial here).
 * A reader "reads" by taking one published item (consumed += 1) under the
 * readers' lock, which is one atomic step here.
 *
 * Wake one. A publish wakes one sleeper (FUTEX_WAKE 1: any one of the
 * blocked readers, chosen nondeterministically), a close wakes all. Two
 * rules keep that from stranding data (core/wake.h): a woken sleeper clears
 * pending once it is up, and a reader that leaves data behind while others
 * sleep wakes one of them (up__chain_wake() in reader.c). To exercise the second,
 * reader 0 may stop after any successful read, as an application that reads
 * once and goes away would, leaving the rest to the others. MUTANT 4 drops
 * the chain wake, MUTANT 5 the clearing after a wake; both must fail.
 *
 * Simplification: ready() (rd_ready) is evaluated in one step. In wait.c it
 * is a few seq_cst loads of monotone words (pos, head, len, writers); the
 * handshake argument only needs that it runs after the sleeper's nwait
 * increment, which both versions respect.
 */

#ifndef NR
#define NR 2
#endif
#if NR > 2
#error "wake_line's wake-one picks between readers 0 and NR-1: NR <= 2"
#endif
#ifndef NW
#define NW 2
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef MAXSPUR
#define MAXSPUR 1
#endif
/* Deliberate bugs, to show that the check has teeth (run_model.sh expects
 * each to fail): 1 = the sleeper clears pending before it reads seq;
 * 2 = it never clears pending; 3 = it re-checks before announcing itself. */
#ifndef MUTANT
#define MUTANT 0
#endif

/* rd_wait line */
byte seq;          /* the futex word (wraps harmlessly: byte arithmetic) */
byte nwait;        /* sleepers announced */
bit  pending;      /* a waker bumped seq and no sleeper has cleared it */
bit  inq[NR];      /* futex wait queue: reader i is blocked in futex_wait */

/* the stream */
byte prog[NW];     /* items published by each writer (visible values) */
byte consumed;     /* items taken by the readers */
byte writers = NW; /* open writers (state.writers) */

#define PUBLISHED (prog[0] + (NW > 1 -> prog[NW - 1] : 0))
#define TOTAL     (NW * ITEMS)
/* rd_ready(): a byte to read, or end of stream */
#define READY     (consumed < PUBLISHED || writers == 0)

#ifdef BROKEN
/*
 * Per-writer store buffer (FIFO) of progress stores: 0 = "publish one
 * item", 1 = "writers -= 1". The writer's own loads of nwait/pending go to
 * memory, so they can complete while its stores wait here. A locked RMW
 * (xchg, fetch_add) drains the buffer first, as on x86.
 */
chan sb[NW] = [ITEMS + 1] of { bit };
#define STORE_PUB(w)   sb[w]!0
#define STORE_CLOSE(w) sb[w]!1
#define DRAINED(w)     empty(sb[w])

proctype Flusher(byte w)
{
	bit kind;
end_idle:
	do
	:: atomic {
		sb[w]?kind ->
		if
		:: kind == 0 -> prog[w]++
		:: else -> writers--
		fi
	   }
	od
}
/* membarrier(): every writer's buffer drained, in one step. */
inline membarrier()
{
	atomic {
		i = 0;
		do
		:: i < NW ->
			do
			:: nempty(sb[i]) ->
				sb[i]?k_;
				if
				:: k_ == 0 -> prog[i]++
				:: else -> writers--
				fi
			:: empty(sb[i]) -> break
			od;
			i++
		:: else -> break
		od;
		i = 0
	}
}
#else
#define STORE_PUB(w)   prog[w]++
#define STORE_CLOSE(w) writers--
#define DRAINED(w)     true
#endif

/* wake_line(): load nwait; xchg(pending, 1); seq += 1; futex_wake(nr):
 * ALL = 1 wakes every blocked reader, else one of them (any). A wake for
 * all goes out even when pending is set: the wake in flight may be for one
 * reader only (MUTANT 6 lets pending swallow it; that must fail). */
inline wake_line(w, ALL)
{
	if
	:: nwait == 0 -> skip                 /* nobody asleep: no syscall */
	:: else ->
		atomic { DRAINED(w) -> old = pending; pending = 1 }
		if
#if MUTANT != 6
		:: old == 0 || ALL ->
#else
		:: old == 0 ->
#endif
			atomic { DRAINED(w) -> seq++ }
			atomic {                        /* FUTEX_WAKE */
				if
				:: ALL ->
					i = 0;
					do
					:: i < NR -> inq[i] = 0; i++
					:: else -> break
					od
				:: else ->  /* exactly one, if any is blocked: either */
					if
					:: inq[0] -> inq[0] = 0
					:: inq[NR - 1] -> inq[NR - 1] = 0
					:: else -> skip
					fi
				fi;
				i = 0
			}
		:: else -> skip                 /* a wake is in flight */
		fi
	fi
}

proctype Writer(byte w)
{
	byte n = 0;
	bit old;
	byte i;

	do
	:: n < ITEMS ->
		STORE_PUB(w);                   /* [head] or [len], seq_cst */
		wake_line(w, 0);                /* new data: one reader */
		n++
	:: else -> break
	od;
#ifndef NOCLOSE
	STORE_CLOSE(w);                         /* up_close: writers -= 1 */
	wake_line(w, 1)                         /* end of stream: all */
#endif
}

#ifdef NOCLOSE
/*
 * NOCLOSE: the writers publish and then stay open, idle. A close wakes every
 * reader, which would mask a wake of data that went astray; without it, a
 * reader left asleep with data to read is stuck for good. When nothing in
 * the system can move any more (Spin's timeout), every item must have been
 * read. Readers blocked in futex_wait are then a valid end (end_wait).
 */
active proctype Monitor()
{
end_mon:
	timeout -> assert(consumed == PUBLISHED)
}
#endif

proctype Reader(byte id)
{
	byte s;
	bit wsnap, got, r, old, k_;
	byte spur = 0, i;

read:	/* up__ring_read(): load writers, then read under the lock */
	wsnap = (writers != 0);
	atomic {
		if
		:: consumed < PUBLISHED -> consumed++; got = 1
		:: else -> got = 0
		fi
	}
	if
	:: got -> 
		if
		:: id == 0 ->                   /* stop here, for good */
#if MUTANT != 4
			/* chain_wake(): sleepers, and data left behind */
			if
			:: nwait != 0 && consumed < PUBLISHED -> wake_line(0, 0)
			:: else -> skip
			fi;
#endif
			goto done
		:: true -> goto read
		fi
	:: !got && !wsnap ->
		assert(consumed == TOTAL);      /* EOF only after every item */
		goto done
	:: else -> skip
	fi;

sleep:	/* wait_ready() after the spin phase */
#if MUTANT == 1
	pending = 0;                            /* cleared before s is read */
	s = seq;
#elif MUTANT == 2
	s = seq;                                /* pending never cleared */
#else
	s = seq;
	pending = 0;
#endif
#if MUTANT == 3
	r = READY;                              /* re-check before announcing */
	nwait++;
#else
	nwait++;
#if defined(BROKEN) && defined(FENCED)
	membarrier();
#endif
	r = READY;
#endif
	if
	:: r -> skip
	:: else ->
		atomic {                        /* futex_wait(&seq, s) */
			if
			:: seq != s -> skip     /* -EAGAIN: value changed */
			:: else -> inq[id] = 1
			fi
		}
#ifdef NOCLOSE
end_wait:
#endif
		if
		:: inq[id] == 0 -> skip         /* woken (or never slept) */
		:: atomic { inq[id] == 1 && spur < MAXSPUR -> inq[id] = 0; spur++ }
		fi;
#if MUTANT != 5
		pending = 0;                    /* up again: next wake is ours to see */
#endif
		r = READY
	fi;
	nwait--;
	if
	:: r -> goto read
	:: else -> goto sleep
	fi;
done:
	skip
}

init
{
	byte i;

	atomic {
		i = 0;
		do
		:: i < NW ->
#ifdef BROKEN
			run Flusher(i);
#endif
			run Writer(i);
			i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NR -> run Reader(i); i++
		:: else -> break
		od
	}
}
