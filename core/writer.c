/* SPDX-License-Identifier: MIT */
/*
 * writer.c - the write path.
 *
 * A writer takes pages from the pool (pagepool.c) in one batch into its
 * cache, copies the data into them with no lock held, then, under the
 * writers' lock (bias.h), fills the slots at head and advances head.
 * Readers and other writers go on while it copies; the lock only orders
 * publication.
 *
 * Merging, the kernel's PIPE_BUF_FLAG_CAN_MERGE: a write that fits in the
 * room left in the last live page is appended there under the writers' lock
 * and published by growing that slot's len, so a hundred-byte write costs
 * one copy and one store, not a page. It is safe without a lock shared with
 * the readers because a reader never retires the last live slot unless its
 * page is full: a writer appends to slot head-1 only when it has room, a
 * reader retires slot head-1 only when it has none, and len is written only
 * by writers, so the two never act on the same slot at once.
 *
 * The lone writer (the lock biased to it) keeps its own copy of the last
 * slot (last_keep()) and takes a short way for small writes
 * (up__ring_write_small()), loading nothing from the segment that another
 * core writes.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "writer.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* MADV_POPULATE_WRITE was refused for good (populate_ahead()): never ask again. */
static _Atomic bool ahead_refused;

/*
 * Called after this writer woke a sleeping reader: the message is on its
 * way, and a writer whose reader sleeps writes sparsely, so the base page
 * its next write enters is populated now instead of inside that write,
 * where the first touch of a memfd page (its allocation and zeroing) would
 * delay the next message by the fault (docs/DESIGN.md, "Pages populated
 * ahead"). Only once the last write ended in the second half of its base
 * page, so that a byte written still holds one page; only after a wake, so
 * that a streaming writer makes no call. A populate never changes a byte:
 * the span may be another writer's room, or a page the trim takes back
 * meanwhile, and costs then a page of memory until the next trim at most.
 */
static void populate_ahead(struct up_end *w)
{
	struct up_pipe *p = w->p;
	const uint32_t sys = p->g.sys_page, ps = p->g.page_size;
	uint32_t used, next;
	unsigned char *at;
	int saved;

	/* relaxed: a flag that only ever turns on, and a miss costs one
	 * refused call. */
	if (!w->last_ok || sys == 0 || sys > ps ||
	    atomic_load_explicit(&ahead_refused, memory_order_relaxed))
		return;
	used = w->last_len & (sys - 1);
	if (used == 0 && w->last_len != 0)
		next = w->last_len; /* that base page is full: the next starts here */
	else if (used >= sys / 2)
		next = w->last_len - used + sys;
	else
		return;
	if (next < ps)
		at = w->last_base + next;
	else if (w->ncache > w->resv_pages)
		at = up__page_ptr(p, w->cache[w->resv_pages]); /* the next page a write takes */
	else
		return;
	if (at == w->ahead)
		return;
	w->ahead = at;
	saved = errno;
	up__count(&w->c.syscalls, 1);
	/* Refused for good: a kernel before 5.14 (EINVAL), a seccomp filter
	 * (EPERM, ENOSYS). relaxed: as the load above; nothing else is
	 * published by it. */
	if (madvise(at, sys, MADV_POPULATE_WRITE) < 0 &&
	    (errno == EINVAL || errno == EPERM || errno == ENOSYS))
		atomic_store_explicit(&ahead_refused, true, memory_order_relaxed);
	errno = saved;
}

/* Wake the reader a writer's progress may wake, then populate the page
 * ahead if a wake went out: one more call at most for each wake, never for
 * a writer whose reader keeps up or has a wake in flight. */
static void wake_reader(struct up_end *w)
{
	if (up__wake_line(w, &w->p->ln->rd_wait, 1))
		populate_ahead(w);
}

/*
 * The lone writer's copy of the last slot: good from a publish made under
 * the bias until the bias is lost, which this end learns in
 * up__bias_enter_own() (failing) or gives up in up__bias_give_up(); both
 * clear last_ok, so last_ok implies biased. Another writer can publish only
 * after taking the bias back. A peer that rewrites the slot meanwhile breaks
 * the protocol; what we then store is still a page we own and a len within
 * the page, which readers check like any other.
 */
