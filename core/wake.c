/* SPDX-License-Identifier: MIT */
/*
 * wake.c - the waker's half of the sleep handshake (wake.h, docs/DESIGN.md
 * "Sleeping and waking"): after a progress store, wake the sleepers of a
 * wait line, entering the kernel only when one is announced and no wake is
 * already in flight.
 */
#include "ring.h"

/* Called by up__wake_line() once it found nwait != 0; true when a wake went
 * out. */
bool up__wake_line_slow(struct up_end *e, struct up_shm_wait *wl, uint32_t nr)
{
	uint64_t sc = 0;

	/* Somebody is announced on the line: asleep, armed, or dead asleep. The
	 * next call looks at the clock (up__live_tick()), so a writer whose
	 * every write finds a sleeper that has died notices within
	 * UP_LIVE_CHECK_NS, however slowly it writes. */
	e->live_calls = UP_LIVE_CALLS - 1;

	/*
	 * A wake in flight covers this progress too, except that on the
	 * readers' line it may be for one reader only, and a wake for all (end
	 * of stream, broken) must reach every one (tests/model/wake.pml,
	 * mutant 6). The writers' line has only wakes for all.
	 * [wait] sc: the waker's claim of pending; pairs with [wait] sc in
	 * up__wait_ready(), where each sleeper clears it before announcing.
	 */
	if (atomic_exchange_explicit(&wl->pending, 1, memory_order_seq_cst) != 0 &&
	    (nr != UP_WAKE_ALL || wl != &e->p->ln->rd_wait))
		return false;
	/*
	 * A poll-mode end takes a wake like any sleeper, and its event loop may
	 * not read for a while: a wake for one could stop there and leave a
	 * reader blocked in up_read asleep for its whole slice. So while such
	 * an end is armed, wake them all (pending above still holds, so an
	 * armed end that never reads costs one wake, not one per write).
	 * relaxed: a hint; armed ends count themselves here before nwait.
	 */
	if (nr != UP_WAKE_ALL && atomic_load_explicit(&wl->npoll, memory_order_relaxed) != 0)
		nr = UP_WAKE_ALL;
	/* [wait] sc: the bump ends every futex wait on the old value; pairs
	 * with [wait] sc in up__wait_ready(), which loads seq first. Also
	 * [u-wait-word] sc: what came before is visible to a backend that sees
	 * the new value; pairs with [u-wait-word] acq in uw_wait(). */
	atomic_fetch_add_explicit(&wl->seq, 1, memory_order_seq_cst);
	e->waker->ops->wake(e->waker, &wl->seq, nr, wl, &sc);
	up__count(&e->c.syscalls, sc);
	up__count(&e->c.wakes, 1);
	return true;
}

/*
 * What a backend's futex wake of a line needs, once it has reached @found of
 * the line's armed poll-mode ends another way. Its caller counts @found where
 * no such end can leave the line (it holds what the end's disarm takes
 * first), so @found <= npoll <= nwait. Anyone who announces after these
 * loads sees the progress in its re-check, as with nwait in
 * up__wake_line_slow().
 * [wait] sc: loaded after the seq bump; pairs with [wait] sc in
 * up__wait_ready() and up__ring_arm(), where npoll rises before nwait.
 */
uint32_t up__wake_bits(const struct up_shm_wait *line, uint32_t found)
{
	return atomic_load_explicit(&line->npoll, memory_order_seq_cst) == found
		       ? UP_FUTEX_BIT_SLEEP
		       : UP_FUTEX_BITS_ANY;
}

bool up__wake_covered(const struct up_shm_wait *line, uint32_t found)
{
	/* [wait] sc: loaded after the seq bump; pairs with [wait] sc in
	 * up__wait_ready() and up__ring_arm(). */
	return found != 0 && atomic_load_explicit(&line->nwait, memory_order_seq_cst) == found;
}

void up__wake_all(struct up_end *e, struct up_shm_wait *wl)
{
	up__wake_line(e, wl, UP_WAKE_ALL);
}

/*
 * A reader returned pages and up__wake_writers() found a writer asleep: wake
 * the writers, with hysteresis. A writer
 * only sleeps when the pool has no page beyond the spare ones (shm_layout.h),
 * and waking it for every page freed would cost a sleep/wake round trip per
 * page. So writers are woken once a quarter of the capacity is free beyond
 * the spare pages, or when the ring has just been drained (nothing more will
 * be freed until more is written). A writer whose wake was held back still
 * re-checks at the end of its sleep slice, so a reader that stops with less
 * than a quarter free delays it by at most one slice, never forever.
 */
void up__wake_writers_slow(struct up_end *rd, bool drained)
{
	struct up_pipe *p = rd->p;

	if (!drained &&
	    up__pool_free(p) < p->g.spare_pages + (p->g.page_count - p->g.spare_pages) / 4)
		return;
	up__wake_line(rd, &p->ln->wr_wait, UP_WAKE_ALL);
}
