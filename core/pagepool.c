/* SPDX-License-Identifier: MIT */
/*
 * pagepool.c - the per-pipe pool of free data pages.
 *
 * The pool is a ring of page indices in the segment, with its own two
 * free-running counters on separate lines: readers return emptied pages at
 * `put`, writers take pages at `get`; put - get is the number of free pages.
 * Both happen in batches and outside the ring's locks: a writer takes every
 * page a write needs with one CAS before it copies anything (the lesson of
 * the kernel's pipe page preallocation: never allocate while the other side
 * waits on your lock), and a reader returns every page a read emptied with
 * one release store.
 *
 * Alternatives rejected:
 *  - a fixed page per slot (a plain byte ring): writers would have to claim
 *    slots in order before filling them, so a preempted writer would stall
 *    every writer behind it; with the pool, writers fill pages in any order
 *    and only publication is ordered;
 *  - a free list (stack) of pages: LIFO reuse is cache-friendlier but needs
 *    an ABA-safe CAS on a pointer+tag pair shared with untrusted processes;
 *    a ring of indices is bounded and trivially checkable.
 *
 * The hand-off. A FIFO sends a trickle (a message now and then) round every
 * free page before it comes back to one it used, and a page not used for a
 * while has been given back by the trim or never touched: each 4 KiB of it
 * costs the writer a page fault where a kernel pipe takes a warm page from
 * the allocator. So a reader that slept for its data (the stream is a
 * trickle) holds the last page its next read frees out of the ring, in
 * pput.hot, if that word is empty, and a writer that needs pages takes that
 * one first: such a stream lives in the two or three pages it hands back
 * and forth. A reader that never sleeps hands nothing off, and its writers
 * keep the FIFO's order, whose older pages no longer have their lines in
 * the reader's cache (taking the page just emptied, one at a time, made
 * streams of 64 KiB writes a third slower: docs/DESIGN-NOTES.md).
 *
 * The hot page counts among the free ones (up__pool_free(), up__wr_ready()).
 * It never breaks the capacity: writers leave the spare pages in the ring,
 * so the ring alone always holds them, and the hot page is one more.
 *
 * Invariant (honest peers): every page index is in exactly one place: the
 * pool ring, the hot word, a writer's private cache, or a ring slot. Hence
 * put - get <= page_count <= slot_count, so the pool ring never overruns
 * itself. A hostile peer can break this; then the worst outcome is a page
 * used twice (garbage in the stream), never an access outside the segment,
 * because every index taken from here is checked against page_count.
 *
 * The owner tags say which of the three places a page is in, and every
 * move checks where it comes from (one compare per page):
 *
 *   0              in the pool or the hot word (or lost by a process that
 *                  died moving it)
 *   an end's tag   in that end's hands: a writer's cache or reservation,
 *                  the trim; set by up__pool_take(), which finds 0 first
 *   UP_OWNER_RING  in a live slot; set by up__pages_to_ring() before the
 *                  slot is published, which finds the publisher's tag
 *                  first; readers find it before they read or a writer
 *                  appends through a slot, and clear it (to 0) before
 *                  the page goes back to the pool
 *
 * So a page number that a flipped bit or a lying peer put in a pool entry
 * or a slot, naming a page that is somewhere else, is refused (-EPROTO)
 * before its bytes are read or overwritten, unless it names a page in the
 * same place (two free pages, or two live slots' pages): that needs more
 * than a tag per page to see.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "up_int.h"

void up__pool_init(struct up_pipe *p)
{
	uint32_t i;

	/* relaxed: the segment is not shared yet; the [pool] store below
	 * publishes these. */
	for (i = 0; i < p->g.page_count; i++)
		atomic_store_explicit(&p->pool[i], i, memory_order_relaxed);
	atomic_store_explicit(&p->ln->pget.get, 0, memory_order_relaxed);
	/* relaxed: published with the entries by the [pool] store below. */
	atomic_store_explicit(&p->ln->pput.hot, UP_POOL_HOT_NONE, memory_order_relaxed);
	/* [pool] rel: the entries above before put; pairs with [pool] acq in
	 * up__pool_take() and up__pool_free(). Handing the segment over (an fd,
	 * a thread) orders it as well. */
	atomic_store_explicit(&p->ln->pput.put, p->g.page_count, memory_order_release);
}

