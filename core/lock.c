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

/* Does the lock id @o name an entry of the endpoint table at all? A peer's
 * store may name none, and no index is taken from it before this says so. */
static bool names_end(const struct up_end *e, uint32_t o)
{
	uint32_t r = o & UP_END_ROLE_MASK;

	return r != 0 && r <= e->p->g.max_ends;
}

/*
 * Where the end at @idx keeps the value its take-back claim of @lk replaced
 * (dead_claim()): one word per end and lock, so that a later end in a dead
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
		if (!(v & UP_LOCK_CLAIM) || !names_end(e, o) || o == e->lock_id ||
		    !up__lock_owner_gone(e, o))
			break;
	}
	return v;
}

/*
 * Steps 2 and 3 of take_back(), our claim made. Returns as take_back().
 */
static int resolve(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, _Atomic uint32_t *held,
		   uint32_t bit, uint32_t keep, bool nonblock, bool *ran_out)
{
	const uint32_t claim = e->lock_id | UP_LOCK_CLAIM;
	uint64_t until = 0, now, sc;
	uint32_t w, w2, to, zown, zheld, v;
	bool give, slept = false;
	unsigned int i;

	for (i = 0;; i++) {
		/* Step 2. [held] sc: after the claim; pairs with [held] rel
		 * in up__held_clear() and up__lock_take(). */
		give = atomic_load_explicit(held, memory_order_seq_cst) & bit;
		/* A claim we claimed over, whose maker has died since: its
		 * entry may be another end's now, whose held word says nothing
		 * of that claim. Given back, for dead_claim() to resolve. The
		 * look comes after the held word's: a maker alive here was
		 * alive there (a new end's held is stored after its entry's
		 * state, up__end_claim()). */
		if (!give && (cur & UP_LOCK_CLAIM) && up__lock_owner_gone(e, up__lock_owner(cur)))
			give = true;
		/* [held] sc: as the claim; pairs with [held] sc in take_back(),
		 * another taker's restore of our claim. */
		w = atomic_load_explicit(lk, memory_order_seq_cst);
		/* Step 3, keeping the waiters bit that a waiter may have set on
		 * our claim. A waiter may have gone to sleep on it: the change
		 * must wake every such sleeper, as a hand-off does, since one
		 * may be another claimer's resolve() rather than a taker.
		 * [held] sc: pairs with [held] sc in take_back(), a later
		 * taker's first look. Also [lock] acq: pairs with [lock] rel
		 * in up__lock_drop(). */
		while ((w & ~UP_LOCK_WAITERS) == claim) {
			to = (give ? cur : e->lock_id | keep) | (w & UP_LOCK_WAITERS);
			if (atomic_compare_exchange_weak_explicit(lk, &w, to, memory_order_seq_cst,
								  memory_order_seq_cst)) {
				if (w & UP_LOCK_WAITERS)
					up__lock_wake(e, lk, true);
				return give ? -1 : 1;
			}
		}
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
		if (!names_end(e, zown))
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
				/* [held] sc: as our claim; pairs with [held]
				 * sc in take_back(), a later taker's first
				 * look. */
				if (atomic_compare_exchange_strong_explicit(
					    lk, &w, claim | (w & UP_LOCK_WAITERS),
					    memory_order_seq_cst, memory_order_seq_cst) &&
				    (w & UP_LOCK_WAITERS))
					up__lock_wake(e, lk, true);
				i = 0;
				continue;
			}
			zown = up__lock_owner(v);
			if (!(v & UP_LOCK_CLAIM) || !names_end(e, zown) ||
			    up__lock_owner_gone(e, zown))
				goto leave;
		}
		/* [held] sc: the maker's clear comes after its resolve; pairs
		 * with [held] rel in up__held_clear(), after the resolve in
		 * take_back(). */
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
		 * take_back(). */
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
 * outlives its maker's take only if the maker dies. Without the bit a claim was a plain id, and X's restore of
 * it, after its maker had stopped waiting for it, read as a hold: two
 * holders.
 *
 * A claimer that dies between its claim and its resolve leaves its claim in
 * the word, and with it, in under(), the value the claim replaced, stored
 * before the claim: whoever finds the dead claim resolves it as its maker
 * would have (dead_claim(), through claims of makers that died too:
 * dead_chain()); a claimer under it puts its own back (resolve()); and one
 * that claimed over a claim whose maker has died since gives that claim
 * back rather than trust the held word of its maker's entry, which may be
 * another end's now. What escapes this: a plain store (a peer of ours
 * scribbling, which could as well store anything; we wait for a stored
 * claim one slice at most, or, if the peer also stored UP_HELD_CLAIM in the
 * named end's held word, until that end's next take, whose own held store
 * ends it).
 */
