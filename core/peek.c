/* SPDX-License-Identifier: MIT */
/*
 * peek.c - zero-copy reads: up_peek() hands out the readable spans in place
 * and keeps the readers' lock, so the spans stay valid; up_consume()
 * retires the first n bytes of them and lets the lock go.
 *
 * A peeking reader holds the readers' lock between the two calls, as a
 * reader holds it across its copy; other readers wait meanwhile, writers do
 * not.
 *
 * How far a peek walks. Every slot a peek shows costs a load of its page and
 * len, and the last one's len is the line the writer is storing to. A reader
 * of 100-byte messages behind a full ring of 4 KiB pages would walk 256
 * slots to use one. So a fresh peek stops once it has shown peek_want bytes:
 * what the last up_consume() took, or, when that consume took all that the
 * peek showed, twice that (a consumer that uses what it sees is shown more
 * each time, up to the whole ring; 0, the first
 * peek's, is no bound, and so is the bound after an up_consume(0), which
 * says that what was shown was too little).
 * Where the slot this end keeps (reader.c) holds that much, the peek
 * shows only its rest, touching neither head nor any slot, as a small read
 * does. A peek again before a consume walks everything: a caller that needs
 * more than it was shown sees all there is by asking twice.
 */
#include "short.h"

/*
 * A reader lets go of a peek without consuming (up_consume(0), a refused
 * up_consume, close): the writer's wake for one reader may have been the one
 * that brought it here, so pass it on, or another reader sleeps with the
 * data there for its whole slice. Not on the way into a new read or peek:
 * this reader takes the data itself then.
 */
void up__peek_let_go(struct up_end *rd)
{
	if (!rd->peek_locked)
		return;
	up__peek_unlock(rd);
	up__chain_wake(rd);
}

/* Under the readers' lock: the readable spans, without consuming, until
 * @want bytes are shown (0: all of them). */
static ssize_t peek_locked(struct up_end *rd, struct iovec *iov, int *iovcnt, bool whole,
			   size_t want)
{
	struct up_pipe *p = rd->p;
	bool caught = false, fin;
	uint32_t t, h;
	size_t got = 0;
	int spans = 0;

	uint64_t pos;
	uint32_t off;

	if (up__pos_take(rd, &pos) < 0)
		return -EPROTO;
	off = up__pos_off(pos);
	t = up__pos_tail(pos);
	fin = rd->fin_valid && !rd->fin_last && up__pos_own(rd);
	/* [head] acq: pairs with [head] rel in up__progress_store(). */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);
	if (h - t > p->g.slot_count)
		return up__proto_error(p);
	rd->seen_head = h;
	for (; t != h; t++, off = 0) {
		struct up_shm_slot *s = up__slot_at(p, t);
		uint32_t pg, len;
		unsigned char *base;

		/* Coalescing: leave the page the writer appends to alone. */
		if (whole && got > 0 && t + 1 == h) {
			caught = true;
			break;
		}
		if (fin && t == rd->fin_t) {
			/* The final slot this end keeps (reader.c): checked
			 * when kept, and its line not loaded. */
			pg = rd->fin_pg;
			len = rd->fin_len;
		} else {
			/* relaxed: ordered by the [head] acquire above. */
			pg = atomic_load_explicit(&s->page, memory_order_relaxed);
			/* [len] acq: pairs with [len] rel in up__progress_store(). */
			len = atomic_load_explicit(&s->len, memory_order_acquire);
		}
		/* Writers publish no empty slot (writer.c): one would be
		 * skipped here while up__rd_ready() calls the ring readable,
		 * and a blocking peek would go round for ever. */
		if (pg >= p->g.page_count || !up__page_in_ring(p, pg) || len > p->g.page_size ||
		    off > len || len == 0)
			return up__proto_error(p);
		if (len == off)
			continue;
		if (got == 0 && !(fin && t == rd->fin_t)) {
			/* Keep the first slot shown, as a read cut short in it
			 * does (reader.c), for up_consume()'s short way and the
			 * next peek's. */
			rd->fin_t = t;
			rd->fin_pg = pg;
			rd->fin_len = len;
			rd->fin_last = t + 1 == h;
			rd->fin_valid = true;
		}
		base = up__page_ptr(p, pg) + off;
		if (spans > 0 && (unsigned char *)iov[spans - 1].iov_base +
					 iov[spans - 1].iov_len == base) {
			iov[spans - 1].iov_len += len - off;
		} else {
			if (spans == *iovcnt)
				break;
			iov[spans].iov_base = base;
			iov[spans].iov_len = len - off;
			spans++;
		}
		got += len - off;
		if (want != 0 && got >= want) {
			t++;
			break;
		}
	}
	rd->caught = caught || t == h;
	*iovcnt = spans;
	return (ssize_t)got;
}

