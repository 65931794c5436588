/* SPDX-License-Identifier: MIT */
/*
 * bias.c - the biased locks (bias.h has the fast path and the design note):
 * taking a bias back, setting one, giving it up; and a writer waiting for
 * the writers' lock in poll mode.
 *
 * Taking the bias back, holding the word:
 *   1. mark the bias UP_BIAS_REVOKE, so the owner's next entry fails;
 *   2. membarrier() (fence.c): the owner either stored UP_BUSY_IN before the
 *      barrier, and that store is visible now, or it loads the bias after
 *      the barrier and sees the mark;
 *   3. wait while the owner is UP_BUSY_IN (or, where membarrier is refused,
 *      until it acknowledges with UP_BUSY_ACK), or gone: spin, yield, then
 *      sleep on the owner's busy word, which the owner wakes when it leaves
 *      and finds the mark;
 *   4. clear the bias. The owner stays out: it found the bias changed and
 *      takes the word like anyone else.
 * The bias is set only by a holder of the word that is an end of the lock's
 * side, sees itself the only one, and whose process registered for
 * membarrier, so a second end costs one barrier, once, and there are never
 * two owners.
 */
#include "bias.h"

/* A revoker sleeps on the owner's busy word in slices of this, looking for
 * a dead owner in between (the futex backend cannot watch pidfds). */
#define UP_BIAS_SLICE_NS 10000000ull /* 10 ms */
/*
 * A revoker whose process may not call membarrier() cannot fence the owner.
 * It waits for the owner's UP_BUSY_ACK, given on its next entry or its
 * close; an owner that stays open and idle gives none. So it also accepts an
 * owner that is out once the mark is this old: an entry that read the bias
 * before the mark was visible stored UP_BUSY_IN before that read, and a
 * store does not stay in a store buffer for milliseconds (a context switch
 * or an interrupt drains it); every later entry sees the mark. This is the
 * protocol's one timing argument; with membarrier available it is not used.
 */
#define UP_BIAS_GRACE_NS 20000000ull /* 20 ms */

/* The owner changed its busy word while a revoker may sleep on it. */
void up__busy_wake(struct up_end *w)
{
	uint64_t sc = 0;

	w->waker->ops->wake(w->waker, w->busy, UP_WAKE_ALL, NULL, &sc);
	up__count(&w->c.syscalls, sc);
	up__count(&w->c.wakes, 1);
}

/*
 * Holding @l's word, which the bias @owner's setter held too: is the bias a
 * value somebody stored rather than one its owner set? The owner sets
 * UP_HELD_BIAS in its entry before it stores the bias, under the word
 * (up__biased_take_slow()), and clears it only once it is out for good
 * (UP_BUSY_ACK stored), so a bias naming an entry that is not a live writer
 * of that generation and of the lock's side, or whose held lacks the bit,
 * has nobody to wait for.
 */
static bool bias_forged(struct up_end *w, struct up_shm_lock *l, uint32_t owner)
{
	struct up_pipe *p = w->p;
	const uint32_t role = l == &p->ln->wlock ? UP_END_WRITER : UP_END_READER;
	uint32_t idx = (owner & UP_END_ROLE_MASK) - 1;
	/* [end-state] acq: the entry as its claim or free left it, as in
	 * up__lock_owner_gone(); pairs with [end-state] acq_rel in
	 * up__end_claim() and reap_entry() and [end-state] rel in
	 * up__end_free(). */
	uint32_t st = atomic_load_explicit(&p->ends[idx].state, memory_order_acquire);

	if ((st & UP_END_ROLE_MASK) != role || up__lock_id(st, idx) != owner)
		return true;
	/* [held] sc: the owner's bit, or its clear after its ACK; pairs with
	 * [held] rel in up__held_clear(). */
	return !(atomic_load_explicit(&p->ends[idx].held, memory_order_seq_cst) & UP_HELD_BIAS);
}

/* Holding @l's word: take back its bias @b. 0, or -EAGAIN (@nonblock, the
 * owner is inside), -ETIMEDOUT or -ECANCELED (cancel.c), or -EPROTO. */
