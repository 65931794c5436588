/*
 * lock.pml - the futex mutex of the lock words (core/lock.h, up__lock_take()
 * and up__lock_drop()): the writers' lock word, and the readers' lock.
 *
 * The word is 0 (free) or the holder's id, with the WAITERS bit once a
 * waiter set it before sleeping (and the claim bit, below, while the id is
 * a take-back's). lock_drop() exchanges the word to 0 and,
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
 * like wake.pml, the model leaves the slices out so that a lost wake shows
 * (but see TIMEOUT).
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
 * confirms it with a CAS and holds the lock; one that takes it another
 * way clears its own registration if still there.
 *
 * Each end has a held flag, set for the whole of a take and until its
 * drop's exchange (up__held_set()/up__held_clear()). A word naming an end
 * whose flag is clear (a word handed to an end that has left) is taken
 * back (takeback.c, up__take_back()): a CAS to the taker's id with the claim bit C,
 * a second look at the flag, then a CAS from that claim that gives the
 * word back if the flag was set meanwhile, or else drops the bit: held.
 * A claim stood over by another's (which gives it back: the first
 * claimer's flag is set) is waited for. A queued thread leaves handoff
 * before it takes anything back.
 *
 * -DTIMEOUT: each thread may time out once, before a sleep: it takes its
 * id back out of handoff if still there and gives the round up, even when
 * a drop has claimed it (it cannot tell a claim from a peer's store over
 * handoff, and its deadline must hold). Giving up, it clears its flag and
 * then lets go a word already handed to it, as a drop would; a word
 * handed later is taken back by the others, or confirmed by it at its
 * next take. Such a word can leave a sleeper asleep: one that went to
 * sleep on the same value from an earlier hold (a futex value's ABA), or
 * whose wake came before the hand-off. The library's sleeps are slices,
 * and after one the sleeper takes the word back, so with TIMEOUT a sleep
 * may also end while the word names a live end that neither takes nor
 * holds it (-DNOSLICE leaves that out, for 2 threads, where it is not
 * needed). -DLAST_ROUNDS: the last thread's rounds, if fewer;
 * -DFIRST_ROUNDS: the first thread's, if other.

 * -DMUTANT=1: a waiter that slept takes the lock without the bit (the code
 * before 3d558e2): the second of two sleepers is never woken.
 * -DMUTANT=2: lock_drop() does not wake (the bit ignored).
 * -DMUTANT=3 (with DEATH): the takeover without `keep`.
 * -DMUTANT=4 (with POLLER): lock_drop() wakes one even with a poller armed.
 * -DMUTANT=5: a drop that hands the word over wakes one sleeper, not all.
 * -DMUTANT=6 (with TIMEOUT): no take-back; a word handed to a thread
 *   that has left stays its own.
 * -DMUTANT=7: the take-back without its second look at the flag.
 * -DMUTANT=9 (with TIMEOUT): a thread that gives up only clears its flag:
 *   a thread that saw the word handed to it while the flag was still set
 *   sleeps with nobody to wake it.
 * -DMUTANT=10: the take-back's restore wakes nobody: a thread that went
 *   to sleep on the take-back's value sleeps on.
 * -DMUTANT=11: the take-back's restore a plain CAS from its own value: a
 *   waiter that set the bit on that value meanwhile makes it fail, and the
 *   word names the take-back's thread beside the real holder.
 * -DMUTANT=12: the claim without its bit (the code before it): T claims
 *   against O's hold; X, which read T's id from an earlier hold of T's,
 *   claims against T's claim and gives it back after T has stopped
 *   waiting, and T, finding its own id, holds the lock beside O.
 * -DMUTANT=13: a claimer whose claim another's stands over takes it for
 *   gone, and finds it given back after it has left up__take_back().
 * -DCLAIMDEATH (with TIMEOUT): one take-back's claimer may die after its
 *   claim, before its resolve (kill -9 at any point between the two CASes,
 *   or while it waits for another's claim over its own). Its claim stays,
 *   and with it, in `under`, the value the claim replaced (stored before
 *   the claim: the claims array of the segment). A taker that finds the
 *   word naming a dead claimer does what the claimer would have done: the
 *   replaced value names a live end whose flag is set, so it is restored;
 *   else the taker holds. A replaced value that is itself a claim of a live
 *   end inside its take-back is that end's to restore (it waits for it);
 *   and a claimer that finds a dead claimer's claim over its own restores
 *   its own and resolves it.
 * -DMUTANT=14 (with CLAIMDEATH): a dead claimer's claim taken over as a
 *   dead holder's (the code before): two holders.
 * (MUTANT=8, a queued thread that takes back without leaving handoff, was
 * a fault while the claim was a plain id: a drop that claimed the thread
 * exchanged the word to that same value. With the bit the two differ.)
 */
