/* SPDX-License-Identifier: MIT */
/*
 * reserve.c - zero-copy writes: up_reserve() hands out pipe pages to fill in
 * place, up_commit() publishes what was filled.
 *
 * A reservation is either pages of the writer's cache (published by
 * up__publish() as a write of whole and partial pages would be), or, for a
 * small one, the room at the end of the last live page with the writers'
 * lock held until commit grows the slot's len (a merge reservation). The
 * lock held across the caller's fill stalls the other writers' publishes
 * until the commit, as the kernel's pipe_write holds pipe->mutex across its
 * copy from user memory. So the only writer may wait for the lock, while
 * with several writers a small reservation takes the lock only when it is
 * free at once and the reservation is at most half a page; otherwise it
 * takes a page of its own, which never waits for another writer's fill.
 */
#include "short.h"

/*
 * A merge reservation (see the top of the file). Returns the bytes reserved,
 * 0 when the room is too small, -EAGAIN when @try found the lock busy, or an
 * error.
 */
static ssize_t reserve_merge(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt,
			     bool try)
{
	struct up_shm_slot *s;
	uint32_t have, pg;
	int r;

	r = up__merge_open(w, len, &s, &have, &pg, try);
	if (r <= 0)
		return r;
	iov[0].iov_base = up__page_ptr(w->p, pg) + have;
	iov[0].iov_len = len;
	*iovcnt = 1;
	w->resv_merge = true;
	w->resv_bytes = len;
	/* Where the room is, for a commit without last_ok (commit_merge()).
	 * relaxed: head is written only under the lock we hold. */
	w->resv_head = atomic_load_explicit(&w->p->ln->prod.head, memory_order_relaxed);
	w->resv_pg = pg;
	w->resv_len = have;
	return (ssize_t)len;
}

/* Publish the first @n bytes of a merge reservation; drops the lock. */
static int commit_merge(struct up_end *w, size_t n)
{
	struct up_pipe *p = w->p;
	struct up_shm_slot *s;
	uint32_t have, pg;

	w->resv_merge = false;
	w->resv_bytes = 0;
	/* Under our lock nobody else wrote head or len: re-check anyway, the
	 * segment is shared with processes we do not trust. The room must be
	 * the one handed out, or the len grown would cover bytes the caller
	 * never wrote. The lone writer wrote the slot's head and page itself;
	 * only len is looked at. */
	if (w->last_ok) {
		/* The room after last_len in slot last_head - 1: both ways of
		 * reserving a merge hand out that room while last_ok, and the
		 * short one writes no resv_head/pg/len. */
		s = w->last_slot;
		/* relaxed: written only under the lock we hold. */
		if (atomic_load_explicit(&s->len, memory_order_relaxed) != w->last_len) {
			up__wlock_drop(w);
			return up__proto_error(p);
		}
		have = w->last_len;
	} else if (up__last_slot(w, &s, &have, &pg) < 0 || p->g.page_size - have < n ||
		   /* relaxed: written only under the lock we hold. */
		   atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed) != w->resv_head ||
		   pg != w->resv_pg || have != w->resv_len) {
		up__wlock_drop(w);
		return up__proto_error(p);
	}
	up__merge_close(w, s, have + (uint32_t)n);
	up__count(&w->c.bytes_written, n);
	up__count(&w->c.writes, 1);
	return 0;
}

/* Hand out the first cached pages as up to *iovcnt spans, joining
 * neighbours in memory into one span. Returns the bytes reserved. */
static ssize_t resv_pages_give(struct up_end *w, size_t len, size_t want_pages,
			       struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	size_t bytes = 0;
	uint32_t i;
	int spans = 0;

	for (i = 0; i < w->ncache && i < want_pages && bytes < len; i++) {
		unsigned char *base = up__page_ptr(p, w->cache[i]);
		size_t k = len - bytes < ps ? len - bytes : ps;

		if (spans > 0 && (unsigned char *)iov[spans - 1].iov_base +
					 iov[spans - 1].iov_len == base &&
		    iov[spans - 1].iov_len % ps == 0) {
			iov[spans - 1].iov_len += k;
		} else {
			if (spans == *iovcnt)
				break;
			iov[spans].iov_base = base;
			iov[spans].iov_len = k;
			spans++;
		}
		bytes += k;
	}
	w->resv_pages = i;
	w->resv_bytes = bytes;
	w->resv_merge = false;
	*iovcnt = spans;
	return (ssize_t)bytes;
}