static int bias_revoke(struct up_end *w, struct up_shm_lock *l, uint32_t b, bool nonblock)
{
	struct up_pipe *p = w->p;
	_Atomic uint32_t *bias = &l->bias;
	uint32_t owner = b & ~UP_BIAS_REVOKE;
	uint32_t idx = owner & UP_END_ROLE_MASK;
	_Atomic uint32_t *fenced_by = &l->fenced;
	_Atomic uint64_t *marked = &l->marked_ns;
	uint64_t sc = 0, slice, t_mark, now = up__now_ns();
	uint32_t i;
	bool fenced;
	int r;

	/* Garbage, or this end's own bias left from before (a bias is never
	 * entered twice by one end without the word): nobody to wait for. */
	if (idx == 0 || idx > p->g.max_ends || owner == w->lock_id)
		goto clear;
	/* Stored by a peer, naming an end that never took it: a live end
	 * idle outside any call would never let us in (test_wedge). A dead
	 * one is for the loop below, which reaps it. */
	if (bias_forged(w, l, owner) && !up__lock_owner_gone(w, owner))
		goto clear;
	if (b & UP_BIAS_REVOKE) {
		/* A taker before us marked it and gave up (non-blocking). If it
		 * fenced after its mark, that barrier serves us too.
		 * relaxed: written only under the word we hold. */
		t_mark = atomic_load_explicit(marked, memory_order_relaxed);
		if (t_mark == 0 || t_mark > now) /* none, or not ours to trust */
			/* relaxed: as above. */
			atomic_store_explicit(marked, t_mark = now, memory_order_relaxed);
		/* relaxed: as above. */
		fenced = atomic_load_explicit(fenced_by, memory_order_relaxed) == owner;
	} else {
		/* Step 1. [bias] sc: the mark, before the barrier below (which
		 * orders it anyway); pairs with [bias] acq in
		 * up__bias_enter_own(). */
		atomic_store_explicit(bias, owner | UP_BIAS_REVOKE, memory_order_seq_cst);
		/* relaxed: written only under the word we hold. */
		atomic_store_explicit(marked, t_mark = now, memory_order_relaxed);
		fenced = false;
	}
	if (!fenced) {
		/* Step 2. [bias] mb: membarrier() orders the owner's busy store
		 * before its bias load; pairs with [bias] mb in
		 * up__bias_enter_own(). An owner of this process (our own
		 * entry) is reached by the private barrier; one elsewhere only
		 * by the grace-period one (fence.c: the global expedited
		 * barrier can skip the owner's CPU). */
		fenced = up__membarrier(up__reach_of(p, owner, UP_FENCE_ANY), &sc) == 0;
		up__count(&w->c.syscalls, sc);
		up__count(&w->c.revokes, 1);
		if (fenced)
			/* relaxed: written only under the word we hold. */
			atomic_store_explicit(fenced_by, owner, memory_order_relaxed);
	}
	/* Step 3. */
	_Atomic uint32_t *busy = &p->ends[idx - 1].busy;
	for (i = 0;; i++) {
		/* [busy] acq: the owner's critical section before ours; pairs
		 * with [busy] rel in up__bias_leave_own() and
		 * up__bias_enter_own(). */
		uint32_t st = atomic_load_explicit(busy, memory_order_acquire);

		if (st == UP_BUSY_ACK || (fenced && st != UP_BUSY_IN))
			break;
		/* See UP_BIAS_GRACE_NS. */
		if (!fenced && st != UP_BUSY_IN && (i & 31) == 0 &&
		    up__now_ns() - t_mark >= UP_BIAS_GRACE_NS)
			break;
		if (up__is_broken(p))
			return -EPROTO;
		if (up__backoff(w, i, nonblock))
			continue;
		/* The owner is preempted, holds a reservation open, or died
		 * inside: whatever it published is whole (single stores). */
		if (up__lock_owner_gone(w, owner))
			break;
		/* A bias stored with the owner's held and busy to match names
		 * an end that never set it; that end rewrites its held at its
		 * next take of the word (lock.h), which waits for the word we
		 * hold: look again here, or we and it wait for each other.
		 * The real owner clears its bit only after its ACK. */
		if (bias_forged(w, l, owner))
			break;
		if (nonblock)
			return -EAGAIN; /* the mark stays; the next taker goes on */
		/* Sleep while busy keeps the value just seen: the owner wakes
		 * us when it leaves and finds the mark, or acknowledges it. */
		sc = 0;
		slice = UP_BIAS_SLICE_NS;
		r = up__sleep_begin(w, busy, false, &slice);
		if (r < 0)
			return r; /* the mark stays, as for a non-blocking taker */
		up__count(&w->c.waits, 1);
		w->waker->ops->wait(w->waker, busy, st, slice, NULL, 0, &sc);
		up__sleep_end(w);
		up__count(&w->c.syscalls, sc);
		i = UP_BACKOFF_SLEPT;
	}
clear:
	/* Step 4. [wait] rel: the owner's critical sections (its len stores
	 * among them, acquired from its busy above) before the clear; pairs
	 * with [wait] sc in up__wait_fence(), a sleeper that finds no bias
	 * and does not fence. */
	atomic_store_explicit(bias, 0, memory_order_release);
	/* relaxed: we hold the word; its release publishes these. */
	atomic_store_explicit(fenced_by, 0, memory_order_relaxed);
	atomic_store_explicit(marked, 0, memory_order_relaxed);
	return 0;
}