uint32_t up__pool_free(struct up_pipe *p)
{
	/* A hint: either load may be stale, and callers treat it as one.
	 * [pool] acq: the entries below put are written; pairs with [pool] rel
	 * in up__pool_put() and up__pool_init(). */
	uint32_t put = atomic_load_explicit(&p->ln->pput.put, memory_order_acquire);
	/* relaxed: a hint; only the CAS in up__pool_take() moves get. */
	uint32_t get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
	uint32_t n = put - get;
	/* relaxed: a hint, as above. */
	uint32_t hot = atomic_load_explicit(&p->ln->pput.hot, memory_order_relaxed);

	if (n > p->g.page_count)
		return 0;
	return n + (hot != UP_POOL_HOT_NONE && n < p->g.page_count);
}

/*
 * A free page @page, just taken from the pool or the hot word, becomes this
 * end's (@tag). False when it names no page, or a page that is not free: a
 * free page is tagged by no one, so a tag means the entry names a page in a
 * slot or in an end's hands.
 */
static bool page_claim(struct up_pipe *p, uint32_t page, uint32_t tag)
{
	if (page >= p->g.page_count)
		return false;
	/* relaxed: its last owner cleared it before the [pool] or [hot]
	 * release that the taker's acquire saw. */
	if (atomic_load_explicit(&p->owner[page], memory_order_relaxed) != 0)
		return false;
	/* relaxed: read by the orphan sweep, which acts on it once this end's
	 * entry is gone, and by the next mover (see the top). */
	atomic_store_explicit(&p->owner[page], tag, memory_order_relaxed);
	return true;
}

/*
 * Take the hot page (the hand-off, see the top), tagging it @tag: 1 with
 * *page set, 0 when there is none, -EPROTO when the word names no free page.
 */
int up__pool_take_hot(struct up_pipe *p, uint32_t *page, uint32_t tag)
{
	_Atomic uint32_t *hot = &p->ln->pput.hot;
	/* relaxed: a look before the exchange, which keeps the line shared
	 * while the word is empty. */
	uint32_t h = atomic_load_explicit(hot, memory_order_relaxed);

	if (h == UP_POOL_HOT_NONE)
		return 0;
	/* [hot] acq: the reader that freed the page was done with it and
	 * cleared its tag; pairs with [hot] rel in up__pool_put_hot(). */
	h = atomic_exchange_explicit(hot, UP_POOL_HOT_NONE, memory_order_acquire);
	if (h == UP_POOL_HOT_NONE)
		return 0; /* another writer took it meanwhile */
	if (!page_claim(p, h, tag))
		return -EPROTO;
	*page = h;
	return 1;
}

/*
 * Under the readers' lock: hand @page, freed and untagged, to the hot word
 * if it is empty. True when it took the page, which then must not go to the
 * ring as well.
 */
bool up__pool_put_hot(struct up_pipe *p, uint32_t page)
{
	_Atomic uint32_t *hot = &p->ln->pput.hot;
	uint32_t none = UP_POOL_HOT_NONE;

	/* relaxed: a look first; a full word costs no locked operation. */
	if (atomic_load_explicit(hot, memory_order_relaxed) != UP_POOL_HOT_NONE)
		return false;
	/* [hot] rel: our reads of the page and its cleared tag before the
	 * hand-off; pairs with [hot] acq in up__pool_take_hot(). seq_cst, as
	 * put's store in up__pool_put(), also [wait] sc: the progress store
	 * of the writers' sleep handshake; pairs with [wait] sc in
	 * up__wr_ready(). Failure: relaxed, the page goes to the ring. */
	return atomic_compare_exchange_strong_explicit(hot, &none, page, memory_order_seq_cst,
						       memory_order_relaxed);
}

/*
 * Take up to @want free pages in one batch, leaving @leave free in the pool
 * (writers leave the spare pages, shm_layout.h; the trim one more).
 * Returns how many were taken (0 when no more than @leave are free), or
 * -EPROTO when the shared counters or an entry are out of range. Any
 * thread; several writers may race (CAS).
 */