static int take_back(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t owner,
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
	 * (dead_claim()). relaxed: the claim's CAS below publishes it. */
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

/* dead_claim()'s verdicts besides a take (1) and a look again (0). */
#define UP_DEAD_CLAIM_WAIT 2

/*
 * The word @cur is a claim whose maker died inside take_back(), between its
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
static int dead_claim(struct up_end *e, _Atomic uint32_t *lk, uint32_t cur, uint32_t keep)
{
	struct up_pipe *p = e->p;
	uint32_t v, o, oi, h, w = cur;

	v = dead_chain(e, lk, cur);
	o = up__lock_owner(v);
	oi = o & UP_END_ROLE_MASK;
	if (names_end(e, o) && o != e->lock_id && !up__lock_owner_gone(e, o)) {
		/* [held] sc: after the look at the word; pairs with [held] rel
		 * in up__lock_take() and up__held_clear(). */
		h = atomic_load_explicit(&p->ends[oi - 1].held, memory_order_seq_cst);
		if (v & UP_LOCK_CLAIM) {
			if (h & UP_HELD_CLAIM)
				return UP_DEAD_CLAIM_WAIT;
		} else if (h & up__held_bit(e, lk)) {
			/* [held] sc: as a claim's resolve; pairs with [held]
			 * sc in take_back(), a later taker's first look. */
			if (atomic_compare_exchange_strong_explicit(
				    lk, &w, o | (cur & UP_LOCK_WAITERS), memory_order_seq_cst,
				    memory_order_relaxed) &&
			    (cur & UP_LOCK_WAITERS))
				up__lock_wake(e, lk, true);
			return 0;
		}
	}
	/* [lock] acq: pairs with [lock] rel in up__lock_drop(). Also [held]
	 * rel: our held bit before the word names us; pairs with [held] sc
	 * in take_back(). */
	return atomic_compare_exchange_strong_explicit(lk, &w,
						       e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
						       memory_order_acq_rel, memory_order_relaxed);
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
 *     (claimed_wait()). Still in its take, it confirms the word; past its
 *     deadline or cancelled, it leaves all the same, and lets go of a word
 *     that came (up__lock_give_up()).
 *
 * So the word can come to name a live end that is no longer inside a call
 * for the lock (a holder preempted for a slice between its claim and its
 * exchange; a peer's store of the same). That end does not hold the
 * lock, and its held word says so: anyone else takes the word back
 * (take_back()), and the end itself, at its next take, confirms the word
 * with a CAS and holds it. A holder that dies between the claim and the
 * exchange leaves the word naming it, dead, and is taken over as any dead
 * holder. A value in handoff that names no endpoint is garbage from a
 * peer: cleared, nothing handed.
 */

/* Drop: the word for the next holder, claimed from handoff, which the
 * caller saw holding @h (nonzero); 0 when nothing is handed. */
uint32_t up__lock_pass(struct up_end *e, _Atomic uint32_t *lk, uint32_t h)
{
	bool valid = names_end(e, h) && !(h & UP_LOCK_FLAGS) &&
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
 * end out of its take, which anyone takes back (take_back()), and which
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
	 * store ran out (claimed_wait(), or take_back() behind a claim
	 * whose maker is not inside a claim): later such waits are
	 * skipped. */
	bool queued = false, ran_out = false;
	unsigned int i;
	int r, took;

	for (i = 0;; i++) {
		/* [held] sc: a look (the lock is ours only through a CAS,
		 * which acquires), before take_back()'s look at the owner's
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
			 * claim of ours here is none we made (take_back()
			 * stays until its own is resolved or exchanged over,
			 * or lost under a peer's stored claim) but a peer's
			 * store: taken as handed, without the bit.
			 * [held] sc: as a take's CAS, after our held bit;
			 * pairs with [held] sc in take_back(). Also [lock]
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
			 * us; pairs with [held] sc in take_back(). */
			if (atomic_compare_exchange_weak_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acq_rel, memory_order_relaxed))
				goto taken;
			continue;
		}
		if (!names_end(e, owner) || up__is_broken(p)) {
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
				took = dead_claim(e, lk, cur, keep);
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
			 * take_back(). */
			if (atomic_compare_exchange_strong_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acq_rel, memory_order_relaxed))
				goto taken;
			continue;
		}
		/* Maybe live but not inside a call for this lock: a stored id
		 * (take_back() looks). A queued waiter leaves handoff first:
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
		took = take_back(e, lk, cur, owner, keep, nonblock, &ran_out);
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

/*
 * A take that failed: out of the lock's held bit, and a word handed to us
 * meanwhile let go (a claim of us that our unqueue lost). Without this, a
 * waiter that saw the word handed to us while our held bit was still set
 * would sleep on it with nobody left to wake it. A hand-off that lands
 * after our look here comes after our clear too: its holder wakes every
 * sleeper, and whoever looks then takes the word back (take_back()).
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