/* Everyone but the bias owner: @l's word, then take back a bias found
 * there, or set one. */
__attribute__((noinline)) int up__biased_take_slow(struct up_end *e, struct up_shm_lock *l,
						   bool nonblock)
{
	struct up_pipe *p = e->p;
	uint64_t sc = 0;
	uint32_t b, ends;
	int r;

	r = up__lock_take(e, &l->word, nonblock);
	if (r < 0)
		return r;
	/* relaxed: written only by holders of the word, which we are. */
	b = atomic_load_explicit(&l->bias, memory_order_relaxed);
	if (b != 0) {
		r = bias_revoke(e, l, b, nonblock);
		if (r < 0) {
			up__lock_drop(e, &l->word);
			return r == -EPROTO ? up__proto_error(p) : r;
		}
	}
	if (e->bias_off || l != up__own_lock(e))
		return 0;
	/* The only end of our side: bias the lock to this end.
	 * relaxed: the count is a hint; an end that joins meanwhile takes the
	 * bias back. */
	ends = atomic_load_explicit(l == &p->ln->wlock ? &p->ln->state.writers
						       : &p->ln->state.readers,
				    memory_order_relaxed);
	if (up__side_open(ends) == 1 && up__membarrier_registered(e->pid, &sc)) {
		/* Before the bias: see bias_forged(). */
		up__held_set(e, UP_HELD_BIAS);
		/* relaxed: published by the word's release below. */
		atomic_store_explicit(e->busy, UP_BUSY_IN, memory_order_relaxed);
		/* [wait] sc: a writer's bias before the word's release and every
		 * release store of len it allows; pairs with [wait] sc in
		 * up__wait_fence(). */
		atomic_store_explicit(&l->bias, e->lock_id, memory_order_seq_cst);
		e->biased = true;
		up__lock_drop(e, &l->word);
	}
	up__count(&e->c.syscalls, sc);
	return 0;
}

/*
 * Take @l only if that costs no wait, after the bias owner's entry failed:
 * one attempt on the word, which must carry no bias (taking a bias back
 * means waiting for its owner). 0 with the lock held, or -EAGAIN. An owner
 * whose bias was taken back has acknowledged that and tries the word like
 * anyone else.
 */
int up__biased_try_slow(struct up_end *e, struct up_shm_lock *l)
{
	if (!up__lock_try(e, &l->word))
		return -EAGAIN;
	/* relaxed: written only by holders of the word, which we are. */
	if (atomic_load_explicit(&l->bias, memory_order_relaxed) != 0) {
		up__lock_drop(e, &l->word);
		return -EAGAIN;
	}
	return 0;
}

/* An end closing: give its bias up, so the next end of its side need not
 * take it back with a barrier. Never blocks (close must not). */
void up__bias_give_up(struct up_end *e)
{
	struct up_shm_lock *l = up__own_lock(e);

	if (!e->biased)
		return;
	e->biased = false;
	e->last_ok = false;
	/* Out for good: a revoker that could not fence waits for this.
	 * [busy] rel: pairs with [busy] acq in bias_revoke(). */
	atomic_store_explicit(e->busy, UP_BUSY_ACK, memory_order_release);
	up__held_clear(e, UP_HELD_BIAS);
	up__busy_wake(e);
	if (up__lock_take(e, &l->word, true) < 0)
		return; /* a revoker holds it: it finds us out */
	/* Ours, marked or not: a taker that gave up on us (non-blocking)
	 * leaves its mark, and nobody needs to wait for us any more.
	 * relaxed: under the word, whose release publishes them. */
	if ((atomic_load_explicit(&l->bias, memory_order_relaxed) & ~UP_BIAS_REVOKE) ==
	    e->lock_id) {
		/* [wait] rel: our len stores before the clear; pairs with [wait]
		 * sc in up__wait_fence(). */
		atomic_store_explicit(&l->bias, 0, memory_order_release);
		/* relaxed: under the word, whose release publishes them. */
		atomic_store_explicit(&l->fenced, 0, memory_order_relaxed);
		atomic_store_explicit(&l->marked_ns, 0, memory_order_relaxed);
	}
	up__lock_drop(e, &l->word);
}