int up__pool_take(struct up_pipe *p, uint32_t *pages, uint32_t want, uint32_t leave,
		  uint32_t tag)
{
	uint32_t get, put, n, i, stale = 0;

	/* relaxed: a guess; the CAS below checks it and hands back the
	 * current get when it is stale. */
	get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
	for (;;) {
		/* [pool] acq: the entries below put are written; pairs with
		 * [pool] rel in up__pool_put() and up__pool_init(). */
		put = atomic_load_explicit(&p->ln->pput.put, memory_order_acquire);
		n = put - get;
		if (n > p->g.page_count) {
			/*
			 * get and put cannot be read as one snapshot: other
			 * writers may have taken pages (and readers returned
			 * them) since get was loaded, so put - get can look too
			 * large, or negative. That get is stale and the CAS
			 * would fail anyway: reload. Only a peer that keeps the
			 * counters inconsistent gets here over and over.
			 */
			if (++stale > 4096)
				return -EPROTO;
			/* relaxed: a fresh guess, checked by the CAS as above. */
			get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
			continue;
		}
		if (n <= leave)
			return 0;
		n -= leave;
		if (n > want)
			n = want;
		/*
		 * Read the entries BEFORE claiming them. Once get moves past
		 * them, other writers can take the pages after, readers can
		 * return those, and put can lap the ring and overwrite entries
		 * we have claimed but not yet read (a writer preempted between
		 * the claim and the reads would then hand out a page that is
		 * also in use). Read first, then claim: if the CAS succeeds, get
		 * was still ours, so put cannot have lapped these entries.
		 * relaxed: the [pool] acquire of put above made them visible.
		 */
		for (i = 0; i < n; i++)
			pages[i] = atomic_load_explicit(&p->pool[(get + i) & p->g.slot_mask],
							memory_order_relaxed);
		/* [pool-get] acq_rel: the claim of [get, get + n). A reader can
		 * reuse these entries only for pages claimed after them, which
		 * reach it through later claims and [head] or [pool] releases:
		 * the release half keeps our entry loads before the claim, the
		 * acquire half carries earlier claims' loads on into our own
		 * releases. Pairs with itself, run by every taker (writers and
		 * the trim). Failure is relaxed: the loop retries with the
		 * fresh get. */
		if (atomic_compare_exchange_weak_explicit(&p->ln->pget.get, &get, get + n,
							  memory_order_acq_rel,
							  memory_order_relaxed))
			break;
	}
	for (i = 0; i < n; i++)
		if (!page_claim(p, pages[i], tag))
			return -EPROTO;
	return (int)n;
}

/*
 * A writer is about to publish @n pages of its own (tagged @tag) in slots:
 * tag them UP_OWNER_RING. -EPROTO when one is not tagged @tag: somebody
 * else took it too. Before the slots are stored: a page we die holding
 * after this is lost, never handed out twice.
 */
int up__pages_to_ring(struct up_pipe *p, const uint32_t *pages, uint32_t n, uint32_t tag)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		/* relaxed: our own tag, stored by this end in up__pool_take(). */
		if (atomic_load_explicit(&p->owner[pages[i]], memory_order_relaxed) != tag)
			return -EPROTO;
		/* relaxed: published by the caller's [head] release. */
		atomic_store_explicit(&p->owner[pages[i]], UP_OWNER_RING, memory_order_relaxed);
	}
	return 0;
}

/* A reader retired @n slots' pages (each found UP_OWNER_RING when read):
 * in the pool's state again, before up__pool_put() hands them out. */
void up__pages_from_ring(struct up_pipe *p, const uint32_t *pages, uint32_t n)
{
	uint32_t i;

	/* relaxed: published by up__pool_put()'s [pool] release. */
	for (i = 0; i < n; i++)
		atomic_store_explicit(&p->owner[pages[i]], 0, memory_order_relaxed);
}

void up__pages_untag(struct up_pipe *p, const uint32_t *pages, uint32_t n)
{
	uint32_t i;

	/* relaxed: read only by the orphan sweep; the caller publishes or
	 * returns the pages after this ([head], [pool]). */
	for (i = 0; i < n; i++)
		atomic_store_explicit(&p->owner[pages[i]], 0, memory_order_relaxed);
}

/*
 * Pages whose tag names an endpoint that no longer exists (its entry is
 * free, or has a newer generation): taken by a process that died before it
 * published or returned them. At most @max are listed. Only endpoints tag;
 * a live one's tag matches its entry, and it replaces its tag before it
 * publishes (UP_OWNER_RING, never an orphan) or returns a page (0), so an
 * orphan is in no slot and not in the pool: giving it back cannot make a
 * page be used twice.
 */
uint32_t up__pages_orphaned(struct up_pipe *p, uint32_t *pages, uint32_t max)
{
	uint32_t i, n = 0;

	for (i = 0; i < p->g.page_count && n < max; i++) {
		/* relaxed: judged against the entry it names, below. */
		uint32_t t = atomic_load_explicit(&p->owner[i], memory_order_relaxed);
		uint32_t idx, st;

		if (t == 0 || t == UP_OWNER_RING)
			continue; /* in the pool, or in a slot */
		idx = (t & UP_END_ROLE_MASK) - 1;
		if (idx >= p->g.max_ends) {
			pages[n++] = i; /* names no endpoint at all */
			continue;
		}
		/* [end-state] acq: an entry seen free or reclaimed was freed
		 * after its owner untagged; pairs with [end-state] rel in
		 * up__end_free() and [end-state] acq_rel in reap_entry(). */
		st = atomic_load_explicit(&p->ends[idx].state, memory_order_acquire);
		if ((st & UP_END_ROLE_MASK) == UP_END_FREE ||
		    (st & ~UP_END_ROLE_MASK) != (t & ~UP_END_ROLE_MASK))
			pages[n++] = i;
	}
	return n;
}