#ifndef N
#define N 3
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef LAST_ROUNDS
#define LAST_ROUNDS ROUNDS /* the last thread's rounds */
#endif
#ifndef FIRST_ROUNDS
#define FIRST_ROUNDS ROUNDS /* the first thread's rounds, if other */
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

#define W 128 /* UP_LOCK_WAITERS */
#define C 64  /* UP_LOCK_CLAIM */

byte word;     /* the lock word: 0, or id (1..N), | W */
bit inq[N + 1]; /* futex wait queue: thread i is blocked in futex_wait
		  (index N: the poller's armed wait) */
byte npoll;    /* poll-mode ends armed on the word */
byte incs;     /* threads in the critical section */
byte handoff;  /* the queued sleeper's id, 0 = none */
#define DEAD 9 /* the id of a holder that died inside */
bit held[DEAD + 1]; /* by id: inside a take of the lock, or holding it */
#ifdef CLAIMDEATH
bit dead[N + 1];    /* by id: died inside its take-back */
bit died;           /* one death at most */
bit inclaim[N + 1]; /* by id: UP_HELD_CLAIM, from before its claim to after
		       its resolve */
byte under[N + 1];  /* by id: the value its last claim replaced */
#define ISDEAD(i) dead[i]
#else
#define ISDEAD(i) false
#endif
#ifdef TIMEOUT
#define HELD(i, v) held[i] = v
#else
/* Without timeouts no word is ever handed to an end that has left, so
 * nothing takes back and the flags would only multiply the states. */