static inline void last_keep(struct up_end *w, uint32_t head, uint32_t pg, uint32_t len)
{
	w->last_ok = w->biased;
	w->last_head = head;
	w->last_pg = pg;
	w->last_len = len;
	w->last_slot = up__slot_at(w->p, head - 1);
	w->last_base = up__page_ptr(w->p, pg);
	/* The lines the next merges store to, up to where their own asks
	 * begin (writer.h, up__store_ahead()), inside the page. */
	if (w->last_ok) {
		uint32_t end = len + UP_STORE_AHEAD + 2 * UP_CACHELINE;

		if (end > w->p->g.page_size)
			end = w->p->g.page_size;
		for (uint32_t a = len & ~(UP_CACHELINE - 1); a < end; a += UP_CACHELINE)
			up__prefetch_store(w->last_base + a);
	}
}

/*
 * Under the writers' lock: the last live slot, its len and its page, from
 * the lone writer's copy when it has one. 0, or -EPROTO (the caller drops
 * the lock) when they are out of range.
 */
int up__last_slot(struct up_end *w, struct up_shm_slot **sp, uint32_t *lenp, uint32_t *pgp)
{
	struct up_pipe *p = w->p;

	if (w->last_ok) {
		*sp = w->last_slot;
		*lenp = w->last_len;
		*pgp = w->last_pg;
		/* The slot must still say what we stored (a line we are about
		 * to store to anyway): a len grown or cut by someone else
		 * would have readers read bytes never written, or lose some. */
		return up__last_slot_same(w, *sp) ? 0 : -EPROTO;
	}
	/* relaxed: head is written only under the writers' lock we hold. */
	uint32_t h = atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed);
	/*
	 * No need to load tail (a line the readers write) to know that slot h-1
	 * is still live: readers retire the last slot only once it is full and
	 * len never shrinks, so a slot h-1 with room was never retired. The
	 * empty new ring has a full sentinel at h-1 (shm.c).
	 */
	struct up_shm_slot *s = up__slot_at(p, h - 1);

	/* relaxed: the last slot's len and page are written only by writers,
	 * under the lock we hold. */
	*lenp = atomic_load_explicit(&s->len, memory_order_relaxed);
	*pgp = atomic_load_explicit(&s->page, memory_order_relaxed);
	*sp = s;
	if (*lenp > p->g.page_size || *pgp >= p->g.page_count)
		return -EPROTO;
	return 0;
}

/*
 * Take the writers' lock and find room for @n bytes at the end of the last
 * live page. 1 with the lock held and *sp, *lenp, *pgp set; 0 when there is
 * no room (lock dropped); -EPROTO, or -EAGAIN (lock busy on a non-blocking
 * end, or at all when @try).
 */
int up__merge_open(struct up_end *w, size_t n, struct up_shm_slot **sp, uint32_t *lenp,
		   uint32_t *pgp, bool try)
{
	struct up_pipe *p = w->p;
	int r;

	r = try ? up__wlock_try(w) : up__wlock_take(w);
	if (r < 0)
		return r;
	if (up__last_slot(w, sp, lenp, pgp) < 0) {
		up__wlock_drop(w);
		return up__proto_error(p);
	}
	if (p->g.page_size - *lenp < n) {
		up__wlock_drop(w);
		return 0;
	}
	return 1;
}

/*
 * Append @n bytes at the end of the last live page when they all fit.
 * 1 when done, 0 when there is no room (nothing written), -EPROTO, -EAGAIN.
 */
static int try_merge(struct up_end *w, struct up__cur *c, size_t n)
{
	struct up_shm_slot *s;
	uint32_t len, pg;
	int r;

	r = up__merge_open(w, n, &s, &len, &pg, false);
	if (r <= 0)
		return r;
	up__cur_copy_in(c, up__page_ptr(w->p, pg) + len, n, false);
	up__merge_close(w, s, len + (uint32_t)n);
	return 1;
}