/*
 * Return @n pages. The caller holds the readers' lock (put has one writer at
 * a time). Returns 0 or -EPROTO.
 */
int up__pool_put(struct up_pipe *p, const uint32_t *pages, uint32_t n)
{
	uint32_t put, i;

	if (n == 0 || n > p->g.page_count)
		return n == 0 ? 0 : -EPROTO;
	/* relaxed: put has one writer at a time, the holder of the readers'
	 * lock, whose [lock] acquire ordered this after the last store. Not
	 * checked against get here: that would pull the writers' pool line on
	 * every read; up__pool_take() rejects counters that do not add up. */
	put = atomic_load_explicit(&p->ln->pput.put, memory_order_relaxed);
	/* No tag clearing here: the reader clears the ring's tag of the pages
	 * it retires (up__pages_from_ring()), and the other callers (a
	 * writer's close, the trim, the orphan sweep) untag theirs first.
	 * relaxed: published by the [pool] store of put below. */
	for (i = 0; i < n; i++)
		atomic_store_explicit(&p->pool[(put + i) & p->g.slot_mask], pages[i],
				      memory_order_relaxed);
	/* [pool] rel: entries [put, put + n) before put; pairs with [pool]
	 * acq in up__pool_take() and up__pool_free(). seq_cst, not just
	 * release: also [wait] sc: the progress store of the writers' sleep
	 * handshake (wake.h), before the waker's load of wr_wait.nwait in
	 * up__wake_writers(); pairs with [wait] sc in up__wr_ready(). */
	atomic_store_explicit(&p->ln->pput.put, put + n, memory_order_seq_cst);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Which of @n pipe pages from @first hold memory: res[i] is 1 when any of
 * page first + i is resident in the memfd (mincore() over this process's
 * mapping sees the file's pages, whoever faulted them). 0 or -errno.
 */
static int pages_resident(struct up_pipe *p, uint32_t first, uint32_t n, uint8_t *res,
			  uint64_t *syscalls)
{
	unsigned char vec[4096];
	const size_t sys = (size_t)sysconf(_SC_PAGESIZE);
	const size_t per = p->g.page_size / sys; /* base pages per pipe page, >= 1 */
	const size_t total = (size_t)n * per;
	unsigned char *base = p->pages + (size_t)first * p->g.page_size;
	size_t at = 0, i;

	memset(res, 0, n);
	while (at < total) {
		size_t k = total - at < sizeof(vec) ? total - at : sizeof(vec);

		*syscalls += 1;
		if (mincore(base + at * sys, k * sys, vec) < 0)
			return -errno;
		for (i = 0; i < k; i++)
			if (vec[i] & 1)
				res[(at + i) / per] = 1;
		at += k;
	}
	return 0;
}

/*
 * Give the memory of @n pages back to the kernel by punching holes in the
 * memfd (the seals forbid shrinking, not punching). The caller has taken the
 * pages out of the pool, so no writer can be filling one meanwhile, and
 * holds no lock: this is the slow part. Neighbouring pages are asked
 * together whether they hold memory (mincore()), and those that do are
 * punched as one range, so a page already given back costs no punch. A
 * punched page reads back as zeroes and costs a page fault when a writer
 * next fills it. @n is at most UP_END_CACHE_MAX. Returns the pages punched,
 * or -errno.
 */
long up__pages_punch(struct up_pipe *p, uint32_t *pages, uint32_t n, uint64_t *syscalls)
{
	const uint64_t ps = p->g.page_size;
	uint8_t res[UP_END_CACHE_MAX];
	uint32_t i = 0, j, k;
	long done = 0;
	int r;

	if (n > UP_END_CACHE_MAX)
		return -EINVAL;
	qsort(pages, n, sizeof(pages[0]), cmp_u32);
	while (i < n) {
		for (j = i + 1; j < n && pages[j] == pages[j - 1] + 1; j++)
			;
		r = pages_resident(p, pages[i], j - i, res, syscalls);
		if (r < 0)
			return r;
		for (k = 0; k < j - i;) {
			uint32_t e = k;

			if (!res[k]) {
				k++;
				continue;
			}
			while (e < j - i && res[e])
				e++;
			*syscalls += 1;
			if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)(p->g.off.pages + (pages[i] + k) * ps),
				      (off_t)((e - k) * ps)) < 0)
				return -errno;
			done += e - k;
			k = e;
		}
		i = j;
	}
	return done;
}
