/* SPDX-License-Identifier: MIT */
/*
 * takeback.c - taking a lock word back from a value that does not stand
 * for a holder (lock.h): a word handed to an end after it left its take, a
 * peer's store of a live end's id, and a take-back's claim whose maker
 * died inside it. Called from a taker's slow path (take.c) only.
 */
#include <sched.h>

#include "ring.h"

/*
 * Where the end at @idx keeps the value its take-back claim of @lk replaced
 * (up__dead_claim()): one word per end and lock, so that a later end in a dead
 * claimer's entry, which can only take back the other lock while the dead
 * claim stands in this one, never writes over it.
 */
static _Atomic uint32_t *under(struct up_end *e, _Atomic uint32_t *lk, uint32_t idx)
{
	return &e->p->under[(up__held_bit(e, lk) == UP_HELD_WLOCK) * e->p->g.max_ends + idx];
}

/*
 * Below @w, a claim whose maker is dead: the value its claim replaced, and
 * below that again while it is itself a claim of a dead maker, at most
 * max_ends times (a peer's stores may make a loop). Returns the first value
 * that is not: a plain id, our own claim, a live end's claim, or one that
 * names no endpoint.
 */
static uint32_t dead_chain(struct up_end *e, _Atomic uint32_t *lk, uint32_t w)
{
	uint32_t v = w, o, k;

	for (k = 0; k < e->p->g.max_ends; k++) {
		/* relaxed: stored before that claim's CAS, which the caller's
		 * seq_cst load of the word acquired, directly or through the
		 * claims over it ([held] sc). */
		v = atomic_load_explicit(under(e, lk, (up__lock_owner(v) & UP_END_ROLE_MASK) - 1),
					 memory_order_relaxed);
		o = up__lock_owner(v);
		if (!(v & UP_LOCK_CLAIM) || !up__names_end(e, o) || o == e->lock_id ||
		    !up__lock_owner_gone(e, o))
			break;
	}
	return v;
}

/*
 * A claim resolved or put back, or a dead claim replaced by what its maker
 * would have stored: the word from *@w to @to, keeping the waiters bit that
 * a waiter may have set on the claim. A waiter may have gone to sleep on it,
 * so the change wakes every sleeper, as a hand-off does, since one may be a
 * claimer's resolve() rather than a taker. False, with *@w the word now,
 * when the word was no longer *@w.
 */
static bool settle(struct up_end *e, _Atomic uint32_t *lk, uint32_t *w, uint32_t to)
{
	/* [held] sc: pairs with [held] sc in up__take_back(), a later taker's
	 * first look. Also [lock] acq: a resolve to a hold; pairs with [lock]
	 * rel in up__lock_drop(). */
	if (!atomic_compare_exchange_strong_explicit(lk, w, to | (*w & UP_LOCK_WAITERS),
						     memory_order_seq_cst, memory_order_seq_cst))
		return false;
	if (*w & UP_LOCK_WAITERS)
		up__lock_wake(e, lk, true);
	return true;
}

/*
 * Steps 2 and 3 of up__take_back(), our claim made. Returns as
 * up__take_back().
 */
