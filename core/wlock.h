/* SPDX-License-Identifier: MIT */
/*
 * wlock.h - the writers' lock, biased to a lone writer: its inline fast path.
 *
 * The writers' lock is a lock word (lock.h). With one writer it is biased to
 * that writer, as the JVM's biased locking is: the owner enters by storing
 * UP_BUSY_IN to its own endpoint entry and checking that the bias still
 * names it, and leaves by storing UP_BUSY_OUT, with no locked instruction
 * and no line another core writes. Any other writer takes the word and, on
 * finding a bias, takes it back (wlock.c, bias_revoke()): it marks the
 * bias UP_BIAS_REVOKE, runs membarrier() so that the owner's relaxed
 * store-then-load needs no fence of its own, waits while the owner is
 * inside, and clears the bias. tests/model/bias.pml checks the protocol with
 * the owner's store buffer modelled.
 *
 * Rejected: a lone-writer mode switched on the writer count alone (a writer
 * joining while the sole writer publishes needs a handshake whose fence the
 * lone writer would pay on every write); DPDK-style multi-producer CAS on
 * head (a preempted writer stalls all later ones, and merging into the last
 * page would need a second protocol).
 */
#ifndef UP_CORE_WLOCK_H
#define UP_CORE_WLOCK_H

#include "ring.h"

int up__wlock_take_slow(struct up_end *w);
int up__wlock_try(struct up_end *w);
void up__wlock_unbias(struct up_end *w);
void up__busy_wake(struct up_end *w);
int up__wlock_poll_arm(struct up_end *w, _Atomic uint32_t **word, uint32_t *expect);

/* The bias owner's entry: one store, one load. True when entered; false
 * when not the owner, or the bias was taken back (then acknowledged). */
static inline bool up__wlock_bias_enter(struct up_end *w)
{
	struct up_pipe *p = w->p;

	if (up__likely(w->biased)) {
		_Atomic uint32_t *busy = &p->ends[w->idx].busy;

		/* relaxed: store then load with no fence between; the
		 * revoker's membarrier() is the fence (bias_revoke()). */
		atomic_store_explicit(busy, UP_BUSY_IN, memory_order_relaxed);
		/* [bias] mb: a compiler barrier only, keeping the store above
		 * before the load below in the code; pairs with [bias] mb in
		 * bias_revoke(), the barrier that orders them on the CPU. */
		atomic_signal_fence(memory_order_seq_cst);
		/* [bias] acq: the critical section's loads stay after the
		 * check; pairs with [bias] mb in bias_revoke(). */
		if (up__likely(atomic_load_explicit(&p->ln->wlock.bias, memory_order_acquire) ==
			       w->lock_id))
			return true;
		/* [busy] rel: our earlier critical sections before the ACK;
		 * pairs with [busy] acq in bias_revoke(). */
		atomic_store_explicit(busy, UP_BUSY_ACK, memory_order_release);
		/* Out for good: no longer the owner (wlock.c, bias_forged()). */
		up__held_clear(w, UP_HELD_BIAS);
		up__busy_wake(w);
		w->biased = false;
		w->last_ok = false;
	}
	return false;
}

/* 0 with the writers' lock held, -EAGAIN (non-blocking end) or -EPROTO. */
static inline int up__wlock_take(struct up_end *w)
{
	if (up__wlock_bias_enter(w))
		return 0;
	return up__wlock_take_slow(w);
}

static inline void up__wlock_drop(struct up_end *w)
{
	struct up_pipe *p = w->p;

	if (w->biased) {
		/* [busy] rel: the critical section before a revoker's acquire;
		 * pairs with [busy] acq in bias_revoke(). */
		atomic_store_explicit(&p->ends[w->idx].busy, UP_BUSY_OUT, memory_order_release);
		/* [bias] mb: a compiler barrier only: the load below stays
		 * after the store in the code (C11 lets a relaxed load move
		 * above a release store); pairs with [bias] mb in bias_revoke(). */
		atomic_signal_fence(memory_order_seq_cst);
		/*
		 * A revoker that saw us inside after its barrier sleeps on
		 * busy. Then our store above came after the barrier, and so
		 * does this load: it sees the mark.
		 * relaxed: ordered by the revoker's barrier, not by this load.
		 */
		if (up__unlikely(atomic_load_explicit(&p->ln->wlock.bias, memory_order_relaxed) &
				 UP_BIAS_REVOKE))
			up__busy_wake(w);
	} else
		up__lock_drop(w, &p->ln->wlock.word);
}

#endif /* UP_CORE_WLOCK_H */
