/* SPDX-License-Identifier: MIT */
/*
 * reclaim.c - pages going back: to the pool from an end that holds them, to
 * the kernel when a burst is over (trim), and from a dead writer's batch
 * (orphan sweep).
 *
 * Every return to the pool happens under the readers' lock, which
 * serialises the pool's put side (pagepool.c), and is followed by a wake of
 * the writers, who may sleep for pages.
 */
#include "bias.h"

/*
 * Give @n pages held by @e (tagged with its owner tag) back to the pool and
 * wake the writers. Returns 0, or the readers' lock's error: then the pages
 * stay out, still tagged (with @nonblock, a busy lock gives -EAGAIN), and a
 * later sweep returns them once @e is gone.
 */
int up__pages_return(struct up_end *e, uint32_t *pages, uint32_t n, bool nonblock)
{
	struct up_pipe *p = e->p;
	int r = up__biased_take(e, &p->ln->rlock, nonblock);

	if (r < 0)
		return r;
	up__pages_untag(p, pages, n);
	if (up__pool_put(p, pages, n) < 0)
		up__mark_broken(p);
	up__rlock_drop(e);
	up__wake_all(e, &p->ln->wr_wait);
	return 0;
}

/*
 * The trim: free pages the traffic no longer needs go back to the kernel.
 *
 * Looked at from a reader's idle points - a sleep that ended, a read about to
 * return -EAGAIN (non-blocking and poll-mode readers), an arm (poll.c) - at
 * most once per trim_ms per end, so a stream never pays for it per call. The
 * need is what the writers took from the pool since the last look (the
 * advance of get), twice over, and at least the keep-level: a stream that
 * would go round the free pages within UP_TRIM_ROUNDS looks keeps all of
 * them; one that took a few pages keeps a few; an idle pipe keeps the
 * keep-level. The pool is FIFO, so a slower stream faults in again each page
 * it reaches after a trim: at most one fault per page written, what a kernel
 * pipe pays in page allocations for every page. A burst that just ended has
 * taken many pages, so the look after it keeps them, and the next look, a
 * trim_ms later, gives them back: pages stay while the occupancy stays high
 * and go within two looks of it falling.
 *
 * A free page can hold memory only if it came back to the pool (put moved)
 * since the last look that gave back all it could, so a look finds nothing
 * to do until more than a few have: its cost follows the traffic, not the
 * capacity. Otherwise the free pages beyond the need are taken from the head
 * of the pool with the writers' CAS (the oldest free pages, so the ones kept
 * are those the stream used last), those mincore() says hold memory are
 * punched with no lock held, and all go back at the pool's tail under the
 * readers' lock: a writer that needs one later faults it in. A look whose
 * return finds the readers' lock busy (a peek held, another reader) keeps the
 * pages in this end's cache, still tagged, and returns them at the next look
 * or at close: a trim never blocks, and a page it holds is never lost.
 */
#define UP_TRIM_MIN_PAGES 16u
#define UP_TRIM_ROUNDS    8u

static bool trim_give_back(struct up_end *rd)
{
	if (rd->ncache == 0)
		return true;
	if (up__pages_return(rd, rd->cache, rd->ncache, true) < 0)
		return false;
	rd->ncache = 0;
	return true;
}