static int resolve(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, _Atomic uint32_t *held,
		   uint32_t bit, uint32_t keep, bool nonblock, bool *ran_out)
{
	const uint32_t claim = e->lock_id | UP_LOCK_CLAIM;
	uint64_t until = 0, now, sc;
	uint32_t w, w2, zown, zheld, v;
	bool give, slept = false;
	unsigned int i;

	for (i = 0;; i++) {
		/* Step 2. [held] sc: after the claim; pairs with [held] rel
		 * in up__held_clear() and up__lock_take(). */
		give = atomic_load_explicit(held, memory_order_seq_cst) & bit;
		/* A claim we claimed over, whose maker has died since: its
		 * entry may be another end's now, whose held word says nothing
		 * of that claim. Given back, for up__dead_claim() to resolve. The
		 * look comes after the held word's: a maker alive here was
		 * alive there (a new end's held is stored after its entry's
		 * state, up__end_claim()). */
		if (!give && (cur & UP_LOCK_CLAIM) && up__lock_owner_gone(e, up__lock_owner(cur)))
			give = true;
		/* [held] sc: as the claim; pairs with [held] sc in settle(),
		 * another taker's restore of our claim. */
		w = atomic_load_explicit(lk, memory_order_seq_cst);
		/* Step 3 (settle()). */
		while ((w & ~UP_LOCK_WAITERS) == claim)
			if (settle(e, lk, &w, give ? cur : e->lock_id | keep))
				return give ? -1 : 1;
		/* A drop (or a takeover) exchanged over our claim. */
		if (!(w & UP_LOCK_CLAIM))
			break;
		/* Another's claim stands over ours (or over what replaced
		 * ours). Its maker gives ours back, since our held bit is set,
		 * or a drop ends both: we must not leave before, or our claim
		 * would come back to a word we no longer resolve. A maker
		 * inside its claim (UP_HELD_CLAIM) resolves a few instructions
		 * on, however long it is preempted: wait for it, past our
		 * deadline too, asleep once the backoff has run out. One that
		 * is dead never will: if its claim replaced ours, we put ours
		 * back ourselves. One that is not inside a
		 * claim has resolved it, or did not make it (a peer's store:
		 * waited for a slice at most, and not at all by a non-blocking
		 * caller or once a wait of this call has run out). */
		if (up__backoff(e, i, nonblock))
			continue;
		zown = up__lock_owner(w);
		if (!up__names_end(e, zown))
			goto leave;
		if (up__lock_owner_gone(e, zown)) {
			/* It died inside its take-back. Below its claim, past
			 * claims of makers that died too (dead_chain()): ours,
			 * which we put back and resolve; or a live end's
			 * claim, which may stand over ours and whose maker will
			 * put its own back, so that we wait for it as for a
			 * live maker over us; or anything else, and ours is
			 * not there. */
			v = dead_chain(e, lk, w);
			if ((v & ~UP_LOCK_WAITERS) == claim) {
				(void)settle(e, lk, &w, claim);
				i = 0;
				continue;
			}
			zown = up__lock_owner(v);
			if (!(v & UP_LOCK_CLAIM) || !up__names_end(e, zown) ||
			    up__lock_owner_gone(e, zown))
				goto leave;
		}
		/* [held] sc: the maker's clear comes after its resolve; pairs
		 * with [held] rel in up__held_clear(), after the resolve in
		 * up__take_back(). */
		zheld = atomic_load_explicit(&e->p->ends[(zown & UP_END_ROLE_MASK) - 1].held,
					     memory_order_seq_cst);
		if (!(zheld & UP_HELD_CLAIM)) {
			if (nonblock || *ran_out)
				goto leave;
			now = up__now_ns();
			if (until == 0) {
				until = now + UP_WAIT_SLICE_NS;
			} else if (now >= until) {
				*ran_out = true;
				goto leave;
			}
			sched_yield();
			up__count(&e->c.syscalls, 1);
			continue;
		}
		until = 0;
		/* Asleep on the word with its waiters bit, so that the
		 * maker's restore (or its resolve to a hold) wakes us.
		 * relaxed: as a waiter's bit in up__lock_take_slow(). */
		if (!(w & UP_LOCK_WAITERS) &&
		    !atomic_compare_exchange_weak_explicit(lk, &w, w | UP_LOCK_WAITERS,
							   memory_order_relaxed, memory_order_relaxed))
			continue;
		sc = 0;
		slept = true;
		e->waker->ops->wait(e->waker, lk, w | UP_LOCK_WAITERS, UP_WAIT_SLICE_NS, NULL, 0,
				    &sc);
		up__count(&e->c.syscalls, sc);
		continue;
leave:
		/* A maker that gave ours back just before its clear or its
		 * death: ours is in the word again, and ours to resolve, or a
		 * later claim already stands over it, whose maker must be
		 * judged in turn (each such round needs the word to have
		 * changed; yielded, since a peer's stores can change it).
		 * [held] sc: after the look at its held word; pairs with
		 * [held] rel in up__held_clear(), after the resolve in
		 * up__take_back(). */
		w2 = atomic_load_explicit(lk, memory_order_seq_cst);
		if ((w2 & ~UP_LOCK_WAITERS) == claim)
			continue;
		if ((w2 & UP_LOCK_CLAIM) && (w2 & ~UP_LOCK_WAITERS) != (w & ~UP_LOCK_WAITERS)) {
			sched_yield();
			up__count(&e->c.syscalls, 1);
			continue;
		}
		break;
	}
	/* A wake-one that came to our sleep was maybe a drop's for a taker:
	 * passed on. */
	if (slept)
		up__lock_wake(e, lk, false);
	return 0;
}

