/* SPDX-License-Identifier: MIT */
/*
 * wait.c - the sleeper's half of the handshake (wake.h, docs/DESIGN.md
 * "Sleeping and waking"): readiness checks, the spin window, announcing,
 * and sleeping in slices.
 *
 * One spinner per line: readers spinning on two cores for the same data
 * take the cores the writer needs to produce it. The first waiter claims
 * the line's spin window and spins; the others sleep at once and are woken
 * one at a time as data comes. The window is a deadline, not a flag, so a
 * spinner that dies leaves nothing stuck.
 */
#include <sched.h>

#include "bias.h"

/* Readable: a byte in some live slot, or end of stream (writers came and
 * left), or broken.
 * A lock-free hint: tail and off may move under us (other readers); the
 * caller re-checks under the readers' lock. */
int up__rd_ready(struct up_end *r)
{
	struct up_pipe *p = r->p;
	uint32_t t, h, w;

	if (up__is_broken(p))
		return -EPROTO;
	/* [tail] sc: the sleeper's re-check loads come after its nwait
	 * increment; tail itself pairs with [tail] rel in up__read_locked(). */
	uint64_t pos = atomic_load_explicit(&p->ln->cons.pos, memory_order_seq_cst);

	t = up__pos_tail(pos);
	/* [wait] sc: re-check; pairs with [wait] sc in up__progress_store(). */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_seq_cst);
	if (h - t >= 2)
		return 1;
	if (h - t == 1) {
		struct up_shm_slot *s = up__slot_at(p, t);

		/* [wait] sc: re-check; pairs with [wait] sc in up__progress_store(). */
		if (up__pos_off(pos) < atomic_load_explicit(&s->len, memory_order_seq_cst))
			return 1;
	}
	/* [wait] sc: re-check; pairs with [wait] sc in up__side_leave(). */
	w = atomic_load_explicit(&p->ln->state.writers, memory_order_seq_cst);
	if (up__side_gone(w))
		return 1;
	/* Writers came: whatever is stored later, they cannot un-come (peer.c,
	 * counts_repair()). */
	if (w & UP_COUNT_EVER)
		r->came |= UP_CAME_WRITERS;
	return 0;
}

/* Writable: a free page in the pool beyond the spare ones, or readers came
 * and none is left, or broken. Counters that do not add up count as writable: the take
 * that follows finds them out. */
int up__wr_ready(struct up_end *w)
{
	struct up_pipe *p = w->p;
	uint32_t put, get, rd;

	if (up__is_broken(p))
		return -EPROTO;
	if (w->ncache > w->resv_pages)
		return 1;
	/* [wait] sc: the sleeper's re-check loads; pairs with [wait] sc in
	 * up__pool_put() (the progress store). */
	put = atomic_load_explicit(&p->ln->pput.put, memory_order_seq_cst);
	/* [wait] sc: re-check (a rising get never makes us ready); pairs with
	 * [wait] sc in up__pool_put(). */
	get = atomic_load_explicit(&p->ln->pget.get, memory_order_seq_cst);
	if (put - get > p->g.spare_pages)
		return 1;
	/* [wait] sc: re-check, the hot page (pagepool.c); pairs with [wait] sc
	 * in up__pool_put_hot(). */
	if (atomic_load_explicit(&p->ln->pput.hot, memory_order_seq_cst) != UP_POOL_HOT_NONE)
		return 1;
	/* [wait] sc: re-check; pairs with [wait] sc in up__side_leave(). */
	rd = atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst);
	if (up__side_gone(rd))
		return 1;
	if (rd & UP_COUNT_EVER)
		w->came |= UP_CAME_READERS; /* as in up__rd_ready() */
	return 0;
}

static bool spin_claim(struct up_shm_wait *wl, uint64_t now, uint64_t budget)
{
	/* relaxed: a scheduling hint, orders nothing. */
	uint64_t until = atomic_load_explicit(&wl->spin_until, memory_order_relaxed);

	if (until > now && until - now <= 2 * (uint64_t)UP_SPIN_MAX_NS)
		return false; /* somebody is spinning (a far-off value is junk) */
	/* relaxed: as above. */
	return atomic_compare_exchange_strong_explicit(&wl->spin_until, &until, now + budget,
						       memory_order_relaxed,
						       memory_order_relaxed);
}

