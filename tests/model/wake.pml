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
 * POLLER: reader NR-1 is instead a poll-mode end of the writers' own
 * process (core/poll.c, uring/poll_ring.c): it reads until it finds
 * nothing, arms (announced in nwait and npoll, a FUTEX_WAIT of bit POLL
 * queued, its entry in the poke table), waits for its fd to turn readable,
 * and disarms (entry out under the table's lock, no longer announced, the
 * CQ reaped; a wait that is still queued stays parked, and the next arm
 * takes it up). With a blocking reader beside it (NR 2), its loop may stop
 * for good after a read (with the chain wake up_read() makes) or when its
 * fd turned readable (still armed): the blocking reader, which then never
 * stops, must get the rest. With NR 1 it is alone and never stops. A wake takes the table's lock (or finds it busy and goes
 * on without), pokes the entry once per arm (the fd readable at once),
 * counts it as found, and makes no FUTEX_WAKE when found == nwait; else its
 * bits are SLEEP when found == npoll, which a wait of bit POLL does not
 * match, or every bit, and then it wakes all. PMUTANT 1: the parked wait matches every bit;
 * PMUTANT 2: the FUTEX_WAKE is left out whenever something was poked;
 * PMUTANT 3: a parked wait is taken up even after it completed (its CQE
 * reaped); PMUTANT 4: it is taken up though seq moved since the arm loaded
 * it (a queued wait compares nothing, so the arm compares for it, as a
 * FUTEX_WAIT would); PMUTANT 5: a wake of every bit stays a wake for one
 * when npoll, loaded earlier, was 0. Each strands a sleeper and must
 * fail.
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
#ifndef PMUTANT
#define PMUTANT 0
#endif
/* Blocking readers: all but the poll-mode end (POLLER, with NR 1: alone). */
#ifdef POLLER
#define NBLOCK (NR - 1)
#else
#define NBLOCK NR
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
byte npoll;        /* of nwait, the armed poll-mode end */
/* The poll-mode end (POLLER): its FUTEX_WAIT queued (bit POLL), its CQ not
 * empty (the fd readable), its poke-table entry and whether this arm was
 * poked, the table's lock, and whether its wait is parked. */
bit  pq, pcq, pentry, ppoked, pmu, pparked;

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
#ifdef POLLER
#define BITS_NONE  0
#define BITS_SLEEP 1
#define BITS_ANY   2
/* A FUTEX_WAKE of @bits ends the poll-mode end's queued wait? Its wait is
 * bit POLL (PMUTANT 1: every bit). */
#if PMUTANT == 1
#define PQ_MATCH(bits) (pq && bits != BITS_NONE)
#else
#define PQ_MATCH(bits) (pq && bits == BITS_ANY)
#endif
#define PQ_END pq = 0; pcq = 1
#else
#define PQ_MATCH(bits) false
#define PQ_END skip
#endif

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
#ifdef POLLER
			/* wake_line_slow(): a poll-mode end armed: every one. */
			all = ALL || npoll != 0;
			/* ring_wake(): the table's lock tried; the pokes, the
			 * count of what they found, and nwait and npoll loaded
			 * under it (up__uw_poke_begin()). */
			atomic {
				if
				:: pmu == 0 ->
					pmu = 1; locked = 1;
					found = 0;
					if
					:: pentry ->
						if
						:: !ppoked -> ppoked = 1; pcq = 1
						:: else -> skip
						fi;
						found = 1
					:: else -> skip
					fi;
					if
#if PMUTANT == 2
					:: found != 0 -> bits = BITS_NONE
#else
					:: found != 0 && nwait == found -> bits = BITS_NONE
#endif
					:: else ->
						if
						:: npoll == found -> bits = BITS_SLEEP
						:: else -> bits = BITS_ANY
						fi
					fi
				:: else ->
					locked = 0;
					if
					:: npoll == 0 -> bits = BITS_SLEEP
					:: else -> bits = BITS_ANY
					fi
				fi
			}
			/* A wake of every bit can end a poll-mode end's wait,
			 * whose loop may not act on it: it is for all (PMUTANT
			 * 5: not). */
#if PMUTANT != 5
			if
			:: bits == BITS_ANY -> all = 1
			:: else -> skip
			fi;