/*
 * The readers' lock may be held: its word names a holder, or its bias owner
 * is inside. A hint, for looks that only decide whether to wait or to
 * believe a state that persists (reclaim.c, wait.c).
 */
/* @l's bias owner is inside its critical section: a hint. */
static bool bias_owner_inside(struct up_pipe *p, struct up_shm_lock *l)
{
	/* relaxed: a hint; see the callers. */
	uint32_t idx = atomic_load_explicit(&l->bias, memory_order_relaxed) & UP_END_ROLE_MASK;

	/* relaxed: as above. */
	return idx != 0 && idx <= p->g.max_ends &&
	       atomic_load_explicit(&p->ends[idx - 1].busy, memory_order_relaxed) == UP_BUSY_IN;
}

bool up__rlock_busy(struct up_pipe *p)
{
	struct up_shm_lock *l = &p->ln->rlock;

	/* relaxed: a hint, as above. */
	if (up__lock_owner(atomic_load_explicit(&l->word, memory_order_relaxed)) != 0)
		return true;
	return bias_owner_inside(p, l);
}

/*
 * The writers' lock may be held by a writer inside it: its word names an
 * endpoint whose held word claims it (takeback.c, up__take_back()), or its bias
 * owner is inside. A hint, for the lost pool's look (reclaim.c): a writer
 * tags a batch for the ring under this lock before it publishes it. A word
 * that names nobody who claims it is no holder; nobody who waits for pages
 * takes this lock, so nobody would clear it.
 */
bool up__wlock_busy(struct up_pipe *p)
{
	struct up_shm_lock *l = &p->ln->wlock;
	/* relaxed: a hint, as above. */
	uint32_t w = atomic_load_explicit(&l->word, memory_order_relaxed) & UP_END_ROLE_MASK;

	/* relaxed: as above. */
	if (w != 0 && w <= p->g.max_ends &&
	    (atomic_load_explicit(&p->ends[w - 1].held, memory_order_relaxed) & UP_HELD_WLOCK))
		return true;
	return bias_owner_inside(p, l);
}

/*
 * Poll mode, the lock biased to another writer that is inside (a reservation
 * held open, say): a non-blocking take marked the bias, fenced the owner and
 * gave up (bias_revoke()). Wait on the owner's busy word while it reads
 * UP_BUSY_IN, as a blocking taker sleeps on it: the owner's next drop (or
 * failed entry, or close) loads the bias after its busy store, sees the
 * mark, because the barrier came before, and wakes every sleeper on busy.
 * Only for a fenced mark: without the barrier that load may miss the mark,
 * and poll mode has no sleep slices to fall back on. 0 armed, or 1 (retry).
 */
static int bias_poll_arm(struct up_end *w, _Atomic uint32_t **word, uint32_t *expect)
{
	struct up_pipe *p = w->p;
	struct up_shm_lock *l = &p->ln->wlock;
	/* [bias] sc: the mark as the revoker stored it; pairs with [bias] sc
	 * in bias_revoke(). */
	uint32_t b = atomic_load_explicit(&l->bias, memory_order_seq_cst);
	uint32_t owner = b & ~UP_BIAS_REVOKE, idx = owner & UP_END_ROLE_MASK;
	_Atomic uint32_t *busy;

	/* [bias] sc: fenced is stored after the barrier; pairs with [bias] mb
	 * in bias_revoke(). */
	if (!(b & UP_BIAS_REVOKE) || owner == w->lock_id || idx == 0 || idx > p->g.max_ends ||
	    atomic_load_explicit(&l->fenced, memory_order_seq_cst) != owner)
		return 1;
	busy = &p->ends[idx - 1].busy;
	/* [busy] sc: the owner's state after the barrier; pairs with [busy]
	 * rel in up__bias_leave_own(). */
	if (atomic_load_explicit(busy, memory_order_seq_cst) != UP_BUSY_IN)
		return 1;
	/* Dead inside (maybe reaped already): nobody will wake us; a retry
	 * passes it (bias_revoke()). */
	if (up__lock_owner_gone(w, owner))
		return 1;
	w->armed = UP_ARMED_EXTERNAL;
	w->armed_on = UP_ARMED_ON_BUSY;
	*word = busy;
	*expect = UP_BUSY_IN;
	up__count(&w->c.waits, 1);
	return 0;
}