static void spin_release(struct up_shm_wait *wl)
{
	/* relaxed: a scheduling hint, orders nothing. */
	atomic_store_explicit(&wl->spin_until, 0, memory_order_relaxed);
}

/*
 * The other side is inside a call that ends in what we wait for: a writer
 * waiting for pages while a reader holds the readers' lock (mid-copy, or
 * between a peek and its consume), whose pages come back when it lets go;
 * a reader waiting for data while a writer fills a reservation of a chunk
 * or more (prod.fill_until, reserve.c), which its commit publishes. Such a
 * wait is as long as the other side's work on a pipe's worth: longer than
 * the adaptive budget, shorter than a sleep and its wake are worth.
 */
static bool peer_inside(struct up_end *e, struct up_shm_wait *wl, uint64_t now)
{
	struct up_pipe *p = e->p;

	/* Others of our side asleep on the line: the spinner would take
	 * every hand-over before the one a wake is for gets there, and
	 * starve it (two readers of one stream). Sleep with them. relaxed:
	 * a hint, as below. */
	if (atomic_load_explicit(&wl->nwait, memory_order_relaxed) != 0)
		return false;
	/* A hint to keep spinning; ready() decides. */
	if (wl == &p->ln->wr_wait)
		return up__rlock_busy(p);
	/* relaxed: a hint, as above. */
	return atomic_load_explicit(&p->ln->prod.fill_until, memory_order_relaxed) > now;
}

/* The most an end's spin budget grows to. A UP_NO_EARLY reader keeps the
 * first budget: it asked to sleep rather than spin through a sparse
 * stream's gaps, which a budget grown to 100 us would cover (a core held
 * for a message every 50 us); a stream's chunks come well within it. */
static uint32_t spin_max(const struct up_end *e)
{
	return (e->flags & UP_NO_EARLY) ? UP_SPIN_INIT_NS : UP_SPIN_MAX_NS;
}

/* Spin for the end's adaptive budget while it holds the line's spin
 * window, and on up to UP_SPIN_INSIDE_NS while the other side is inside a
 * call that ends the wait (peer_inside()); otherwise look once and yield.
 * 1 ready, 0 not, or an error. */
static int spin_for(struct up_end *e, struct up_shm_wait *wl, int (*ready)(struct up_end *))
{
	uint64_t t0 = up__now_ns();
	unsigned int i;
	int r;

	if (!spin_claim(wl, t0, e->spin_ns)) {
		r = ready(e);
		if (r != 0)
			return r;
		/* With more waiters than cores, give the producer the core
		 * before the sleep's system calls. */
		sched_yield();
		up__count(&e->c.syscalls, 1);
		return 0;
	}
	for (i = 0;; i++) {
		r = ready(e);
		if (r != 0) {
			spin_release(wl);
			/* Spinning paid off: back to a generous budget fast. */
			e->spin_ns = e->spin_ns * 2 < spin_max(e) ? e->spin_ns * 2 : spin_max(e);
			return r;
		}
		if ((i & 31) == 31) {
			uint64_t el = up__now_ns() - t0;

			if (el > e->spin_ns &&
			    (el > UP_SPIN_INSIDE_NS || !peer_inside(e, wl, t0 + el)))
				break;
		}
		up__cpu_relax();
	}
	spin_release(wl);
	return 0;
}

/*
 * A sleep that ended in what we waited for, @slept ns after it began: when
 * that was shorter than the longest spin, the waits of this stream are
 * that short (messages a few tens of µs apart), and the budget grows to
 * cover the next one with a quarter to spare. Without this a budget shrunk
 * below the gap never grows again: it doubles only on a spin that found
 * data, and every spin ended before the data came. A spin costs the core
 * for as long as it lasts; here no longer than the sleep it replaces.
 */