void up__pool_trim(struct up_end *rd)
{
	struct up_pipe *p = rd->p;
	uint64_t now, sc = 0;
	uint32_t get, put, used, back, need, free_pages, want;
	int n;

	if (p->g.keep_pages >= p->g.page_count)
		return;
	now = up__coarse_ns();
	if (now - rd->trim_at < p->g.trim_ns)
		return;
	rd->trim_at = now;
	if (!trim_give_back(rd))
		return;
	/* relaxed: measures of the traffic, not orderings. */
	get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
	/* relaxed: as above. */
	put = atomic_load_explicit(&p->ln->pput.put, memory_order_relaxed);
	used = get - rd->trim_get;
	rd->trim_get = get;
	/* Free pages hold memory only if they came back to the pool since
	 * the last look that gave back all it could (or were kept by it):
	 * until a few have, there is nothing to look for. */
	back = put - rd->trim_put;
	if (back <= UP_TRIM_MIN_PAGES && !rd->trim_due)
		return;
	free_pages = up__pool_free(p);
	need = p->g.keep_pages;
	if ((uint64_t)used * UP_TRIM_ROUNDS > free_pages)
		need = p->g.page_count;
	else if (2 * used > need)
		need = 2 * used;
	/* A later look may give back more, once the demand has fallen: a
	 * poll-mode end then ticks to come back (poll.c). */
	rd->trim_due = need > p->g.keep_pages && free_pages > p->g.keep_pages + UP_TRIM_MIN_PAGES;
	rd->trim_put = put;
	if (free_pages <= need + UP_TRIM_MIN_PAGES)
		return;
	up__count(&rd->c.trims, 1);
	want = free_pages - need;
	while (want) {
		uint32_t k = want < UP_END_CACHE_MAX ? want : UP_END_CACHE_MAX;
		long r;

		/* Leave writers a page beyond the spare ones meanwhile. */
		n = up__pool_take(p, rd->cache, k, p->g.spare_pages + 1, rd->tag);
		if (n <= 0)
			break;
		rd->ncache = (uint32_t)n;
		r = up__pages_punch(p, rd->cache, (uint32_t)n, &sc);
		if (!trim_give_back(rd) || r < 0)
			break; /* kept for the next look; or no hole punching here */
		want -= (uint32_t)n;
	}
	/* The pages this look took and gave back are not traffic. relaxed: as
	 * above. */
	rd->trim_get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
	/* relaxed: as above. */
	rd->trim_put = atomic_load_explicit(&p->ln->pput.put, memory_order_relaxed);
	rd->trim_due |= rd->ncache != 0;
	up__count(&rd->c.syscalls, sc);
}

/*
 * Pool indices are hints too. With no unread byte in the ring (the last
 * live slot, if any, read to its len) and the readers' lock free (no reader
 * holds pages it took off the ring), every page is in one place: in the
 * pool (put - get of them) or the hot word, in a live slot (tagged
 * UP_OWNER_RING, one at most: the last slot the readers keep), or in an
 * end's hands (tagged with its tag; a dead end's go back by the orphan
 * sweep). A page in none of these is lost to a store from outside and comes
 * back never. When the pool then has no page to give (put - get at most the
 * spare pages, or out of range) and some page is lost, the writers would
 * wait for pages for ever, or until an end that the page's tag names lets
 * go of pages it does not have: so the pipe is broken.
 *
 * What is counted as somewhere must be checkable, so a store cannot make a
 * lost page look held: a page tagged with this end's own tag is held only
 * if it is in this end's cache; a page tagged UP_OWNER_RING beyond the
 * live slots is in none, unless a writer is inside the writers' lock (it
 * tags a batch before it publishes it). A page tagged by another live end
 * is believed, since nobody but that end knows its cache; a store of such
 * a tag hides one page, and the pages hidden are then fewer than the pages
 * lost unless the store names every missing page.
 *
 * Pages in flight (claimed from the pool and not yet tagged; tagged for the
 * ring and not yet published, whose publisher holds the writers' lock;
 * untagged and not yet put back, under the readers' lock) are so for a
 * few instructions, so the state must persist for UP_POOL_LOST_NS before
 * it is believed.
 *
 * The pipe is then marked broken (-EPROTO), not repaired. A repair would
 * have to rebuild the free set while writers take from it without a lock:
 * a writer preempted between its claim of [get, get + n) and its tags holds
 * pages that nothing in the segment shows, and a rebuilt pool would hand
 * them out again. Broken is what every other inconsistency of the segment
 * gives, and a false alarm costs the pipe, never a page used twice.
 */
#define UP_POOL_LOST_NS 500000000ull /* 0.5 s */

/* @pg is in this end's cache (a writer's pages, a reader's trim batch). */
static bool in_own_cache(const struct up_end *e, uint32_t pg)
{
	for (uint32_t i = 0; i < e->ncache; i++)
		if (e->cache[i] == pg)
			return true;
	return false;
}

/* The readers have read every byte published: 0 or 1 live slot, read to its
 * len. */
static bool ring_drained(struct up_pipe *p, uint32_t *live)
{
	/* relaxed: hints, judged together and only when they persist. */
	uint64_t pos = atomic_load_explicit(&p->ln->cons.pos, memory_order_relaxed);
	uint32_t t = up__pos_tail(pos);
	/* relaxed: as above. */
	uint32_t h = atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed);

	*live = h - t;
	if (h == t)
		return true;
	/* relaxed: as above. */
	return h - t == 1 && up__pos_off(pos) >= atomic_load_explicit(&up__slot_at(p, t)->len,
								     memory_order_relaxed);
}