/*
 * The most pages one reservation takes: a quarter of the capacity (a page
 * at the least), and no more than an end's cache holds. A reservation of
 * the whole pipe would have the writer fill while the reader has nothing
 * to read, then the reader drain while the writer waits: the two sides
 * would take turns instead of overlapping, on a working set twice the
 * pipe's. A quarter keeps three quarters for the reader to drain
 * meanwhile; a larger write is a few reservations, as a large write(2) to
 * a pipe is a few fills.
 */
static size_t resv_pages_max(const struct up_pipe *p)
{
	size_t q = (p->g.page_count - p->g.spare_pages) / 4;

	if (q > UP_END_CACHE_MAX)
		q = UP_END_CACHE_MAX;
	return q ? q : 1;
}

ssize_t up__ring_reserve(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	size_t want_pages;
	int r;

	if (len == 0 || *iovcnt <= 0)
		return -EINVAL;
	w->deadline_ns = 0; /* a new call: its timeout runs from its first sleep */
	if (up__unlikely(w->armed))
		up__ring_disarm(w);
	up__resv_cancel(w); /* a new reservation replaces the last one */
	/* [wait] sc: the EPIPE edge; pairs with [wait] sc in up__side_leave(). */
	if (len < ps && !up__is_broken(p) &&
	    !up__side_gone(atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst))) {
		/* relaxed: a hint; a writer that joins or leaves meanwhile only
		 * changes whether we wait for a busy lock. */
		bool lone = up__side_open(atomic_load_explicit(&p->ln->state.writers,
							       memory_order_relaxed)) == 1;

		if (lone || len <= ps / 2) {
			ssize_t got = reserve_merge(w, len, iov, iovcnt, !lone);

			/* 0: no room; -EAGAIN with several writers: the lock
			 * is busy. Either way, take a page of our own. */
			if (got != 0 && !(got == -EAGAIN && !lone))
				return got;
		}
	}
	/* Not (len + ps - 1) >> shift: near SIZE_MAX that wraps to 0 pages,
	 * and a fill of 0 pages finds "none free" for ever. */
	want_pages = (len >> p->g.page_shift) + ((len & (ps - 1)) != 0);
	if (want_pages > resv_pages_max(p))
		want_pages = resv_pages_max(p);
	for (;;) {
		r = up__write_check(p);
		if (r < 0)
			return r;
		r = up__cache_fill(w, (uint32_t)want_pages);
		if (r < 0)
			return r;
		if (r > 0)
			break;
		r = up__wait_pages(w);
		if (r < 0)
			return r;
	}
	(void)resv_pages_give(w, len, want_pages, iov, iovcnt);
	/* A large fill: readers that run out meanwhile spin for it. */
	if (w->resv_bytes >= (size_t)UP_CHUNK_BYTES) {
		/* relaxed: a hint (shm_layout.h). */
		atomic_store_explicit(&p->ln->prod.fill_until, up__now_ns() + UP_SPIN_INSIDE_NS,
				      memory_order_relaxed);
		w->resv_fill = true;
	}
	return (ssize_t)w->resv_bytes;
}

int up__ring_commit(struct up_end *w, size_t n)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	uint32_t lens[UP_END_CACHE_MAX];
	uint64_t bytes = n;
	uint32_t k = 0;
	int r;

	if (n > w->resv_bytes)
		return -EINVAL;
	w->deadline_ns = 0;
	/* [wait] sc: the EPIPE edge; pairs with [wait] sc in up__side_leave(). */
	if (n == 0 ||
	    up__side_gone(atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst))) {
		up__resv_cancel(w);
		return n == 0 ? 0 : -EPIPE;
	}
	if (up__resv_is_merge(w))
		return commit_merge(w, n);
	while (n) {
		lens[k] = n < ps ? (uint32_t)n : ps;
		n -= lens[k];
		k++;
	}
	r = up__publish(w, w->cache, lens, k);
	/* -EAGAIN: a non-blocking end found the writers' lock held (another
	 * writer's small reservation, say); -ETIMEDOUT, -ECANCELED: waiting
	 * for it was cut short. The reservation stays, so the caller can
	 * commit again and nothing written is lost; any other error ends it. */
	if (r == -EAGAIN || r == -ETIMEDOUT || r == -ECANCELED)
		return r;
	w->resv_pages = 0;
	w->resv_bytes = 0;
	up__resv_fill_end(w);
	if (r < 0)
		return r;
	up__count(&w->c.bytes_written, bytes);
	up__count(&w->c.writes, 1);
	up__cache_shift(w, k);
	return 0;
}
