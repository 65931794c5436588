/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the lock words' slow paths (lock.h): backoff, taking a lock over
 * from a dead holder, sleeping on the word, handing it off.
 *
 * Rejected: a ticket lock (a holder that dies leaves every later ticket
 * stuck, and a dead holder cannot be told from a slow one by the word).
 */
#include <sched.h>

#include "ring.h"

/*
 * Waiting for another endpoint to let go (a lock's holder, a bias owner):
 * step @i of the backoff. Spins UP_LOCK_SPINS times, then yields
 * UP_LOCK_YIELDS times (the holder may be preempted on our core; a
 * non-blocking caller skips that and gives up instead). Returns true when it
 * spun or yielded, false when the caller should look for a dead holder and
 * then sleep or give up.
 */
bool up__backoff(struct up_end *e, unsigned int i, bool nonblock)
{
	if (i < UP_LOCK_SPINS) {
		up__cpu_relax();
		return true;
	}
	if (i < UP_LOCK_SPINS + UP_LOCK_YIELDS && !nonblock) {
		sched_yield();
		up__count(&e->c.syscalls, 1);
		return true;
	}
	return false;
}

/*
 * The word @cur names a live endpoint @owner (not us): take the lock back if
 * @owner's held word does not claim it, i.e. the value was stored by
 * somebody else. Returns true with the lock held by us, false to go on
 * waiting (the owner claims it, or the word changed). Two steps:
 *
 *   1. claim: CAS the word from @cur to our id (we are not inside yet);
 *   2. re-read the owner's held (seq_cst). It claims the lock: restore @cur
 *      with a CAS (which fails harmlessly if the owner dropped meanwhile)
 *      and wait. It does not: check that the word still names us, and we
 *      hold the lock.
 *
 * Why this never takes the lock from a holder H that got it by its CAS.
 * Say our claim CAS read the value H's take CAS wrote (else H did not hold
 * it then). H stored its held bit before that CAS, which releases it, and
 * our claim acquires it ([held] rel/sc): our re-read in step 2 sees the bit
 * or a later store of H's held. H's later stores are its clear after a
 * drop, or a re-take's set. A set: we restore. A clear: it is a release
 * after H's drop exchange, so the drop happened before our check of the
 * word, which then reads 0 or a later taker's id, not ours: we go on
 * waiting. The ABA case (H drops and takes again between our first look
 * and our claim) is the same: our claim read H's new CAS, whose held bit we
 * see. Only the word's last writer being a plain store (a peer of ours
 * scribbling) escapes this, and that peer could as well scribble anything.
 */
static bool take_back(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t owner,
		      uint32_t keep)
{
	_Atomic uint32_t *held = &e->p->ends[(owner & UP_END_ROLE_MASK) - 1].held;
	const uint32_t bit = up__held_bit(e, lk);
	uint32_t mine = e->lock_id | (cur & UP_LOCK_WAITERS) | keep, back = cur;

	/* [held] sc: a first look; pairs with [held] rel in up__held_clear()
	 * and up__lock_take(). */
	if (atomic_load_explicit(held, memory_order_seq_cst) & bit)
		return false;
	/* Step 1. [held] sc: the claim acquires the owner's take CAS; pairs
	 * with [held] rel in up__lock_take(). Also [lock] acq: pairs with
	 * [lock] rel in up__lock_drop(). */
	if (!atomic_compare_exchange_strong_explicit(lk, &cur, mine, memory_order_seq_cst,
						     memory_order_relaxed))
		return false;
	/* Step 2. [held] sc: after the claim; pairs with [held] rel in
	 * up__held_clear() and up__lock_take(). */
	if (atomic_load_explicit(held, memory_order_seq_cst) & bit) {
		/* [held] sc: give the word back as we found it; pairs with
		 * [held] sc in take_back(), a later taker's first look. */
		atomic_compare_exchange_strong_explicit(lk, &mine, back, memory_order_seq_cst,
							memory_order_relaxed);
		return false;
	}
	/* [held] sc: the owner's drop, if any, came before its clear that we
	 * did not see; pairs with [held] rel in up__held_clear(). */
	if ((atomic_load_explicit(lk, memory_order_seq_cst) & ~UP_LOCK_WAITERS) != e->lock_id)
		return false;
	return true;
}

int up__lock_take_slow(struct up_end *e, _Atomic uint32_t *lk, bool nonblock)
{
	struct up_pipe *p = e->p;
	uint32_t cur, owner, keep = 0;
	unsigned int i;

	for (i = 0;; i++) {
		/* relaxed: a look at the holder; the CAS below acquires. */
		cur = atomic_load_explicit(lk, memory_order_relaxed);
		owner = cur & ~UP_LOCK_WAITERS;
		if (owner == 0) {
			/* Keep the waiters bit: others may still sleep.
			 * [lock] acq: pairs with [lock] rel in up__lock_drop(). */
			if (atomic_compare_exchange_weak_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acquire, memory_order_relaxed))
				return 0;
			continue;
		}
		if ((owner & UP_END_ROLE_MASK) == 0 ||
		    (owner & UP_END_ROLE_MASK) > p->g.max_ends || owner == e->lock_id ||
		    up__is_broken(p))
			return up__proto_error(p);
		if (up__backoff(e, i, nonblock))
			continue;
		/* Before giving up or sleeping: a holder that died would
		 * otherwise keep a non-blocking end at -EAGAIN for ever. */
		if (up__lock_owner_gone(e, owner)) {
			/* Take it over from the dead; what it published is
			 * whole (single stores), the rest was never visible.
			 * [lock] acq: pairs with [lock] rel in up__lock_drop(). */
			if (atomic_compare_exchange_strong_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acquire, memory_order_relaxed))
				return 0;
			continue;
		}
		/* Live, but not inside a call for this lock: a stored id. */
		if (take_back(e, lk, cur, owner, keep))
			return 0;
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
		uint64_t sc = 0, slice = UP_WAIT_SLICE_NS;
		int r = up__sleep_begin(e, lk, false, &slice);

		if (r < 0)
			return r;
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
}

/* The drop found the waiters bit: wake the next taker. */
void up__lock_wake(struct up_end *e, _Atomic uint32_t *lk)
{
	struct up_shm_lock *l = (struct up_shm_lock *)(void *)((char *)lk -
				 offsetof(struct up_shm_lock, word));
	uint64_t sc = 0;

	/*
	 * One: the futex mutex hand-off; the woken keeps the waiters bit, so
	 * its drop wakes the next. But every one while a poll-mode end is
	 * armed on the word: its event loop may never take the lock, and a
	 * wake that went to it would leave a blocked writer asleep for its
	 * whole slice (tests/model/lock.pml, -DPOLLER).
	 * [lock-poll] sc: after the exchange in up__lock_drop(); pairs with
	 * [lock-poll] sc in up__wlock_poll_arm().
	 */
	e->waker->ops->wake(e->waker, lk,
			    atomic_load_explicit(&l->npoll, memory_order_seq_cst) ? UP_WAKE_ALL : 1,
			    &sc);
	up__count(&e->c.syscalls, sc);
	up__count(&e->c.wakes, 1);
}