static bool pool_lost(struct up_end *e)
{
	struct up_pipe *p = e->p;
	uint32_t put, get, n, live, ring = 0, found, i;
	bool publishing;

	/* relaxed: hints, judged together and only when they persist. */
	put = atomic_load_explicit(&p->ln->pput.put, memory_order_relaxed);
	get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
	n = put - get;
	if (n > p->g.spare_pages && n <= p->g.page_count)
		return false;
	if (n > p->g.page_count)
		n = 0; /* counters that do not add up give no page */
	if (!ring_drained(p, &live))
		return false;
	/* A reader holding it may hold pages. */
	if (up__rlock_busy(p))
		return false;
	publishing = up__wlock_busy(p);
	/* relaxed: as above. */
	found = n + (atomic_load_explicit(&p->ln->pput.hot, memory_order_relaxed) !=
		     UP_POOL_HOT_NONE);
	for (i = 0; i < p->g.page_count; i++) {
		/* relaxed: as above. */
		uint32_t t = atomic_load_explicit(&p->owner[i], memory_order_relaxed);

		if (t == 0)
			continue; /* free: counted in the pool above, or lost */
		if (t == UP_OWNER_RING)
			ring++;
		else if (t != e->tag || in_own_cache(e, i))
			found++;
	}
	found += publishing || ring < live ? ring : live;
	return found < p->g.page_count;
}

/* On the sleep path of an end waiting for pages or data: see pool_lost().
 * True when the pipe is now broken. */
static bool pool_check(struct up_end *e)
{
	uint64_t now;

	if (!pool_lost(e)) {
		e->pool_lost_ns = 0;
		return false;
	}
	now = up__now_ns();
	if (e->pool_lost_ns == 0) {
		e->pool_lost_ns = now;
		return false;
	}
	if (now - e->pool_lost_ns < UP_POOL_LOST_NS)
		return false;
	up__mark_broken(e->p);
	up__wake_all(e, &e->p->ln->wr_wait);
	up__wake_all(e, &e->p->ln->rd_wait);
	return true;
}

/*
 * Give back pages that a dead process took from the pool and never
 * published (pagepool.c, up__pages_orphaned()), after looking for a pool
 * that lost its pages (pool_check()): returns the pages given back, or 1
 * when that made the pipe broken. Runs on the sleep path after
 * the endpoint table changed (someone closed, opened or was reaped), so a
 * writer killed holding its page batch costs the pipe capacity only until
 * the next sleeper notices. If the readers' lock is busy, the next sweep
 * tries again.
 */
uint32_t up__sweep_orphans(struct up_end *e)
{
	struct up_pipe *p = e->p;
	uint32_t pages[UP_END_CACHE_MAX];
	/* [ends-gen] acq: the table as of this generation; pairs with
	 * [ends-gen] rel in up__end_claim(). */
	uint32_t gen = atomic_load_explicit(&p->ln->state.ends_gen, memory_order_acquire);
	uint32_t n;

	/* A non-blocking writer retries when this returns pages: broken, it
	 * finds -EPROTO on its retry. */
	if (pool_check(e))
		return 1;
	if (e->sweep_gen == gen + 1)
		return 0;
	n = up__pages_orphaned(p, pages, UP_END_CACHE_MAX);
	if (n == 0) {
		e->sweep_gen = gen + 1;
		return 0;
	}
	if (up__biased_take(e, &p->ln->rlock, true) < 0)
		return 0;
	/* Under the lock, recheck: an orphan stays one (its owner is gone),
	 * but another sweeper may have returned it meanwhile. */
	n = up__pages_orphaned(p, pages, UP_END_CACHE_MAX);
	up__pages_untag(p, pages, n);
	if (n && up__pool_put(p, pages, n) < 0)
		up__mark_broken(p);
	up__rlock_drop(e);
	if (n)
		up__wake_all(e, &p->ln->wr_wait);
	if (n < UP_END_CACHE_MAX)
		e->sweep_gen = gen + 1;
	return n;
}
