/* SPDX-License-Identifier: MIT */
/*
 * lock.h - the lock words: futex mutexes on shared words whose value names
 * the holder (up__lock_id(): its endpoint index + 1 and a generation), so a
 * waiter can tell a holder that died (peer.c) and take the lock over, and a
 * value that names no endpoint is a corrupt segment, not a reason to wait
 * forever. The readers' lock and the writers' lock are these, each with a
 * bias on top (bias.h).
 *
 * Fast paths inline, slow paths in lock.c, take.c and takeback.c.
 */
#ifndef UP_CORE_LOCK_H
#define UP_CORE_LOCK_H

#include "up_int.h"

/*
 * Lock owners are hints. A lock word names its holder, but any process that
 * maps the segment can store any value there, so an endpoint also says in
 * its own entry's held word (struct up_shm_end) which locks it is inside a
 * call to take or holds: the bit is stored before the CAS that takes and
 * cleared after the exchange that drops. A taker that finds the word naming
 * a live endpoint whose held does not claim that lock takes the lock back
 * (takeback.c, up__take_back(), which has the argument that it never
 * takes one from a holder that got it by its CAS). UP_HELD_BIAS: its side's lock is
 * biased to this end (bias.c). UP_HELD_CLAIM: between a take-back's claim
 * and its resolve, set and cleared as the lock bits are, around the claim
 * CAS and after the resolve CAS. One plain store to the end's own entry
 * per take and per drop (two more per take-back); the entry's line is
 * written by nobody else.
 */
#define UP_HELD_RLOCK 1u
#define UP_HELD_WLOCK 2u
#define UP_HELD_BIAS  4u
/* Between a take-back's claim and its resolve (takeback.c, up__take_back()). */
#define UP_HELD_CLAIM 8u

/* The held bit of lock word @lk. */
static inline uint32_t up__held_bit(struct up_end *e, _Atomic uint32_t *lk)
{
	return lk == &e->p->ln->rlock.word ? UP_HELD_RLOCK : UP_HELD_WLOCK;
}

/* Claim @bits in our entry's held word, before the CAS that takes. */
static inline void up__held_set(struct up_end *e, uint32_t bits)
{
	e->held |= bits;
	/* relaxed: published by the [held] rel of the CAS that follows. */
	atomic_store_explicit(&e->p->ends[e->idx].held, e->held, memory_order_relaxed);
}

/* After the drop: [held] rel, so a taker that sees the bit gone also sees
 * the drop that came before it. */
static inline void up__held_clear(struct up_end *e, uint32_t bits)
{
	e->held &= ~bits;
	/* [held] rel: the drop's exchange before the clear; pairs with [held]
	 * sc in up__take_back() and bias_forged(). */
	atomic_store_explicit(&e->p->ends[e->idx].held, e->held, memory_order_release);
}

#define UP_LOCK_SPINS  256
#define UP_LOCK_YIELDS 64
/* After a sleep, a waiter sets its backoff step to this: no second round of
 * spinning and yielding. */
#define UP_BACKOFF_SLEPT (UP_LOCK_SPINS + UP_LOCK_YIELDS - 1)

/* take.c */
int up__lock_take_slow(struct up_end *e, _Atomic uint32_t *lk, bool nonblock);
/* lock.c */
uint32_t up__lock_pass(struct up_end *e, _Atomic uint32_t *lk, uint32_t h);
void up__lock_wake(struct up_end *e, _Atomic uint32_t *lk, bool all);
void up__lock_give_up(struct up_end *e, _Atomic uint32_t *lk);
/* takeback.c; up__dead_claim() returns 1 (held), 0 (look again) or: */
#define UP_DEAD_CLAIM_WAIT 2
int up__take_back(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t owner,
		  uint32_t keep, bool nonblock, bool *ran_out);
int up__dead_claim(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t keep);

/* Does the lock id @o name an entry of the endpoint table at all? A peer's
 * store may name none, and no index is taken from it before this says so. */
