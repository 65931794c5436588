/* SPDX-License-Identifier: MIT */
/*
 * bias.h - the two locks, each biased to a lone holder of its side: their
 * inline fast paths.
 *
 * The writers' lock and the readers' lock are lock words (lock.h). While a
 * side has one end, its lock is biased to that end, as the JVM's biased
 * locking is: the owner enters by storing UP_BUSY_IN to its own endpoint
 * entry and checking that the lock's bias still names it, and leaves by
 * storing UP_BUSY_OUT, with no locked instruction and no line another core
 * writes. Any other taker (an end of the same side that joined, or a writer
 * returning pages under the readers' lock) takes the word and, on finding
 * a bias, takes it back (bias.c, bias_revoke()): it marks the bias
 * UP_BIAS_REVOKE, runs membarrier() so that the owner's relaxed
 * store-then-load needs no fence of its own, waits while the owner is
 * inside, and clears the bias. tests/model/bias.pml checks the protocol with
 * the owner's store buffer modelled; it does not depend on which lock.
 *
 * An end belongs to one side, so it has one busy word and one bias at most:
 * a writer's is on the writers' lock, a reader's on the readers' lock.
 *
 * Rejected: a lone-writer mode switched on the writer count alone (a writer
 * joining while the sole writer publishes needs a handshake whose fence the
 * lone writer would pay on every write); DPDK-style multi-producer CAS on
 * head (a preempted writer stalls all later ones, and merging into the last
 * page would need a second protocol).
 */
#ifndef UP_CORE_BIAS_H
#define UP_CORE_BIAS_H

#include "ring.h"

int up__biased_take_slow(struct up_end *e, struct up_shm_lock *l, bool nonblock);
int up__biased_try_slow(struct up_end *e, struct up_shm_lock *l);
void up__bias_give_up(struct up_end *e);
void up__busy_wake(struct up_end *e);
bool up__rlock_busy(struct up_pipe *p);
bool up__wlock_busy(struct up_pipe *p);
int up__wlock_poll_arm(struct up_end *w, _Atomic uint32_t **word, uint32_t *expect);

/* The lock @e's side owns: the only one it can be biased to. */
static inline struct up_shm_lock *up__own_lock(struct up_end *e)
{
	return (e->flags & UP_WR) ? &e->p->ln->wlock : &e->p->ln->rlock;
}

/*
 * The owner's held word is written only by the owner (lock.h); a value that
 * differs from our copy was stored by a peer. Restored here, on the way in
 * through the bias, which takes no word and would otherwise never rewrite
 * it: a stored claim of the lock word (with the word naming us) would keep
 * the other ends of our side waiting as long as we stay biased, where they
 * should wait only until our next call. One load of the line our busy store
 * just took.
 */
static inline void up__held_check(struct up_end *e)
{
	_Atomic uint32_t *held = &((struct up_shm_end *)((char *)e->busy -
							   offsetof(struct up_shm_end, busy)))->held;

	/* relaxed: our own word; see up__held_set(). */
	if (up__unlikely(atomic_load_explicit(held, memory_order_relaxed) != e->held))
		atomic_store_explicit(held, e->held, memory_order_relaxed);
}

/* The bias owner's entry into @l, its side's own lock: one store, one
 * load. True when entered; false when not the owner, or the bias was taken
 * back (then acknowledged). */
static inline bool up__bias_enter_own(struct up_end *e, struct up_shm_lock *l)
{
	if (up__likely(e->biased)) {
		_Atomic uint32_t *busy = e->busy;

		/* relaxed: store then load with no fence between; the
		 * revoker's membarrier() is the fence (bias_revoke()). */
		atomic_store_explicit(busy, UP_BUSY_IN, memory_order_relaxed);
		/* [bias] mb: a compiler barrier only, keeping the store above
		 * before the load below in the code; pairs with [bias] mb in
		 * bias_revoke(), the barrier that orders them on the CPU. */
		atomic_signal_fence(memory_order_seq_cst);
		/* [bias] acq: the critical section's loads stay after the
		 * check; pairs with [bias] mb in bias_revoke(). */
		if (up__likely(atomic_load_explicit(&l->bias, memory_order_acquire) == e->lock_id)) {
			up__held_check(e);
			return true;
		}
		/* [busy] rel: our earlier critical sections before the ACK;
		 * pairs with [busy] acq in bias_revoke(). */
		atomic_store_explicit(busy, UP_BUSY_ACK, memory_order_release);
		/* Out for good: no longer the owner (bias.c, bias_forged()). */
		up__held_clear(e, UP_HELD_BIAS);
		up__busy_wake(e);
		e->biased = false;
		e->last_ok = false; /* a writer's copy of the last slot goes with it */
	}
	return false;
}