/*
 * Poll mode for a writer with pages to write into that a non-blocking call
 * found held up by the writers' lock: another writer holds the word, over
 * its small reservation or a publish. The end waits on the lock word itself,
 * as up__lock_take_slow() sleeps on it: it counts itself in the lock's
 * npoll, sets the waiters bit and hands back the word and the value to wait
 * on. The holder's drop sees the bit and, npoll being non-zero, wakes every
 * sleeper on the word (up__lock_wake(); tests/model/lock.pml, -DPOLLER). A
 * holder that dies is seen through the peers' pidfds that the poll ring
 * watches; one already dead makes the arm return 1.
 *
 * A lock biased to another writer is waited for on that owner's busy word
 * instead (bias_poll_arm()). Returns 0 armed (*word, *expect), 1 when the
 * lock is not held by another end (try again), or -EPROTO.
 */
int up__wlock_poll_arm(struct up_end *w, _Atomic uint32_t **word, uint32_t *expect)
{
	struct up_pipe *p = w->p;
	struct up_shm_lock *l = &p->ln->wlock;
	uint32_t cur, owner;

	/* [lock-poll] sc: a first look at the holder, the CAS below decides;
	 * pairs with [lock-poll] sc in up__lock_drop(). */
	owner = up__lock_owner(atomic_load_explicit(&l->word, memory_order_seq_cst));
	if (owner == 0)
		return bias_poll_arm(w, word, expect);
	if (owner == w->lock_id)
		return 1;
	/* [lock-poll] sc: npoll before the bit, so a drop that takes our bit
	 * sees the count; pairs with [lock-poll] sc in up__lock_wake(). */
	atomic_fetch_add_explicit(&l->npoll, 1, memory_order_seq_cst);
	/* [lock-poll] sc: after the count; pairs with [lock-poll] sc in
	 * up__lock_drop(). */
	cur = atomic_load_explicit(&l->word, memory_order_seq_cst);
	owner = up__lock_owner(cur);
	if (owner != 0 && owner != w->lock_id &&
	    ((owner & UP_END_ROLE_MASK) == 0 || (owner & UP_END_ROLE_MASK) > p->g.max_ends)) {
		/* [lock-poll] sc: undoes the count above; pairs with
		 * [lock-poll] sc in up__lock_wake(). */
		atomic_fetch_sub_explicit(&l->npoll, 1, memory_order_seq_cst);
		return up__proto_error(p);
	}
	/* [lock-poll] sc: the bit, after the count; pairs with [lock-poll] sc
	 * in up__lock_drop(). */
	if (owner == 0 || owner == w->lock_id ||
	    (!(cur & UP_LOCK_WAITERS) &&
	     !atomic_compare_exchange_strong_explicit(&l->word, &cur, cur | UP_LOCK_WAITERS,
						      memory_order_seq_cst,
						      memory_order_seq_cst))) {
		/* Let go meanwhile, or changed hands: try again.
		 * [lock-poll] sc: undoes the count above; pairs with
		 * [lock-poll] sc in up__lock_wake(). */
		atomic_fetch_sub_explicit(&l->npoll, 1, memory_order_seq_cst);
		return 1;
	}
	/* A holder that died (maybe reaped already) never lets go, and its
	 * pidfd may never have been taken: a retry takes the lock over. The
	 * bit we set stays; it costs one wake at most. */
	/* So does a live one whose held does not claim the lock: the word
	 * was stored by somebody else, and nobody would ever drop it; a
	 * retry takes it back (takeback.c, up__take_back()).
	 * [held] sc: our seq_cst load of the word read the holder's take,
	 * which released its bit; pairs with [held] rel in up__lock_take()
	 * and up__held_clear(). */
	if (up__lock_owner_gone(w, owner) ||
	    !(atomic_load_explicit(&p->ends[(owner & UP_END_ROLE_MASK) - 1].held,
				   memory_order_seq_cst) & UP_HELD_WLOCK)) {
		/* [lock-poll] sc: undoes the count above; pairs with
		 * [lock-poll] sc in up__lock_wake(). */
		atomic_fetch_sub_explicit(&l->npoll, 1, memory_order_seq_cst);
		return 1;
	}
	up__announce_mark(w, UP_ARMED_LINE_WLOCK | UP_ARMED_LINE_POLL);
	w->armed = UP_ARMED_EXTERNAL;
	w->armed_on = UP_ARMED_ON_WORD;
	*word = &l->word;
	*expect = cur | UP_LOCK_WAITERS;
	up__count(&w->c.waits, 1);
	return 0;
}