/*
 * The word @cur names a live endpoint @owner (not us): take the lock back if
 * @owner's held word does not claim it, i.e. the value was stored by
 * somebody else (a hand-off that came after its end had left, a peer's
 * store). Returns 1 with the lock held by us, 0 to go on waiting (the owner
 * claims it, the word changed, or a peer's stored claim stood over ours:
 * for a slice at most, and *@ran_out is then set), -1 when it gave the
 * word back (the caller
 * must look again before it sleeps: the word it read is what it restored,
 * and the restore's wake may have come and gone). Three steps:
 *
 *   1. claim: CAS the word from @cur to our id with UP_LOCK_CLAIM, which
 *      tells everyone that the word names a taker, not a holder;
 *   2. re-read the owner's held (seq_cst);
 *   3. resolve, by a CAS from our claim: back to @cur if the owner claims
 *      the lock, else to our id alone, and we hold it.
 *
 * Why this never takes the lock from a holder H that got it by its CAS.
 * Say our claim CAS read the value H's take CAS wrote (else H did not hold
 * it then). H stored its held bit before that CAS, which releases it, and
 * our claim acquires it ([held] rel/sc): our re-read in step 2 sees the bit
 * or a later store of H's held. H's later stores are its clear after a
 * drop, or a re-take's set. A set: we restore. A clear: it is a release
 * after H's drop exchange, so the drop came before our resolve, which then
 * finds 0 or a later taker's id, not our claim: we go on waiting. The ABA
 * case (H drops and takes again between our first look and our claim) is
 * the same: our claim read H's new CAS, whose held bit we see.
 *
 * Why a restore never brings back a value that no longer stands. Only we
 * resolve our claim, and while it is in the word nobody holds through it.
 * Another taker X can claim over it (X read our claim from an earlier take
 * of ours and looked at our held word between the two takes: an ABA). X
 * then sees our held bit, set for our whole take, and gives our claim
 * back; we wait for it while X says it is inside a claim (UP_HELD_CLAIM),
 * however long X is preempted and past our deadline, and resolve it
 * ourselves. A drop by the real holder exchanges over either claim, after
 * which both resolving CASes fail. So a restore writes back the value its
 * claim replaced while that value still stands, and an honest claim
 * outlives its maker's take only if the maker dies. Without the bit a
 * claim was a plain id, and X's restore of it, after its maker had stopped
 * waiting for it, read as a hold: two holders.
 *
 * A claimer that dies between its claim and its resolve leaves its claim in
 * the word, and with it, in under(), the value the claim replaced, stored
 * before the claim: whoever finds the dead claim resolves it as its maker
 * would have (up__dead_claim(), through claims of makers that died too:
 * dead_chain()); a claimer under it puts its own back (resolve()); and one
 * that claimed over a claim whose maker has died since gives that claim
 * back rather than trust the held word of its maker's entry, which may be
 * another end's now. What escapes this: a plain store (a peer of ours
 * scribbling, which could as well store anything; we wait for a stored
 * claim one slice at most, or, if the peer also stored UP_HELD_CLAIM in the
 * named end's held word, until that end's next take, whose own held store
 * ends it).
 */