static void spin_learn(struct up_end *e, uint64_t slept)
{
	uint64_t want = slept + slept / 4;

	if (slept >= spin_max(e) || want <= e->spin_ns)
		return;
	e->spin_ns = want < spin_max(e) ? (uint32_t)want : spin_max(e);
}

/* An early wake found nothing yet: spin (unannounced) until @until. 1
 * ready, 0 not (a miss: unlearn the gap, let waits pass), or an error. */
static int early_spin(struct up_end *e, struct up_shm_wait *wl, int (*ready)(struct up_end *),
		      uint64_t until)
{
	uint64_t t0 = up__now_ns(), t;
	unsigned int i;
	int r;

	/* Within what spin_claim() takes for a live window. */
	if (until > t0 + 2 * (uint64_t)UP_SPIN_MAX_NS)
		until = t0 + 2 * (uint64_t)UP_SPIN_MAX_NS;
	if (until <= t0 || !spin_claim(wl, t0, until - t0))
		return ready(e); /* another reader spins: it takes this one */
	for (i = 0;; i++) {
		r = ready(e);
		if (r != 0)
			break;
		if ((i & 31) == 31) {
			if (up__now_ns() >= until)
				break;
			/* The writer may be waiting for this very core: a
			 * spin that holds it would delay the data it waits
			 * for, by a time slice. */
			sched_yield();
			up__count(&e->c.syscalls, 1);
		}
		up__cpu_relax();
	}
	spin_release(wl);
	t = up__now_ns();
	up__count(&e->c.early_spin_ns, t - t0);
	if (r > 0) {
		up__count(&e->c.early, 1);
		e->early_misses = 0;
	} else if (r == 0) {
		up__early_miss(e);
	}
	return r;
}

/* The sleep until the peers' locks are next due to be asked (one slice
 * after the last check, up__peers_reap()), so that a sleep cut short and
 * begun again never pushes the check back: a dead peer is seen within
 * about UP_WAIT_SLICE_NS of its death, not of the last wake. */
static uint64_t slice_left(struct up_end *e)
{
	uint64_t since = up__coarse_ns() - e->live_ns;

	if (since >= UP_WAIT_SLICE_NS - UP_WAIT_SLICE_MIN_NS)
		return UP_WAIT_SLICE_MIN_NS;
	return UP_WAIT_SLICE_NS - since;
}

/*
 * The fence of a reader about to sleep, after its announcement on rd_wait
 * and before its re-check. The lone writer grows len with a release store
 * and loads nwait after it without a fence between (writer.h,
 * up__merge_close()), so its load may miss our announcement while our
 * re-check misses its store. While the writers' lock is biased (the only
 * state in which a writer does that), membarrier() runs a full barrier on
 * every CPU running a registered process, the writer's among them: after
 * it the store is visible to the re-check, or the writer's load comes
 * after our announcement and wakes us. Returns the longest the sleep may
 * last: UINT64_MAX, or, for a reader whose process may not call
 * membarrier(), the rest of UP_FENCE_GRACE_NS from when it said so in
 * rd_wait.nofence. Writers that see nofence fence every store; the grace
 * covers a store issued before the writer saw it, which does not stay in a
 * store buffer for milliseconds (the same argument as bias.c's
 * UP_BIAS_GRACE_NS). A peer that clears nofence costs such a reader at
 * most a sleep slice per wake it misses, never a wedge.
 */
#define UP_FENCE_GRACE_NS 20000000ull /* 20 ms */

/* Reader @e's process may not call membarrier(): say so in rd_wait.nofence
 * (sticky), from now (the grace runs from here). */
void up__nofence_mark(struct up_end *e)
{
	e->nofence_ns = up__now_ns();
	/* [wait] sc: sticky, before any sleep that relies on it; pairs with
	 * [wait] mb in up__progress_store(), whose look at it is bounded by the
	 * grace. */
	atomic_store_explicit(&e->p->ln->rd_wait.nofence, 1, memory_order_seq_cst);
}

