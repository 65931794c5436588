/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the lock words' out-of-line pieces that every side of a lock
 * uses (lock.h): the backoff, the hand-off of the word to a sleeper, the
 * wake of the word's sleepers, and a failed take's let-go. A taker's slow
 * path is take.c, the take-back of a word that names a non-holder
 * takeback.c; both call down to this file only.
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
 * Hand-off. A holder that drops and takes again at once (a reader that
 * consumes and peeks again, holding the lock across a write(2) between)
 * wins against a sleeper its drop woke, every time: the sleeper is still
 * being scheduled when the word is taken again. So a waiter about to sleep
 * puts its lock id in the lock's handoff (from 0: one at a time), and a
 * drop that finds one there claims it (CAS to 0) and exchanges the word
 * straight to that id, with the waiters bit, then wakes every sleeper
 * (it cannot wake one by name). Who clears handoff:
 *
 *   - the holder handing the word over, with the CAS above;
 *   - the waiter itself, when it takes the lock another way, times out or
 *     is cancelled. Its CAS id -> 0 failing means a holder has claimed it
 *     and is handing it the word, or that a peer has stored over it: the
 *     two cannot be told apart, so it waits for the word a slice at most
 *     (claimed_wait(), take.c). Still in its take, it confirms the word; past its
 *     deadline or cancelled, it leaves all the same, and lets go of a word
 *     that came (up__lock_give_up()).
 *
 * So the word can come to name a live end that is no longer inside a call
 * for the lock (a holder preempted for a slice between its claim and its
 * exchange; a peer's store of the same). That end does not hold the
 * lock, and its held word says so: anyone else takes the word back
 * (up__take_back()), and the end itself, at its next take, confirms the word
 * with a CAS and holds it. A holder that dies between the claim and the
 * exchange leaves the word naming it, dead, and is taken over as any dead
 * holder. A value in handoff that names no endpoint is garbage from a
 * peer: cleared, nothing handed.
 */

/* Drop: the word for the next holder, claimed from handoff, which the
 * caller saw holding @h (nonzero); 0 when nothing is handed. */
uint32_t up__lock_pass(struct up_end *e, _Atomic uint32_t *lk, uint32_t h)
{
	bool valid = up__names_end(e, h) && !(h & UP_LOCK_FLAGS) &&
		     h != e->lock_id;

	/* relaxed: the claim only decides between us and the waiter's own
	 * unqueue(); the word's exchange carries the critical section. A value
	 * naming no endpoint is a peer's garbage: cleared the same way, and
	 * nothing is handed. */
	if (!atomic_compare_exchange_strong_explicit(&up__lock_line(lk)->handoff, &h, 0,
						     memory_order_relaxed, memory_order_relaxed) ||
	    !valid)
		return 0;
	return h | UP_LOCK_WAITERS;
}

/*
 * A take that failed: out of the lock's held bit, and a word handed to us
 * meanwhile let go (a claim of us that our unqueue lost). Without this, a
 * waiter that saw the word handed to us while our held bit was still set
 * would sleep on it with nobody left to wake it. A hand-off that lands
 * after our look here comes after our clear too: its holder wakes every
 * sleeper, and whoever looks then takes the word back (up__take_back()).
 */
void up__lock_give_up(struct up_end *e, _Atomic uint32_t *lk)
{
	uint32_t cur;

	e->held &= ~up__held_bit(e, lk);
	/* [held] sc: the clear, then the look at the word; pairs with [held]
	 * sc in up__lock_take_slow(), a waiter's look at the word before its
	 * look at our held word. */
	atomic_store_explicit(&e->p->ends[e->idx].held, e->held, memory_order_seq_cst);
	cur = atomic_load_explicit(lk, memory_order_seq_cst);
	if (up__lock_owner(cur) != e->lock_id)
		return;
	/* [lock] rel: as a drop's exchange, though we were never inside;
	 * pairs with [lock] acq in up__lock_take_slow(). A take-back that won
	 * first leaves the CAS failing and the word its own. */
	if (atomic_compare_exchange_strong_explicit(lk, &cur, 0, memory_order_seq_cst,
						    memory_order_relaxed))
		up__lock_wake(e, lk, true);
}

/* The drop found the waiters bit, or handed the word over (@all). */
void up__lock_wake(struct up_end *e, _Atomic uint32_t *lk, bool all)
{
	struct up_shm_lock *l = up__lock_line(lk);
	uint64_t sc = 0;

	/*
	 * One: the futex mutex hand-off; the woken keeps the waiters bit, so
	 * its drop wakes the next. But every one when the word was handed to
	 * a sleeper the wake cannot name, and while a poll-mode end is armed
	 * on the word: its event loop may never take the lock, and a wake
	 * that went to it would leave a blocked writer asleep for its whole
	 * slice (tests/model/lock.pml, -DPOLLER).
	 * [lock-poll] sc: after the exchange in up__lock_drop(); pairs with
	 * [lock-poll] sc in up__wlock_poll_arm().
	 */
	e->waker->ops->wake(e->waker, lk,
			    all || atomic_load_explicit(&l->npoll, memory_order_seq_cst) ? UP_WAKE_ALL
											: 1,
			    NULL, &sc);
	up__count(&e->c.syscalls, sc);
	up__count(&e->c.wakes, 1);
}