static inline bool up__names_end(const struct up_end *e, uint32_t o)
{
	uint32_t r = o & UP_END_ROLE_MASK;

	return r != 0 && r <= e->p->g.max_ends;
}

/* The line of lock word @lk (the word is its first member). */
static inline struct up_shm_lock *up__lock_line(_Atomic uint32_t *lk)
{
	return (struct up_shm_lock *)(void *)((char *)lk - offsetof(struct up_shm_lock, word));
}
bool up__backoff(struct up_end *e, unsigned int i, bool nonblock);

/* Take @lk: 0, -EAGAIN (@nonblock and held), -EPROTO, or -ETIMEDOUT or
 * -ECANCELED (the end's timeout, up_wakeup(): cancel.c). */
static inline int up__lock_take(struct up_end *e, _Atomic uint32_t *lk, bool nonblock)
{
	uint32_t cur = 0;
	int r;

	up__held_set(e, up__held_bit(e, lk));
	/* [lock] acq: the critical section's accesses come after; pairs with
	 * [lock] rel in up__lock_drop(). Also [held] rel: our held bit before
	 * the word names us; pairs with [held] sc in up__take_back(). */
	if (up__likely(atomic_compare_exchange_strong_explicit(lk, &cur, e->lock_id,
							       memory_order_acq_rel,
							       memory_order_relaxed)))
		return 0;
	r = up__lock_take_slow(e, lk, nonblock);
	/* Even at -EAGAIN: a claim of an earlier call's may have landed while
	 * our held bit was set (lock.c, up__lock_give_up()). */
	if (r < 0)
		up__lock_give_up(e, lk);
	return r;
}

/* Take @lk only if it is free at once: true with it held. For the short
 * ways, which leave anything else to the general path. */
static inline bool up__lock_try(struct up_end *e, _Atomic uint32_t *lk)
{
	uint32_t cur = 0;

	up__held_set(e, up__held_bit(e, lk));
	/* [lock] acq: as in up__lock_take(); pairs with [lock] rel in
	 * up__lock_drop(). Also [held] rel: pairs with [held] sc in
	 * up__take_back(). */
	if (up__likely(atomic_compare_exchange_strong_explicit(lk, &cur, e->lock_id,
							       memory_order_acq_rel,
							       memory_order_relaxed)))
		return true;
	/* As a take that failed: a word handed to us by an earlier call's
	 * claim may have come while our bit was set. */
	up__lock_give_up(e, lk);
	return false;
}

/*
 * Let go of @lk: to nobody (0), or, when a sleeper has put its id in the
 * lock's handoff, straight to it, so that a holder that takes the lock
 * again at once cannot shut a sleeper out for ever (lock.c).
 */
static inline void up__lock_drop(struct up_end *e, _Atomic uint32_t *lk)
{
	uint32_t next = 0, old;
	/* relaxed: a look at our own locked line; up__lock_pass() claims the
	 * sleeper with a CAS. A registration we miss leaves its sleeper to the
	 * plain wake below. */
	uint32_t h = atomic_load_explicit(&up__lock_line(lk)->handoff, memory_order_relaxed);

	if (up__unlikely(h != 0))
		next = up__lock_pass(e, lk, h);
	/* [lock] rel: the critical section before the next holder's acquire;
	 * pairs with [lock] acq in up__lock_take() and in up__lock_take_slow()
	 * (the sleeper handed the word). Also [lock-poll] sc: the load of
	 * npoll in up__lock_wake() must see a poller that set the bit taken
	 * here; pairs with [lock-poll] sc in up__wlock_poll_arm(). */
	old = atomic_exchange_explicit(lk, next, memory_order_seq_cst);
	up__held_clear(e, up__held_bit(e, lk));
	if (up__unlikely(next != 0))
		/* Every sleeper: the futex cannot be told which is ours. */
		up__lock_wake(e, lk, true);
	else if (up__unlikely(old & UP_LOCK_WAITERS))
		up__lock_wake(e, lk, false);
}

#endif /* UP_CORE_LOCK_H */