/* Publish @n filled pages (lengths in @lens) at head. */
int up__publish(struct up_end *w, const uint32_t *pages, const uint32_t *lens, uint32_t n)
{
	struct up_pipe *p = w->p;
	uint32_t h, t, i;
	int r;

	if (n == 0) /* callers have a page at least; nothing to publish */
		return 0;
	r = up__wlock_take(w);
	if (r < 0)
		return r;
	/* relaxed: head is written only under the writers' lock we hold. */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed);
	/* The lone writer stored head last: one that moved meanwhile (back:
	 * we would overwrite live slots; on: readers read stale ones) was
	 * not moved by a writer. */
	if (w->last_ok && (h != w->last_head || !up__last_slot_same(w, up__slot_at(p, h - 1)))) {
		up__wlock_drop(w);
		return up__proto_error(p);
	}
	/*
	 * The slots [h, h+n) must be retired. Holding n pages implies it for
	 * honest peers (one page per live slot), so this guards against a
	 * lying peer, checked first against the tail this end saw last: tail
	 * only grows, so an old value can only make the check stricter. Reload
	 * (a line the readers write) only when the old value does not suffice.
	 */
	t = w->tail_cache;
	if (h - t > p->g.slot_count || p->g.slot_count - (h - t) < n) {
		/* [tail] acq: the slots about to be filled are retired; pairs
		 * with [tail] rel in up__read_locked(). */
		t = up__pos_tail(atomic_load_explicit(&p->ln->cons.pos, memory_order_acquire));
		w->tail_cache = t;
		if (h - t > p->g.slot_count || p->g.slot_count - (h - t) < n) {
			up__wlock_drop(w);
			return up__proto_error(p);
		}
	}
	/* Tag for the ring first: a page we die holding after this is
	 * leaked, never handed out twice (pagepool.c, up__pages_orphaned()).
	 * A page of ours that is not tagged ours was taken by someone else
	 * too (a pool entry named it twice). */
	if (up__pages_to_ring(p, pages, n, w->tag) < 0) {
		up__wlock_drop(w);
		return up__proto_error(p);
	}
	for (i = 0; i < n; i++) {
		struct up_shm_slot *s = up__slot_at(p, h + i);

		/* relaxed: published by the [head] store below. */
		atomic_store_explicit(&s->page, pages[i], memory_order_relaxed);
		atomic_store_explicit(&s->len, lens[i], memory_order_relaxed);
	}
	/* Slots [h, h+n) before head: [head] rel, and the [wait] handshake
	 * with a sleeping reader, in up__progress_store(). A full fence here
	 * drained the store buffer of the whole page's stores, once a page. */
	up__progress_store(w, p->ln, &p->ln->prod.head, h + n);
	last_keep(w, h + n, pages[n - 1], lens[n - 1]);
	up__wlock_drop(w);
	wake_reader(w);
	return 0;
}

/* Make sure the writer's cache holds at least one unreserved page, taking
 * up to @want in one batch. Returns pages available, 0 if none, -EPROTO. */
int up__cache_fill(struct up_end *w, uint32_t want)
{
	uint32_t have = w->ncache - w->resv_pages;
	int r;

	if (have >= want)
		return (int)have;
	/* The hot page first: it is there only after the reader slept
	 * (pagepool.c, the hand-off). */
	if (w->ncache < UP_END_CACHE_MAX) {
		r = up__pool_take_hot(w->p, &w->cache[w->ncache], w->tag);
		if (r < 0)
			return up__proto_error(w->p);
		w->ncache += (uint32_t)r;
		have += (uint32_t)r;
		if (have >= want)
			return (int)have;
	}
	/* Take a few more than this write needs: one CAS on the pool line per
	 * batch instead of per page. Kept small next to the capacity, since
	 * pages in one writer's cache are not available to the others. */
	if (want < w->take_batch)
		want = w->take_batch;
	if (want - have > UP_END_CACHE_MAX - w->ncache)
		want = UP_END_CACHE_MAX - w->ncache + have;
	r = up__pool_take(w->p, w->cache + w->ncache, want - have, w->p->g.spare_pages, w->tag);
	if (r < 0)
		return up__proto_error(w->p);
	w->ncache += (uint32_t)r;
	have += (uint32_t)r;
	return (int)have;
}

/*
 * The pool had no page for us: 0 to look again (after sleeping until one
 * may be free, or after a sweep found pages a dead writer held), -EAGAIN on
 * a non-blocking end, or an error.
 */
int up__wait_pages(struct up_end *w)
{
	if (w->flags & UP_NONBLOCK)
		return up__sweep_orphans(w) ? 0 : -EAGAIN;
	return up__wait_ready(w, &w->p->ln->wr_wait, up__wr_ready, UP_END_READER);
}