#define HELD(i, v) skip
#endif

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
inline lock_drop(cur, nx, hid)
{
	nx = 0;
	atomic {
		if
		:: handoff != 0 -> nx = handoff | W; handoff = 0
		:: true -> skip /* the relaxed look missed it */
		fi
	}
	atomic { cur = word; word = nx }
	HELD(hid, 0);
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
	byte id = me + 1, cur, nx, keep, o, v, r = 0;
	bit queued, timedout, back, give;

	do
	:: r < (me == N - 1 -> LAST_ROUNDS : (me == 0 -> FIRST_ROUNDS : ROUNDS)) ->
		/* lock_take() */
		keep = 0;
		HELD(id, 1);
		atomic {
			if
			:: word == 0 -> word = id; goto locked
			:: else -> skip
			fi
		}
retry:
		atomic { o = 0; give = 0; back = 0; nx = 0; cur = word }
		if
		:: (cur & ~(W | C)) == id ->
			/* handed to us, in this take or after an earlier one
			 * left: confirmed by a CAS. Never a claim of ours: we
			 * leave up__take_back() only once ours is resolved or
			 * gone. */
			assert((cur & C) == 0);
			atomic {
				if
				:: word == cur -> word = cur | keep; goto taken
				:: else -> skip
				fi
			}
			goto retry
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
		:: (cur & ~(W | C)) == DEAD ->
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
#ifdef CLAIMDEATH
		if
		:: (cur & C) && ISDEAD(cur & ~(W | C)) ->
			/* a claimer died inside its take-back (one death: no
			 * chain of dead claims to follow, dead_chain()) */
			o = cur & ~(W | C);
			v = under[o];
			o = v & ~(W | C);
#if MUTANT == 14
			v = 0;
#endif
			if
			:: (v & C) && o != id && !ISDEAD(o) && inclaim[o] ->
				/* a live claimer's claim under it: that
				 * claimer restores its own */
				goto sleep
			:: !(v & C) && v != 0 && o != id && !ISDEAD(o) && held[o] ->
				/* restore what the claim replaced */
				atomic {
					if
					:: word == cur -> word = (v & ~W) | (cur & W); nx = cur
					:: else -> nx = 0
					fi
				}
				if
				:: nx & W -> futex_wake_all()
				:: else -> skip
				fi;
				goto retry
			:: else ->
				/* take it over, as from a dead holder */
				atomic {
					if
					:: word == cur -> word = id | (cur & W) | keep; goto taken
					:: else -> skip
					fi
				}
				goto retry
			fi
		:: else -> skip
		fi;
#endif
#if MUTANT != 6
		/* A queued thread leaves handoff before it takes anything
		 * back; claimed (the unqueue lost), it takes nothing back this
		 * time round. */
		back = 1;
#if MUTANT != 8
		if
		:: queued ->
			queued = 0;
			atomic {
				if
				:: handoff == id -> handoff = 0
				:: else -> back = 0
				fi
			}
		:: else -> skip
		fi;
#endif
#ifdef TIMEOUT
		/* up__take_back(): a live owner whose flag is clear */
		if
		:: back && (cur & ~(W | C)) != DEAD && !ISDEAD(cur & ~(W | C)) &&
		   !held[cur & ~(W | C)] ->
			o = cur & ~(W | C);
#ifdef CLAIMDEATH
			inclaim[id] = 1;
#endif
#if MUTANT == 12
			nx = id | (cur & W);
#else
			nx = id | C | (cur & W);
#endif
#ifdef CLAIMDEATH
			under[id] = cur; /* stored before the claim's CAS */
#endif
			atomic {
				if
#ifdef CLAIMDEATH
				:: word == cur -> word = nx
				:: else -> inclaim[id] = 0; goto retry
#else
				:: word == cur -> word = nx
				:: else -> goto retry
#endif
				fi
			}
resolve:
#ifdef CLAIMDEATH
			if
			:: !died -> died = 1; dead[id] = 1; goto dying
			:: true -> skip
			fi;
#endif
#if MUTANT != 12 && MUTANT != 13
			/* another's claim over ours: it gives ours back (our
			 * flag is set), or the owner's drop ends both */
#ifdef CLAIMDEATH
			/* ... or its maker died over it, and we restore ours
			 * (the wake: a taker may sleep on the dead claim), or
			 * leave when ours is not under it; but under it a live
			 * claimer inside its claim may stand over ours: waited
			 * for as a live maker (the guard) */
			if
			:: !(word & C) || (word & ~(W | C)) == id -> skip
			:: atomic { (word & C) && (word & ~(W | C)) != id &&
				    ISDEAD(word & ~(W | C)) &&
				    !((under[word & ~(W | C)] & C) &&
				      (under[word & ~(W | C)] & ~(W | C)) != id &&
				      !ISDEAD(under[word & ~(W | C)] & ~(W | C)) &&
				      inclaim[under[word & ~(W | C)] & ~(W | C)]) ->
				if
				:: (under[word & ~(W | C)] & ~W) == (id | C) ->
					v = word; word = id | C | (word & W)
				:: else -> inclaim[id] = 0; goto retry
				fi
				}
				if
				:: v & W -> futex_wake_all()
				:: else -> skip
				fi;
				goto resolve
			fi;
#else
			(!(word & C) || (word & ~(W | C)) == id);
#endif
#endif
#if MUTANT != 7
			give = held[o];
#else
			give = 0;
#endif
			atomic {
				if
				:: (word & ~W) == (nx & ~W) ->
					if
					:: give ->
						/* give it back as found, with the bit
						 * if a waiter set it meanwhile */
#if MUTANT == 11
						if
						:: word == nx -> word = cur
						:: else -> nx = 0
						fi
#else
						nx = word; word = cur | (word & W)
#endif
					:: else ->
#ifdef CLAIMDEATH
						inclaim[id] = 0;
#endif
						word = id | (word & W) | keep; goto taken
					fi
#if MUTANT != 12 && MUTANT != 13
				:: (word & C) && (word & ~(W | C)) != id -> goto resolve /* claimed over meanwhile */
#endif
				:: else ->
#ifdef CLAIMDEATH
					inclaim[id] = 0;
#endif
					goto retry /* our claim is gone */
				fi
			}
#ifdef CLAIMDEATH
			inclaim[id] = 0;
#endif
			/* the restore wakes whoever slept on our value */
#if MUTANT != 10
			if
			:: nx & W -> futex_wake_all()
			:: else -> skip
			fi;
#endif
			goto retry
		:: else -> skip
		fi;
#endif
#endif
sleep:
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
			/* unqueue: CAS(handoff, id -> 0); failed: claimed, or
			 * stored over; it leaves all the same */
			atomic {
				if
				:: queued && handoff == id -> handoff = 0
				:: else -> skip
				fi
			}
			goto gaveup
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
#if defined(DEATH) || defined(TIMEOUT) || defined(CLAIMDEATH)
		/* The slice ends (the only timeouts modelled): while the
		 * holder is dead, or while the word names a live end that is
		 * neither taking nor holding it (a word handed to an end that
		 * had timed out), which nobody drops and whoever looks takes
		 * back. */
		if
		:: inq[me] == 0 -> skip
#ifdef DEATH
		:: atomic { inq[me] == 1 && (word & ~(W | C)) == DEAD -> inq[me] = 0 }
#endif
#ifdef CLAIMDEATH
		:: atomic { inq[me] == 1 && (word & ~(W | C)) != 0 &&
			    ISDEAD(word & ~(W | C)) -> inq[me] = 0 }
#endif
#if defined(TIMEOUT) && !defined(NOSLICE)
		:: atomic { inq[me] == 1 && (word & ~(W | C)) != 0 && (word & ~(W | C)) != DEAD &&
			    !ISDEAD(word & ~(W | C)) && !held[word & ~(W | C)] -> inq[me] = 0 }
#endif
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
		o = 0; give = 0; back = 0;
		/* unqueue, if still there */
		atomic {
			if
			:: queued && handoff == id -> handoff = 0
			:: else -> skip
			fi
		}
locked:
		queued = 0;
		incs++;
		assert(incs == 1);
		incs--;
		lock_drop(cur, nx, id);
		r++;
		goto next;
gaveup:
		/* up__lock_give_up(): clear the flag, then let go a word
		 * handed to us meanwhile */
		queued = 0;
		HELD(id, 0);
#if MUTANT != 9
		cur = word;
		if
		:: (cur & ~(W | C)) == id ->
			atomic {
				if
				:: word == cur -> word = 0; nx = 1
				:: else -> nx = 0
				fi
			}
			if
			:: nx -> futex_wake_all()
			:: else -> skip
			fi
		:: else -> skip
		fi;
#endif
		r++;
next:
		skip
	:: else -> break
	od;
#ifdef CLAIMDEATH
dying:
#endif
	skip
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
			:: word == 0 -> HELD(PID, 1); word = PID; goto locked
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
		lock_drop(cur, nx, PID);
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
/* Takes the lock when it is free, as a fresh taker does, and dies in it.
 * With TIMEOUT the word may be left naming a thread that has left, after
 * the others are done; the dier, which does not take back, then never
 * comes in. */
proctype Dier()
{
	if
	:: atomic { word == 0 -> word = DEAD }
#ifdef TIMEOUT
	:: atomic { (word & ~(W | C)) != 0 && (word & ~(W | C)) != DEAD &&
		    !held[word & ~(W | C)] -> skip }
#endif
	fi
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