#endif
#else
			all = ALL;
			bits = 1;
#endif
			atomic {                        /* FUTEX_WAKE */
				if
				:: bits == 0 -> skip  /* the pokes reach every sleeper */
				:: all ->
					i = 0;
					do
					:: i < NR -> inq[i] = 0; i++
					:: else -> break
					od;
					if
					:: PQ_MATCH(bits) -> PQ_END
					:: else -> skip
					fi
				:: else ->  /* exactly one, if any is blocked: either */
					if
					:: inq[0] -> inq[0] = 0
					:: inq[NR - 1] -> inq[NR - 1] = 0
					:: PQ_MATCH(bits) -> PQ_END
					:: else -> skip
					fi
				fi;
				i = 0
			}
#ifdef POLLER
			if
			:: locked -> pmu = 0
			:: else -> skip
			fi
#endif
		:: else -> skip                 /* a wake is in flight */
		fi
	fi
}

proctype Writer(byte w)
{
	byte n = 0;
	bit old, all, locked;
	byte i, found, bits;

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
	bit wsnap, got, r, old, k_, all, locked;
	byte spur = 0, i, found, bits;

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
#ifndef POLLER
		:: id == 0 ->                   /* stop here, for good */
#else
		:: false ->                     /* the poll-mode end stops */
#endif
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

#ifdef POLLER
/*
 * The poll-mode end: up_read() until -EAGAIN (which looks at a parked wait:
 * up__ring_parked_look()), up_poll_arm(), the event loop's wait for the fd,
 * and the next up_read()'s disarm. No chain wake: it reads until it finds
 * nothing.
 */
proctype Poller()
{
	byte s;
	bit wsnap, got, r, k_, old, all, locked;
	byte i, found, bits;

read:
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
		:: goto read
		:: NBLOCK > 0 ->                /* its loop stops, for good */
			if
			:: nwait != 0 && consumed < PUBLISHED -> wake_line(0, 0)
			:: else -> skip
			fi;
			goto done
		fi
	:: !got && !wsnap ->
		assert(consumed == TOTAL);
		goto done
	:: else -> skip
	fi;
	/* -EAGAIN: a parked wait that completed is let go, its CQE reaped. */
	atomic {
		if
		:: pparked && !pq -> pparked = 0; pcq = 0
		:: else -> skip
		fi
	}
	/* up__ring_arm(): as a sleeper announces, npoll before nwait. */
	s = seq;
	pending = 0;
	npoll++;
	nwait++;
#if defined(BROKEN) && defined(FENCED)
	membarrier();
#endif
	r = READY;
	if
	:: r -> nwait--; npoll--; goto read
	:: else -> skip
	fi;
	/* ops->arm: take up the parked wait, or let it go and queue anew. */
	atomic {
		if
#if PMUTANT == 3
		:: pparked -> pparked = 0; pcq = 0
#elif PMUTANT == 4
		:: pparked && pq -> pparked = 0
#else
		:: pparked && pq && seq == s -> pparked = 0
#endif
		:: else ->
			pparked = 0; pq = 0; pcq = 0;   /* cancelled and reaped */
			if
			:: seq != s -> pcq = 1          /* -EAGAIN completion */
			:: else -> pq = 1
			fi
		fi
	}
	atomic { pmu == 0 -> pentry = 1; ppoked = 0 }   /* poke_add() */
#ifdef NOCLOSE
end_wait:
#endif
	pcq == 1;                                      /* epoll_wait() */
	if
	:: true -> skip
	:: NBLOCK > 0 -> goto done      /* a loop that never comes back, armed */
	fi;
	/* The next up_read(): disarm. */
	atomic { pmu == 0 -> pentry = 0 }               /* poke_del() */
	atomic {
		pcq = 0;                                /* reaped */
		if
		:: pq -> pparked = 1                    /* nothing completed */
		:: else -> pparked = 0
		fi
	}
	nwait--;
	npoll--;
	goto read;
done:
	skip
}
#endif

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
		:: i < NBLOCK -> run Reader(i); i++
		:: else -> break
		od;
#ifdef POLLER
		run Poller()
#endif
	}
}