ssize_t up__ring_peek(struct up_end *rd, struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = rd->p;
	bool waited = false, whole;
	size_t want;
	ssize_t n;
	int r;

	if (*iovcnt <= 0)
		return -EINVAL;
	/* A peek again under the held lock shows everything (see the top).
	 * up_peek() has tried the short way (short.h). */
	want = rd->peek_locked ? 0 : rd->peek_want;
	rd->peek_fast = false; /* what this shows is not the short way's */
	rd->deadline_ns = 0;
	if (up__unlikely(rd->armed))
		up__ring_disarm(rd);
	/* Only on a fresh peek: one that re-peeks under the held lock must not
	 * stall the writer's page-boundary publishes. */
	whole = !rd->peek_locked && up__coalesce(rd);
	for (;;) {
		uint32_t writers;
		int cnt = *iovcnt;

		if (up__is_broken(p)) {
			up__peek_unlock(rd);
			return -EPROTO;
		}
		/* [wait] sc: writers before the walk, as in up__ring_read();
		 * pairs with [wait] sc in up__side_leave(). */
		writers = atomic_load_explicit(&p->ln->state.writers, memory_order_seq_cst);
		if (!rd->peek_locked) {
			r = up__rlock_take(rd);
			if (r < 0)
				return r;
			rd->peek_locked = true;
		}
		n = peek_locked(rd, iov, &cnt, whole, want);
		if (n != 0) {
			if (n < 0) {
				up__peek_unlock(rd);
			} else {
				up__streak_note(rd, waited);
				*iovcnt = cnt;
				rd->peek_shown = (size_t)n;
			}
			return n;
		}
		up__peek_unlock(rd);
		r = up__read_idle(rd, writers);
		if (r <= 0) {
			if (r == 0)
				*iovcnt = 0;
			return r;
		}
		waited = true;
	}
}

/* Under the readers' lock: the bytes readable now, counted up to @n. */
static ssize_t consume_avail(struct up_end *rd, size_t n)
{
	struct up_pipe *p = rd->p;
	uint64_t pos;
	uint32_t t, off, h;
	size_t avail = 0;

	if (up__pos_take(rd, &pos) < 0)
		return -EPROTO;
	t = up__pos_tail(pos);
	off = up__pos_off(pos);
	/* [head] acq: pairs with [head] rel in up__progress_store(). */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);
	if (h - t > p->g.slot_count)
		return up__proto_error(p);
	for (; t != h && avail < n; t++, off = 0) {
		/* [len] acq: pairs with [len] rel in up__progress_store(). */
		uint32_t len = atomic_load_explicit(&up__slot_at(p, t)->len, memory_order_acquire);

		if (len > p->g.page_size || off > len)
			return up__proto_error(p);
		avail += len - off;
	}
	return (ssize_t)avail;
}

/*
 * The bound of the next fresh peek after a consume of @n (see the top):
 * @n, when the consumer used less than it was shown; else twice what it was
 * shown, at least @n and never below the bound it had, so that one peek that
 * found little does not shrink it. 0 (no bound) stays 0, and a bound over
 * half the ring becomes 0. peek_shown is 0 when no peek came before
 * (up__peek_unlock() clears it).
 *
 * Not "half of what it was shown": a reader that keeps up with a writer of
 * messages is shown one or two of them, and doubling on half would make its
 * next peek walk instead of taking the kept slot.
 */
static __attribute__((noinline)) size_t next_want(const struct up_end *rd, size_t n)
{
	const size_t half = (size_t)rd->p->g.page_count * rd->p->g.page_size / 2;
	size_t want;

	if (rd->peek_want == 0)
		return 0;
	want = rd->peek_shown <= half ? 2 * rd->peek_shown : 0;
	if (want != 0 && want < n)
		want = n;
	if (want != 0 && want < rd->peek_want)
		want = rd->peek_want;
	return want > half ? 0 : want;
}

int up__ring_consume(struct up_end *rd, size_t n)
{
	bool freed = false;
	ssize_t avail;
	size_t want;
	int r;

	rd->deadline_ns = 0;
	if (!rd->peek_locked) {
		r = up__rlock_take(rd);
		if (r < 0)
			return r;
		rd->peek_locked = true;
	}
	if (n == 0) {
		/* Let go without using anything: what it was shown was too
		 * little, so the next fresh peek shows everything. */
		rd->peek_want = 0;
		up__peek_let_go(rd);
		return 0;
	}
	/* The message reader's case inline, the rest in next_want(). */
	want = up__likely(n < rd->peek_shown) ? n : next_want(rd, n);
	if (up__consume_small(rd, n)) {
		rd->peek_want = want;
		return 0;
	}
	/* Count what is readable first: consume is all or nothing. */
	avail = consume_avail(rd, n);
	if (avail < 0) {
		up__peek_unlock(rd);
		return (int)avail;
	}
	if ((size_t)avail < n) {
		up__peek_let_go(rd);
		return -EINVAL;
	}
	rd->peek_want = want;
	avail = up__read_locked(rd, NULL, n, false, &freed);
	up__peek_unlock(rd);
	if (freed)
		up__wake_writers(rd, false);
	if (avail < 0)
		return (int)avail;
	up__chain_wake(rd);
	up__count(&rd->c.bytes_read, (uint64_t)avail);
	up__count(&rd->c.reads, 1);
	return 0;
}
