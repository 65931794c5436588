/* SPDX-License-Identifier: MIT */
/*
 * cancel.c - what ends a blocking call other than progress: the end's
 * timeout (up_set_timeout()) and up_wakeup() from another thread.
 *
 * Both are looked at only where a call is about to sleep, so a call that
 * never sleeps pays nothing for them. A sleeper publishes the word it
 * sleeps on, then looks for a kick; up_wakeup() sets the kick, then looks
 * for the word (both seq_cst): either the sleeper sees the kick and does not
 * sleep, or the waker sees the word. On a wait line's seq the waker bumps
 * the word before waking it, so a sleep about to start on the old value
 * returns at once (a spurious wake for the line's other sleepers, which
 * re-check and sleep again). A lock word or a bias owner's busy word is
 * never written by the waker: a sleep on one that had not started when the
 * wake came lasts until its slice ends (UP_WAIT_SLICE_NS at most).
 *
 * The deadline runs from the call's first sleep: each blocking entry point
 * clears it (a store to the end, not to the segment) and up__sleep_begin()
 * sets it.
 */
#include "ring.h"

#define UP_SLEEP_BUMP ((uintptr_t)1) /* in sleep_on: the word is a seq */

int up__sleep_begin(struct up_end *e, _Atomic uint32_t *word, bool seq, uint64_t *slice_ns)
{
	uint64_t now, left;

	if (e->no_cancel)
		return 0;
	/* [kick] sc: where we sleep, before the look for a kick; pairs with
	 * [kick] sc in up__kick(). */
	atomic_store_explicit(&e->sleep_on, (uintptr_t)word | (seq ? UP_SLEEP_BUMP : 0),
			      memory_order_seq_cst);
	/* [kick] sc: pairs with [kick] sc in up__kick(). */
	if (atomic_load_explicit(&e->kick, memory_order_seq_cst)) {
		up__sleep_end(e);
		/* relaxed: consumed by this end's own thread. */
		atomic_store_explicit(&e->kick, 0, memory_order_relaxed);
		return -ECANCELED;
	}
	if (e->timeout_ns == UP_NO_TIMEOUT)
		return 0;
	now = up__now_ns();
	if (e->deadline_ns == 0)
		e->deadline_ns = e->timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + e->timeout_ns;
	if (now >= e->deadline_ns) {
		up__sleep_end(e);
		return -ETIMEDOUT;
	}
	left = e->deadline_ns - now;
	if (left < *slice_ns)
		*slice_ns = left;
	return 0;
}

void up__sleep_end(struct up_end *e)
{
	/* relaxed: a waker that still sees the old word wakes it for
	 * nothing; the sleeper re-checks. */
	atomic_store_explicit(&e->sleep_on, 0, memory_order_relaxed);
}

/* up_wakeup(): the caller keeps @e alive (fork.c's list lock). */
void up__kick(struct up_end *e)
{
	uint64_t sc = 0;
	uintptr_t on;

	/* [kick] sc: the kick before the look for a sleeper; pairs with
	 * [kick] sc in up__sleep_begin(). */
	atomic_store_explicit(&e->kick, 1, memory_order_seq_cst);
	/* [kick] sc: pairs with [kick] sc in up__sleep_begin(). */
	on = atomic_load_explicit(&e->sleep_on, memory_order_seq_cst);
	if (!on)
		return;
	_Atomic uint32_t *word = (_Atomic uint32_t *)(on & ~UP_SLEEP_BUMP);

	if (on & UP_SLEEP_BUMP)
		/* [wait] sc: as a waker's bump of seq; pairs with [wait] sc in
		 * up__wait_ready(). */
		atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
	up__futex_wake(word, UP_WAKE_ALL, &sc);
}
