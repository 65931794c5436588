/*
 * lock.pml - the futex mutex of the lock words (core/lock.h, up__lock_take()
 * and up__lock_drop()): the writers' lock word, and the readers' lock.
 *
 * The word is 0 (free) or the holder's id, with the WAITERS bit once a
 * waiter set it before sleeping. lock_drop() exchanges the word to 0 and,
 * when the bit was set, wakes one sleeper. A waiter that finds the lock
 * free takes it with the bit it found; one that has slept takes it with
 * the bit set whatever it found (the drop that woke it cleared the bit,
 * and others may still sleep behind it).
 *
 * N threads take and drop the lock ROUNDS times each. The properties:
 * mutual exclusion (an assertion in the critical section), and no thread
 * left blocked in futex_wait at the end (pan's invalid end state check,
 * -DSAFETY): every sleeper is woken by someone. The library also cuts each
 * sleep into 50 ms slices, so a lost wake there is a stall, not a hang;
 * like wake.pml, the model leaves the slices out so that a lost wake shows.
 * Spinning and yielding are left out: they only add ways to retry.
 *
 * -DDEATH adds a holder that takes the free lock (a fresh take, so without
 * the bit) and dies inside. A waiter that finds it dead takes the lock
 * over (up__lock_owner_gone()), with the bit it found and its own `keep`;
 * nobody wakes sleepers for a dead holder, so while it is dead a sleeper's
 * slice may end (the only timeout modelled). The takeover is a take like
 * any other: one by a waiter that slept must set the bit too.
 *
 * -DPOLLER adds a poll-mode end (up_poll_arm() on a writer that found the
 * lock held, wlock.c up__wlock_poll_arm()): it takes the lock like a fresh taker;
 * finding it held, it counts itself in the lock's npoll, sets the bit and
 * arms a futex wait on the word in its own ring, then returns to its event
 * loop. That loop may come back after the wake (disarm: npoll--, then a
 * fresh take) or never (it stays armed, its wait queued or not). So a
 * drop that finds the bit wakes every sleeper while npoll is not 0: a wake
 * for one could go to the poller and leave a blocked thread asleep.
 *
 * Hand-off (lock.c, up__lock_pass()): a waiter about to sleep puts its
 * id in `handoff` if that is 0 (queued). A drop first looks there; one it
 * finds (it may miss a registration: the look is relaxed) it claims by
 * clearing it, then exchanges the word straight to that id with the bit,
 * and wakes every sleeper. A waiter that finds the word naming itself
 * while queued holds the lock; one that takes it another way clears its
 * own registration if still there. The model asserts that the word names
 * a taker only while it is queued. (The code also confirms, with a CAS, a
 * word naming a taker that is not queued: one handed to it after it gave
 * up waiting for a claimed word, which needs a slice that the model does
 * not have.)
 *
 * -DTIMEOUT: each thread may time out once, before a sleep: it takes its
 * id back out of handoff and gives the round up, unless a drop claimed it
 * first; then it waits for the word. (The code waits a slice at most,
 * claimed_wait() in lock.c, since a peer's store over handoff looks the
 * same; the model has no slices and no such peer, so its wait ends when
 * the word comes.)
 *
 * -DMUTANT=1: a waiter that slept takes the lock without the bit (the code
 * before 3d558e2): the second of two sleepers is never woken.
 * -DMUTANT=2: lock_drop() does not wake (the bit ignored).
 * -DMUTANT=3 (with DEATH): the takeover without `keep`.
 * -DMUTANT=4 (with POLLER): lock_drop() wakes one even with a poller armed.
 * -DMUTANT=5: a drop that hands the word over wakes one sleeper, not all.
 * -DMUTANT=6: a waiter that takes the lock another way stays in handoff.
 * -DMUTANT=7 (with TIMEOUT): a timeout gives up even when claimed.
 */
#ifndef N
#define N 3
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define W 128 /* UP_LOCK_WAITERS */

byte word;     /* the lock word: 0, or id (1..N), | W */
bit inq[N + 1]; /* futex wait queue: thread i is blocked in futex_wait
		  (index N: the poller's armed wait) */
byte npoll;    /* poll-mode ends armed on the word */
byte incs;     /* threads in the critical section */
byte handoff;  /* the queued sleeper's id, 0 = none */
#define DEAD 9 /* the id of a holder that died inside */

/* futex_wake(word, 1): dequeue one blocked thread, any of them. */
inline futex_wake_one()
{
	atomic {
		if
		:: inq[0] -> inq[0] = 0
		:: N > 1 && inq[1] -> inq[1] = 0
		:: N > 2 && inq[2] -> inq[2] = 0
		:: N > 3 && inq[3] -> inq[3] = 0
		:: inq[N] -> inq[N] = 0
		:: else -> skip
		fi
	}
}

inline futex_wake_all()
{
	atomic {
		byte k;
		for (k : 0 .. N) {
			inq[k] = 0
		}
	}
}

/* lock_drop(): claim a queued sleeper, if seen; xchg(word, it or 0); a
 * word handed over wakes every sleeper; else, with the bit, every sleeper
 * while a poller is armed, else one. */
