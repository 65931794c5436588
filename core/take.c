/* SPDX-License-Identifier: MIT */
/*
 * take.c - a taker's slow path (lock.h, up__lock_take()): the lock word is
 * not free at once. Backs off, takes the word over from a dead holder (or,
 * through takeback.c, from a dead claimer, or back from a live end that
 * does not hold it), confirms a word handed to it, and sleeps on the word
 * with its id queued for the hand-off (lock.c).
 */
#include <sched.h>

#include "ring.h"

/* Take our id back out of handoff: false when a holder claimed it first
 * (it is handing us the word). */
static bool unqueue(struct up_end *e, _Atomic uint32_t *lk)
{
	uint32_t me = e->lock_id;

	/* relaxed: decides against up__lock_pass()'s claim only. */
	return atomic_compare_exchange_strong_explicit(&up__lock_line(lk)->handoff, &me, 0,
						       memory_order_relaxed,
						       memory_order_relaxed);
}

/*
 * A waiter whose unqueue lost: a holder has claimed it and is exchanging
 * the word to it, a few instructions off unless that holder is preempted;
 * or a peer has stored over handoff. Waits on the word for
 * UP_WAIT_SLICE_NS at most, since the two cannot be told apart and a
 * peer's store must not hold the caller past its deadline for longer.
 * True when the word came (names us). A word that comes later names an
 * end out of its take, which anyone takes back (up__take_back()), and which
 * this end confirms at its next take.
 */
static bool claimed_wait(struct up_end *e, _Atomic uint32_t *lk)
{
	uint64_t until = up__now_ns() + UP_WAIT_SLICE_NS, now, sc = 0;
	bool came = false;
	uint32_t cur;

	for (;;) {
		/* relaxed: a look; the caller confirms with a CAS. */
		cur = atomic_load_explicit(lk, memory_order_relaxed);
		if (up__lock_owner(cur) == e->lock_id) {
			came = true;
			break;
		}
		now = up__now_ns();
		if (now >= until)
			break;
		/* The exchange wakes every sleeper (up__lock_drop()). */
		e->waker->ops->wait(e->waker, lk, cur, until - now, NULL, 0, &sc);
	}
	up__count(&e->c.syscalls, sc);
	return came;
}

int up__lock_take_slow(struct up_end *e, _Atomic uint32_t *lk, bool nonblock)
{
	struct up_pipe *p = e->p;
	uint32_t cur, owner, keep = 0;
	/* queued: our id is in handoff, or was until a holder claimed it
	 * (or a peer stored over it). */
	/* ran_out: a wait of this call for a word that may be a peer's
	 * store ran out (claimed_wait(), or up__take_back() behind a claim
	 * whose maker is not inside a claim): later such waits are
	 * skipped. */
	bool queued = false, ran_out = false;
	unsigned int i;
	int r, took;

	for (i = 0;; i++) {
		/* [held] sc: a look (the lock is ours only through a CAS,
		 * which acquires), before up__take_back()'s look at the owner's
		 * held word: a word handed to an end that is giving up is seen
		 * with that end's held word clear, or that end lets the word go
		 * itself; pairs with [held] sc in up__lock_give_up(). */
		cur = atomic_load_explicit(lk, memory_order_seq_cst);
		owner = up__lock_owner(cur);
		if (owner == e->lock_id) {
			/* Handed to us by the holder that claimed us: in this
			 * call, or in an earlier one that left before the word
			 * came. Ours only once a CAS confirms it: a taker that
			 * saw our held word clear may be taking it back. A
			 * claim of ours here is none we made (up__take_back()
			 * stays until its own is resolved or exchanged over,
			 * or lost under a peer's stored claim) but a peer's
			 * store: taken as handed, without the bit.
			 * [held] sc: as a take's CAS, after our held bit;
			 * pairs with [held] sc in up__take_back(). Also [lock]
			 * acq: pairs with [lock] rel in up__lock_drop(). */
			if (!atomic_compare_exchange_strong_explicit(
				    lk, &cur, (cur & ~UP_LOCK_CLAIM) | keep,
				    memory_order_seq_cst, memory_order_relaxed))
				continue;
			goto taken;
		}
		if (owner == 0) {
			/* Keep the waiters bit: others may still sleep.
			 * [lock] acq: pairs with [lock] rel in up__lock_drop().
			 * Also [held] rel: our held bit before the word names
			 * us; pairs with [held] sc in up__take_back(). */
			if (atomic_compare_exchange_weak_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acq_rel, memory_order_relaxed))
				goto taken;
			continue;
		}
		if (!up__names_end(e, owner) || up__is_broken(p)) {
			if (queued)
				unqueue(e, lk);
			return up__proto_error(p);
		}
		if (up__backoff(e, i, nonblock))
			continue;
		/* Before giving up or sleeping: a holder that died would
		 * otherwise keep a non-blocking end at -EAGAIN for ever. */
		if (up__lock_owner_gone(e, owner)) {
			if (cur & UP_LOCK_CLAIM) {
				took = up__dead_claim(e, lk, cur, keep);
				if (took == 1)
					goto taken;
				if (took == UP_DEAD_CLAIM_WAIT)
					goto sleep;
				continue;
			}
			/* Take it over from the dead; what it published is
			 * whole (single stores), the rest was never visible.
			 * [lock] acq: pairs with [lock] rel in up__lock_drop().
			 * Also [held] rel: as above; pairs with [held] sc in
			 * up__take_back(). */
			if (atomic_compare_exchange_strong_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acq_rel, memory_order_relaxed))
				goto taken;
			continue;
		}
		/* Maybe live but not inside a call for this lock: a stored id
		 * (up__take_back() looks). A queued waiter leaves handoff first:
		 * claimed (the unqueue lost), the word is on its way to it,
		 * and it waits for that instead of taking anything back. Each
		 * sleep below queues it again. */
		if (queued) {
			queued = false;
			if (!unqueue(e, lk)) {
				if (claimed_wait(e, lk))
					continue;
				ran_out = true;
				goto sleep;
			}
		}
		took = up__take_back(e, lk, cur, owner, keep, nonblock, &ran_out);
		if (took > 0)
			goto taken;
		if (took < 0)
			continue; /* given back: look before sleeping on it */