/* As up__bias_enter_own(), for a lock that may not be @e's side's. */
static inline bool up__bias_enter(struct up_end *e, struct up_shm_lock *l)
{
	return l == up__own_lock(e) && up__bias_enter_own(e, l);
}

/* 0 with @l held, -EAGAIN (non-blocking end), -ETIMEDOUT, -ECANCELED or
 * -EPROTO. */
static inline int up__biased_take(struct up_end *e, struct up_shm_lock *l, bool nonblock)
{
	if (up__bias_enter(e, l))
		return 0;
	return up__biased_take_slow(e, l, nonblock);
}

/* @l only if that costs no wait: 0 with it held, or -EAGAIN (bias.c). */
static inline int up__biased_try(struct up_end *e, struct up_shm_lock *l)
{
	if (up__bias_enter(e, l))
		return 0;
	return up__biased_try_slow(e, l);
}

/*
 * The bias owner leaves @l, its side's own lock: one store, one load. True
 * when a revoker marked the bias and may sleep on our busy word: the caller
 * must then up__busy_wake() (left to it, so that a caller with more to do
 * after the drop makes one call out for both).
 */
static inline bool up__bias_leave_own(struct up_end *e, struct up_shm_lock *l)
{
	/* [busy] rel: the critical section before a revoker's acquire;
	 * pairs with [busy] acq in bias_revoke(). */
	atomic_store_explicit(e->busy, UP_BUSY_OUT, memory_order_release);
	/* [bias] mb: a compiler barrier only: the load below stays after the
	 * store in the code (C11 lets a relaxed load move above a release
	 * store); pairs with [bias] mb in bias_revoke(). */
	atomic_signal_fence(memory_order_seq_cst);
	/*
	 * A revoker that saw us inside after its barrier sleeps on busy. Then
	 * our store above came after the barrier, and so does this load: it
	 * sees the mark.
	 * relaxed: ordered by the revoker's barrier, not by this load.
	 */
	return (atomic_load_explicit(&l->bias, memory_order_relaxed) & UP_BIAS_REVOKE) != 0;
}

/* Let go of @l, @e's side's own lock. */
static inline void up__biased_drop_own(struct up_end *e, struct up_shm_lock *l)
{
	if (e->biased) {
		if (up__unlikely(up__bias_leave_own(e, l)))
			up__busy_wake(e);
	} else
		up__lock_drop(e, &l->word);
}

static inline void up__biased_drop(struct up_end *e, struct up_shm_lock *l)
{
	if (l == up__own_lock(e))
		up__biased_drop_own(e, l);
	else
		up__lock_drop(e, &l->word);
}

/*
 * The writers' lock. Only the write paths (writer.c, writer.h, reserve.c,
 * short.h) call these, on writer ends, whose own lock it is: the short
 * ways' entry and drop skip the check that up__bias_enter() makes.
 */
static inline bool up__wlock_bias_enter(struct up_end *w)
{
	return up__bias_enter_own(w, &w->p->ln->wlock);
}

static inline int up__wlock_take(struct up_end *w)
{
	return up__biased_take(w, &w->p->ln->wlock, w->flags & UP_NONBLOCK);
}

static inline int up__wlock_try(struct up_end *w)
{
	return up__biased_try(w, &w->p->ln->wlock);
}

static inline void up__wlock_drop(struct up_end *w)
{
	up__biased_drop_own(w, &w->p->ln->wlock);
}

/* The readers' lock. */
static inline int up__rlock_take(struct up_end *e)
{
	return up__biased_take(e, &e->p->ln->rlock, e->flags & UP_NONBLOCK);
}

static inline int up__rlock_try(struct up_end *e)
{
	return up__biased_try(e, &e->p->ln->rlock);
}

static inline void up__rlock_drop(struct up_end *e)
{
	up__biased_drop(e, &e->p->ln->rlock);
}

/* A reader holding the readers' lock between peek and consume lets go. */
static inline void up__peek_unlock(struct up_end *r)
{
	if (r->peek_locked) {
		r->peek_shown = 0; /* what it showed is gone with the lock */
		r->peek_locked = false;
		r->peek_fast = false;
		up__biased_drop(r, &r->p->ln->rlock);
	}
}

#endif /* UP_CORE_BIAS_H */