/* Drop the first @n pages of the cache (they were published). */
void up__cache_shift(struct up_end *w, uint32_t n)
{
	memmove(w->cache, w->cache + n, (w->ncache - n) * sizeof(w->cache[0]));
	w->ncache -= n;
}

/* The end of up__merge_close() for an end that holds the lock word, not
 * the bias. */
void up__merge_close_locked(struct up_end *w)
{
	struct up_shm_lines *ln = w->p->ln;

	up__lock_drop(w, &ln->wlock.word);
	wake_reader(w);
}

/* up__merge_close()'s calls out: a revoker marked the bias (@revoked), a
 * reader sleeps (@wake). */
void up__merge_close_wake(struct up_end *w, bool revoked, bool wake)
{
	if (revoked)
		up__busy_wake(w);
	if (wake && up__wake_line_slow(w, &w->p->ln->rd_wait, 1))
		populate_ahead(w);
}

/* Forget the current reservation, if any, without publishing it. */
void up__resv_cancel(struct up_end *w)
{
	up__resv_fill_end(w);
	if (up__resv_is_merge(w)) {
		w->resv_merge = false;
		up__wlock_drop(w);
	}
	w->resv_pages = 0;
	w->resv_bytes = 0;
}

/* Count @bytes of whole pages just copied into the timed window (copy.h). */
static inline void stores_note(struct up_end *w, uint64_t bytes)
{
	struct up__stores *s = &w->stores;

	if (bytes == 0)
		return;
	if (s->t0 == 0)
		s->t0 = up__now_ns();
	s->bytes += bytes;
	if (s->bytes >= UP_STORES_WINDOW)
		up__stores_turn(s, up__now_ns());
}

ssize_t up__ring_write(struct up_end *w, const struct iovec *iov, int iovcnt, size_t len)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	const uint32_t chunk_pages = ps >= UP_CHUNK_BYTES ? 1 : UP_CHUNK_BYTES >> p->g.page_shift;
	uint32_t lens[UP_END_CACHE_MAX];
	struct up__cur c;
	size_t done = 0;
	int r = 0;

	if (len == 0)
		return 0;
	w->deadline_ns = 0; /* a new call: its timeout runs from its first sleep */
	if (up__unlikely(w->armed))
		up__ring_disarm(w);
	up__resv_cancel(w); /* a write ends a reservation, as a commit of 0 */
	up__cur_init(&c, iov, iovcnt);
	while (done < len) {
		size_t rem = len - done;
		uint32_t want, n, i;
		bool part, nt;

		r = up__write_check(p);
		if (r < 0)
			break;
		if (rem < ps) {
			r = try_merge(w, &c, rem);
			if (r > 0) {
				done = len;
				r = 0;
				break;
			}
			if (r < 0)
				break;
		}
		/* In size_t, then bounded: a count of 2^32 pages cut to 32 bits
		 * is 0, and a write of 0 pages never ends. Below a chunk,
		 * rem + ps - 1 cannot wrap. */
		want = rem >= (size_t)chunk_pages << p->g.page_shift
			       ? chunk_pages
			       : (uint32_t)((rem + ps - 1) >> p->g.page_shift);
		r = up__cache_fill(w, want);
		if (r < 0)
			break;
		if (r == 0) {
			r = up__wait_pages(w);
			if (r < 0)
				break;
			continue;
		}
		n = (uint32_t)r < want ? (uint32_t)r : want;
		part = false;
		nt = up__stores_nt(&w->stores);
		/* Copy with no lock held: other writers and the readers go on. */
		for (i = 0; i < n && rem; i++) {
			uint32_t k = rem < ps ? (uint32_t)rem : ps;

			up__cur_copy_in(&c, up__page_ptr(p, w->cache[i]), k, nt && k == ps);
			lens[i] = k;
			rem -= k;
			part = k < ps;
		}
		n = i;
		stores_note(w, (uint64_t)(n - part) << p->g.page_shift);
		/* The streaming stores above before up__publish()'s head store. */
		up__nt_fence();
		r = up__publish(w, w->cache, lens, n);
		if (r < 0)
			break;
		up__cache_shift(w, n);
		done = len - rem;
		r = 0;
	}
	if (done) {
		up__count(&w->c.bytes_written, done);
		up__count(&w->c.writes, 1);
		return (ssize_t)done; /* the error, if any, shows on the next call */
	}
	return r;
}