uint64_t up__wait_fence(struct up_end *e, struct up_shm_wait *wl)
{
	struct up_pipe *p = e->p;
	uint64_t sc = 0, since;

	/* [wait] sc: after our announcement, as the re-check; a bias set
	 * before our load is seen, one set after it is followed by the
	 * setter's word release and then by every store we must see;
	 * pairs with [wait] sc in up__biased_take_slow(). */
	uint32_t owner = wl == &p->ln->rd_wait
				 ? atomic_load_explicit(&p->ln->wlock.bias, memory_order_seq_cst) &
					   ~UP_BIAS_REVOKE
				 : 0;

	if (owner == 0)
		return UINT64_MAX;
	if (e->nofence_ns == 0) {
		/* The owner a thread of ours: the private barrier, exact. One
		 * elsewhere: the global expedited one, which can miss its CPU
		 * (fence.c); that costs this sleep its wake, never data. */
		if (up__membarrier_registered(e->pid, &sc) &&
		    up__membarrier(up__reach_of(p, owner, UP_FENCE_ANY_FAST), &sc) == 0) {
			/* [wait] mb: pairs with [wait] mb in up__progress_store(). */
			up__count(&e->c.syscalls, sc);
			return UINT64_MAX;
		}
		up__nofence_mark(e);
	}
	up__count(&e->c.syscalls, sc);
	since = up__now_ns() - e->nofence_ns;
	return since >= UP_FENCE_GRACE_NS ? UINT64_MAX : UP_FENCE_GRACE_NS - since;
}

/*
 * Wait until @ready says so: spin for the end's budget, then sleep on @wl in
 * slices, watching the peers of @peer_role. Returns 0 when ready, -EPROTO
 * when broken, or a backend error. Exclusive on the end.
 */