sleep:
		if (nonblock)
			return -EAGAIN;
		/* Sleep on the lock word itself, as a futex mutex does.
		 * relaxed: the bit only asks the holder to wake us; the futex
		 * wait re-checks the word. */
		if (!(cur & UP_LOCK_WAITERS) &&
		    !atomic_compare_exchange_weak_explicit(lk, &cur, cur | UP_LOCK_WAITERS,
							   memory_order_relaxed,
							   memory_order_relaxed))
			continue;
		if (!queued) {
			uint32_t none = 0;

			/* relaxed: a holder that misses us wakes us as before
			 * (the bit is set); the claim's CAS decides the rest. */
			queued = atomic_compare_exchange_strong_explicit(
				&up__lock_line(lk)->handoff, &none, e->lock_id, memory_order_relaxed,
				memory_order_relaxed);
		}
		uint64_t sc = 0, slice = UP_WAIT_SLICE_NS;

		r = up__sleep_begin(e, lk, false, &slice);
		if (r < 0) {
			if (!queued || unqueue(e, lk))
				return r;
			/* Claimed: the call ends all the same (a cancel must
			 * not be spent on a lock), but after the word has come,
			 * so that up__lock_take()'s give-up lets it go rather
			 * than leave it to the others' take-back. Not when a
			 * wait of this call ran out already: a peer's stores,
			 * and the call ends one slice late at most. */
			if (!ran_out)
				(void)claimed_wait(e, lk);
			return r;
		}
		up__count(&e->c.waits, 1);
		if (e->waker->ops->wait(e->waker, lk, cur | UP_LOCK_WAITERS, slice, NULL, 0, &sc) ==
		    -ETIMEDOUT)
			up__count(&e->c.timeouts, 1);
		up__sleep_end(e);
		up__count(&e->c.syscalls, sc);
		/*
		 * Woken or timed out: look once more, then sleep again. The
		 * drop that woke us cleared the waiters bit, and others may
		 * still sleep behind us, so from now on we take the lock with
		 * the bit set and our drop wakes the next, as a futex mutex's
		 * "contended" state does. Without it the second of two sleepers
		 * slept a whole slice with the lock free (test_lock_handoff).
		 * Costs one needless wake when nobody else sleeps.
		 */
		keep = UP_LOCK_WAITERS;
		i = UP_BACKOFF_SLEPT;
	}
taken:
	/* Out of handoff, if a holder has not claimed us: a claim that beat
	 * us was a holder's that died before its exchange (we took over from
	 * it), or one whose word just came, or a peer's store. */
	if (queued)
		unqueue(e, lk);
	return 0;
}