int up__take_back(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t owner,
		  uint32_t keep, bool nonblock, bool *ran_out)
{
	_Atomic uint32_t *held = &e->p->ends[(owner & UP_END_ROLE_MASK) - 1].held;
	const uint32_t bit = up__held_bit(e, lk), claim = e->lock_id | UP_LOCK_CLAIM;
	uint32_t w = cur;
	int r;

	/* [held] sc: a first look; pairs with [held] rel in up__held_clear()
	 * and up__lock_take(). */
	if (atomic_load_explicit(held, memory_order_seq_cst) & bit)
		return 0;
	/* Until our claim is resolved or gone: a taker that finds another's
	 * claim over its own waits for that claim's maker only while this
	 * says it is inside one. */
	up__held_set(e, UP_HELD_CLAIM);
	/* What our claim replaces, for whoever finds it after we died inside
	 * (up__dead_claim()). relaxed: the claim's CAS below publishes it. */
	atomic_store_explicit(under(e, lk, e->idx), cur, memory_order_relaxed);
	/* Step 1. [held] sc: the claim acquires the owner's take CAS; pairs
	 * with [held] rel in up__lock_take() and up__lock_take_slow(). Also
	 * [lock] acq: pairs with [lock] rel in up__lock_drop(). */
	if (atomic_compare_exchange_strong_explicit(lk, &w, claim | (cur & UP_LOCK_WAITERS),
						    memory_order_seq_cst, memory_order_relaxed))
		r = resolve(e, lk, cur, held, bit, keep, nonblock, ran_out);
	else
		r = 0;
	up__held_clear(e, UP_HELD_CLAIM);
	return r;
}

/*
 * The word @cur is a claim whose maker died inside up__take_back(), between its
 * claim and its resolve. Taking it over as a dead holder's would make two
 * holders whenever the claim stood over a real one, so we do what the maker
 * would have done, from the value its claim replaced (under[maker], stored
 * before the claim, so seen by whoever saw the claim), or below it, past
 * claims of makers that died too (dead_chain()):
 *
 *   - a plain id of a live end whose held word claims the lock: restored
 *     (that end holds, or is taking it and confirms it as a word handed to
 *     it); our load of the word acquired the maker's claim, which acquired
 *     that end's take CAS, so its held bit is seen if it held then, and it
 *     cannot have let go since (its drop would have exchanged over the
 *     claim, which our CAS then finds gone);
 *   - a claim of a live end inside its own take-back (UP_HELD_CLAIM): ours
 *     to wait for, since that end puts its own back and resolves it
 *     (resolve());
 *   - anything else (a dead end, one that does not claim the lock, us, a
 *     value that names no endpoint): taken over, as from a dead holder.
 *
 * Returns 1 with the lock held by us, 0 to look again, UP_DEAD_CLAIM_WAIT
 * to sleep on the word (or give up, non-blocking).
 */
int up__dead_claim(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t keep)
{
	struct up_pipe *p = e->p;
	uint32_t v, o, oi, h, w = cur;

	v = dead_chain(e, lk, cur);
	o = up__lock_owner(v);
	oi = o & UP_END_ROLE_MASK;
	if (up__names_end(e, o) && o != e->lock_id && !up__lock_owner_gone(e, o)) {
		/* [held] sc: after the look at the word; pairs with [held] rel
		 * in up__lock_take() and up__held_clear(). */
		h = atomic_load_explicit(&p->ends[oi - 1].held, memory_order_seq_cst);
		if (v & UP_LOCK_CLAIM) {
			if (h & UP_HELD_CLAIM)
				return UP_DEAD_CLAIM_WAIT;
		} else if (h & up__held_bit(e, lk)) {
			(void)settle(e, lk, &w, o);
			return 0;
		}
	}
	/* [lock] acq: pairs with [lock] rel in up__lock_drop(). Also [held]
	 * rel: our held bit before the word names us; pairs with [held] sc
	 * in up__take_back(). */
	return atomic_compare_exchange_strong_explicit(lk, &w,
						       e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
						       memory_order_acq_rel, memory_order_relaxed);
}