inline lock_drop(cur, nx)
{
	nx = 0;
	atomic {
		if
		:: handoff != 0 -> nx = handoff | W; handoff = 0
		:: true -> skip /* the relaxed look missed it */
		fi
	}
	atomic { cur = word; word = nx }
	if
#if MUTANT == 5
	:: nx != 0 -> futex_wake_one()
#else
	:: nx != 0 -> futex_wake_all()
#endif
	:: else ->
#if MUTANT != 2
		if
#if MUTANT == 4
		:: cur & W -> futex_wake_one()
#else
		:: (cur & W) && npoll != 0 -> futex_wake_all()
		:: (cur & W) && npoll == 0 -> futex_wake_one()
#endif
		:: else -> skip
		fi
#else
		skip
#endif
	fi
}

proctype Thread(byte me)
{
	byte id = me + 1, cur, nx, keep, r = 0;
	bit queued, handed, timedout;

	do
	:: r < ROUNDS ->
		/* lock_take() */
		keep = 0;
		atomic {
			if
			:: word == 0 -> word = id; goto locked
			:: else -> skip
			fi
		}
retry:
		cur = word;
		if
		:: (cur & ~W) == id -> assert(queued); goto locked /* handed to us */
		:: else -> skip
		fi;
		if
		:: (cur & ~W) == 0 ->
			/* CAS(word, cur -> id | (cur & W) | keep) */
			atomic {
				if
				:: word == cur -> word = id | (cur & W) | keep; goto taken
				:: else -> skip
				fi
			}
			goto retry
		:: else -> skip
		fi;
#ifdef DEATH
		if
		:: (cur & ~W) == DEAD ->
			/* the holder is gone: CAS(word, cur -> id | (cur & W) | keep) */
			atomic {
				if
#if MUTANT == 3
				:: word == cur -> word = id | (cur & W); goto taken
#else
				:: word == cur -> word = id | (cur & W) | keep; goto taken
#endif
				:: else -> skip
				fi
			}
			goto retry
		:: else -> skip
		fi;
#endif
		if
		:: (cur & W) == 0 ->
			/* CAS(word, cur -> cur | W) */
			atomic {
				if
				:: word == cur -> word = cur | W
				:: else -> goto retry
				fi
			}
		:: else -> skip
		fi;
		if
		:: handed -> goto retry /* the word is on its way: yield */
		:: else -> skip
		fi;
		/* queue: CAS(handoff, 0 -> id) */
		atomic {
			if
			:: !queued && handoff == 0 -> handoff = id; queued = 1
			:: else -> skip
			fi
		}
#ifdef TIMEOUT
		if
		:: !timedout ->
			timedout = 1;
			/* unqueue: CAS(handoff, id -> 0); failed: claimed */
			atomic {
				if
				:: !queued -> goto gaveup
				:: queued && handoff == id -> handoff = 0; queued = 0; goto gaveup
				:: else -> skip
				fi
			}
#if MUTANT == 7
			goto gaveup;
#endif
			handed = 1;
			goto retry
		:: true -> skip
		fi;
#endif
		/* futex_wait(word, cur | W): one step that returns if the word
		 * differs or else enqueues; then blocked until dequeued. */
		atomic {
			if
			:: word == (cur | W) -> inq[me] = 1
			:: else -> skip
			fi
		}
#ifdef DEATH
		if
		:: inq[me] == 0 -> skip
		:: atomic { inq[me] == 1 && (word & ~W) == DEAD -> inq[me] = 0 } /* slice ends */
		fi;
#else
		(inq[me] == 0);
#endif
#if MUTANT == 1
		keep = 0;
#else
		keep = W;
#endif
		goto retry;
taken:
#if MUTANT != 6
		/* unqueue, if still there */
		atomic {
			if
			:: queued && handoff == id -> handoff = 0
			:: else -> skip
			fi
		}
#endif
locked:
		queued = 0;
		handed = 0;
		incs++;
		assert(incs == 1);
		incs--;
		lock_drop(cur, nx);
		r++;
		goto next;
gaveup:
		queued = 0;
		handed = 0;
		r++;
next:
		skip
	:: else -> break
	od
}

#ifdef POLLER
#define PID (N + 1)
/* A poll-mode end: every call is a fresh take; it never blocks. */
proctype Poller()
{
	byte cur, nx, r = 0;

	do
	:: r < ROUNDS ->
		atomic {
			if
			:: word == 0 -> word = PID; goto locked
			:: else -> skip
			fi
		}
		/* up__wlock_poll_arm(): count in, set the bit while held, arm */
		npoll++;
		cur = word;
		if
		:: (cur & ~W) == 0 -> npoll--; goto next /* free again: ready */
		:: else -> skip
		fi;
		if
		:: (cur & W) == 0 ->
			atomic {
				if
				:: word == cur -> word = cur | W
				:: else -> npoll--; goto next /* changed: ready */
				fi
			}
		:: else -> skip
		fi;
		atomic {
			if
			:: word == (cur | W) -> inq[N] = 1
			:: else -> skip
			fi
		}
		/* Back in the event loop: it may never look again. */
		if
		:: goto gone
		:: skip
		fi;
		(inq[N] == 0); /* the completion arrives */
		if
		:: goto gone
		:: npoll--
		fi;
		goto next;
locked:
		incs++;
		assert(incs == 1);
		incs--;
		lock_drop(cur, nx);
		r++;
next:
		skip
	:: else -> break
	od;
gone:
	skip
}
#endif

#ifdef DEATH
/* Takes the lock when it is free, as a fresh taker does, and dies in it. */
proctype Dier()
{
	atomic { word == 0 -> word = DEAD }
}
#endif

init {
	byte i;

	atomic {
		for (i : 0 .. N - 1) {
			run Thread(i)
		}
#ifdef DEATH
		run Dier()
#endif
#ifdef POLLER
		run Poller()
#endif
	}
}