int up__wait_ready(struct up_end *e, struct up_shm_wait *wl, int (*ready)(struct up_end *),
		   uint32_t peer_role)
{
	bool data = wl == &e->p->ln->rd_wait;
	uint64_t until = 0,
		 early = data && !(e->flags & UP_NO_EARLY)
				 ? up__early_due(e, up__now_ns(), e->waker->ops->slack, &until)
				 : 0;
	int r = spin_for(e, wl, ready);

	if (r != 0) {
		if (r > 0 && data)
			up__early_note(e, up__now_ns(), false);
		return r < 0 ? r : 0;
	}
	/*
	 * Spinning did not pay: spin less next time. With more threads than
	 * cores the peer we wait for may need this very core, so the budget
	 * shrinks while spinning keeps failing, by an eighth a failure, never
	 * below UP_SPIN_MIN_NS: a floor above the time a 64 KiB chunk takes to
	 * copy, or a streaming reader would sleep on every chunk.
	 */
	if (e->spin_ns - e->spin_ns / 8 >= UP_SPIN_MIN_NS)
		e->spin_ns -= e->spin_ns / 8;

	for (;;) {
		uint64_t sc = 0, slice, bound;
		uint32_t s;

		/* [wait] sc: seq before announcing; pairs with [wait] sc in
		 * up__wake_line_slow(), whose bump makes a wait on this value
		 * return. */
		s = atomic_load_explicit(&wl->seq, memory_order_seq_cst);

		/* Outside the handshake: may enter the kernel (pidfd_open). A
		 * peer already gone has no pidfd to fire: reap it now. */
		if (up__peers_watch(e, peer_role))
			up__peers_reap(e);
		up__peers_closewatch(e);
		/* Cheap unless the endpoint table changed since last time. */
		up__sweep_orphans(e);
		slice = slice_left(e);
		if (early != 0) {
			uint64_t now = up__now_ns();

			if (early <= now)
				early = 0; /* the first sleep is late already */
			else if (early - now < slice)
				slice = early - now;
		}
		/* [wait] sc: clear pending, then announce; pairs with [wait] sc
		 * in up__wake_line_slow() (its exchange and its nwait load). */
		atomic_store_explicit(&wl->pending, 0, memory_order_seq_cst);
		atomic_fetch_add_explicit(&wl->nwait, 1, memory_order_seq_cst);
		up__announce_mark(e, up__line_id(e, wl));
		bound = up__wait_fence(e, wl);
		if (slice > bound)
			slice = bound < UP_WAIT_SLICE_MIN_NS ? UP_WAIT_SLICE_MIN_NS : bound;
		r = ready(e);
		if (r == 0)
			r = up__sleep_begin(e, &wl->seq, true, &slice);
		if (r == 0) {
			uint64_t t_sleep = up__now_ns(), t_woke;

			up__count(&e->c.waits, 1);
			/* The process's inotify instance, last, unless its
			 * thread serves it (closewatch.c). */
			r = e->waker->ops->wait(e->waker, &wl->seq, s, slice, e->peer_pidfds,
						up__peers_nfds(e), &sc);
			up__sleep_end(e);
			up__count(&e->c.syscalls, sc);
			t_woke = up__now_ns();
			/* Our early wake, not a slice's end (nor a shorter
			 * bound's: a timer never ends before its time). */
			if (r == -ETIMEDOUT && early != 0 && t_woke >= early) {
				up__early_lateness(e, t_woke - early, e->waker->ops->slack);
				r = -EALREADY;
			}
			else if (r == -ETIMEDOUT)
				up__count(&e->c.timeouts, 1);
			/* Woken past the early wake, its timer not seen: that
			 * timer is at least so late. */
			else if (r == 0 && early != 0 && t_woke >= early)
				up__early_late_bound(e, t_woke - early, e->waker->ops->slack);
			/* Up again: let the next progress wake another sleeper
			 * (wakes for data are for one sleeper).
			 * [wait] sc: pairs with [wait] sc in up__wake_line_slow(). */
			atomic_store_explicit(&wl->pending, 0, memory_order_seq_cst);
			/* A pidfd fired, or a slice ended: some peer may be dead
			 * (the reaping wakes everyone who needs to know). */
			if (r == 1 || r == -ETIMEDOUT) {
				up__peers_reap(e);
				up__sweep_orphans(e);
			} else {
				/* Woken for something else: the peers are still
				 * asked on schedule, so wakes that keep coming
				 * cannot put a death off slice after slice; at
				 * once if the wake came with a close
				 * (closewatch.c's thread). */
				if (e->peer_ino && up__closewatch_seq() != e->cw_seen)
					up__peers_reap(e);
				else
					up__live_poll(e);
			}
			/* An idle point of a reader: the trim looks at most
			 * once per trim_ms (reclaim.c). */
			if (e->flags & UP_RD)
				up__pool_trim(e);
			if (r == -EALREADY)
				r = 0;
			else
				early = 0; /* woken: a late end if data is here */
			if (r == 1 || r == -ETIMEDOUT || r == -EINTR || r == -EAGAIN)
				r = 0;
			if (r == 0)
				r = ready(e);
			if (r > 0)
				spin_learn(e, up__now_ns() - t_sleep);
		}
		up__announce_mark(e, UP_ARMED_LINE_NONE);
		/* [wait] sc: no longer a sleeper; pairs with [wait] sc in
		 * up__wake_line(). */
		atomic_fetch_sub_explicit(&wl->nwait, 1, memory_order_seq_cst);
		/* Up before the data, as planned: spin for it, no longer
		 * announced, so its writer makes no wake. One early sleep a
		 * wait. */
		if (r == 0 && early != 0) {
			r = early_spin(e, wl, ready, until);
			if (r > 0) {
				up__early_note(e, up__now_ns(), false);
				return 0;
			}
		} else if (r > 0 && data) {
			up__early_note(e, up__now_ns(), early == 0);
		}
		early = 0;
		if (r < 0 && wl == &e->p->ln->rd_wait)
			/* We may have taken a wake meant for data that we now
			 * leave to the others: pass it on. */
			up__wake_line(e, wl, 1);
		if (r != 0)
			return r < 0 ? r : 0;
	}
}
