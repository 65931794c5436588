/* SPDX-License-Identifier: MIT */
/*
 * lock.h - the lock words: futex mutexes on shared words whose value names
 * the holder (up__lock_id(): its endpoint index + 1 and a generation), so a
 * waiter can tell a holder that died (peer.c) and take the lock over, and a
 * value that names no endpoint is a corrupt segment, not a reason to wait
 * forever. The readers' lock is one of these; the writers' lock (wlock.h)
 * is one too, with a bias on top.
 *
 * Fast paths inline, slow paths in lock.c.
 */
#ifndef UP_CORE_LOCK_H
#define UP_CORE_LOCK_H

#include "up_int.h"

#define UP_LOCK_SPINS  256
#define UP_LOCK_YIELDS 64
/* After a sleep, a waiter sets its backoff step to this: no second round of
 * spinning and yielding. */
#define UP_BACKOFF_SLEPT (UP_LOCK_SPINS + UP_LOCK_YIELDS - 1)

int up__lock_take_slow(struct up_end *e, _Atomic uint32_t *lk, bool nonblock);
void up__lock_wake(struct up_end *e, _Atomic uint32_t *lk);
bool up__backoff(struct up_end *e, unsigned int i, bool nonblock);

/* Take @lk: 0, -EAGAIN (@nonblock and held), -EPROTO, or -ETIMEDOUT or
 * -ECANCELED (the end's timeout, up_wakeup(): cancel.c). */
static inline int up__lock_take(struct up_end *e, _Atomic uint32_t *lk, bool nonblock)
{
	uint32_t cur = 0;

	/* [lock] acq: the critical section's accesses come after; pairs with
	 * [lock] rel in up__lock_drop(). */
	if (up__likely(atomic_compare_exchange_strong_explicit(lk, &cur, e->lock_id,
							       memory_order_acquire,
							       memory_order_relaxed)))
		return 0;
	return up__lock_take_slow(e, lk, nonblock);
}

static inline void up__lock_drop(struct up_end *e, _Atomic uint32_t *lk)
{
	/* [lock] rel: the critical section before the next holder's acquire;
	 * pairs with [lock] acq in up__lock_take(). Also [lock-poll] sc: the
	 * load of npoll in up__lock_wake() must see a poller that set the bit
	 * taken here; pairs with [lock-poll] sc in up__wlock_poll_arm(). */
	uint32_t old = atomic_exchange_explicit(lk, 0, memory_order_seq_cst);

	if (up__unlikely(old & UP_LOCK_WAITERS))
		up__lock_wake(e, lk);
}

#endif /* UP_CORE_LOCK_H */
