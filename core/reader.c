/* SPDX-License-Identifier: MIT */
/*
 * reader.c - the read path: under the readers' lock, copy out of the slots
 * at tail, advance tail, and return the emptied pages to the pool in one
 * batch; then wake writers waiting for pages.
 *
 * Read coalescing. A reader that keeps finding a few hundred bytes written
 * by a writer on another core and copies them at once makes both cores
 * trade the same cache lines (the last data line and the slot's len) after
 * every write, and each such line costs the writer a cross-core miss inside
 * its publish. So after UP_STREAK_MIN reads that drained the ring without
 * waiting (the reader keeps up with a streaming writer), the reader waits
 * for a whole page: it watches head, a line the writer stores to once per
 * page, until a page is published past the one it left off in, for at most
 * UP_COALESCE_NS, and then reads whole pages only, leaving the page the
 * writer appends to alone. No program can tell this from a slightly slower
 * writer: a read still returns whatever it finds, at least one byte, and
 * blocks at most UP_COALESCE_NS longer.
 *
 * A read counts for the streak when it caught up: it ended where the
 * writers' data ends (or, coalescing, at their page), whether or not it also
 * filled the caller's buffer, so that a reader of 100-byte messages that
 * keeps up with a writer of them coalesces too. A read cut short with data
 * left is behind the writer: it neither counts nor ends the streak, and the
 * next call reads on without a coalescing wait (up__coalesce()), unless all
 * it left is in the page the writer appends to: a reader that keeps up with
 * a writer of messages would otherwise take them one by one from that page
 * (a zero-copy reader of 100-byte messages did so in two of three peeks),
 * each costing the writer a miss on the lines just loaded. That one waits
 * as a caught-up one does. The streak
 * ends when the writer shows it is not streaming: the reader had to sleep
 * for data, a coalescing wait ran out, or a non-blocking read found nothing.
 * A short spin for data does not end it: a reader that catches up with a
 * streaming writer (as a zero-copy reader does all the time) would otherwise
 * start over after every spin. A request/response reader, whose reads all
 * wait, never coalesces.
 *
 * A wait that runs out also doubles the streak the next one needs
 * (coalesce_backoff, up to UP_STREAK_MIN << UP_BACKOFF_MAX reads), and one
 * that sees a page come halves it. A reader whose writer cannot move while
 * it waits (the same thread writes and reads, or the writer is not on a
 * CPU) would otherwise spin UP_COALESCE_NS for nothing after every
 * UP_STREAK_MIN reads that drained the ring.
 *
 * The kept slot. A read cut short inside a slot keeps that slot's page and
 * the len it loaded in the end, as a peek does for the first slot it shows
 * (peek.c); the next read or peek of this end takes them from
 * there instead of loading the slot, whose line the writer keeps storing to
 * while it fills this slot or a neighbouring one (four to a line). So a
 * reader of small messages behind a writer touches no line the writer
 * writes but the data, and loads the len again only once it has read all
 * it saw. A slot that is no longer the last (a later one was published) is
 * final: its len will not change, and the short way may read up to its end
 * less a byte (the general path retires it). The last slot may still grow
 * (fin_last): the short way reads up to the len seen, and leaves it live,
 * unless the reader coalesces (up__fin_usable()).
 * The copy is good while no other reader moved the position since this end
 * stored it (ring.h, up__pos_own()), and only for that slot; the general
 * path loads a last slot's len again rather than trust the copy.
 *
 * The downward copy. The pool hands pages out in the order it got them back,
 * at first in address order, so the page a writer appends to is usually the
 * next one in memory after the page the reader copies out. A copy running
 * upwards trains the core's prefetcher upwards, and at the page's end it
 * runs into the writer's page and takes lines the writer is storing to. So
 * the coalescing reader copies the page just below the writer's (slot
 * head - 2) downwards; other pages are copied upwards, since a run of whole
 * pages is read fastest as one ascending stream.
 */
#include "bias.h"

#define UP_COALESCE_NS 4000u


struct freed {
	uint32_t n;
	uint32_t pages[UP_FREE_BATCH];
};

/* Return the freed pages; with @hand (the reader was idle before this
 * read), the last of them to the hot word if it is empty (pagepool.c). */
static int freed_flush(struct up_pipe *p, struct freed *f, bool hand)
{
	int r;

	up__pages_from_ring(p, f->pages, f->n);
	if (hand && up__pool_put_hot(p, f->pages[f->n - 1]))
		f->n--;
	r = f->n ? up__pool_put(p, f->pages, f->n) : 0;

	f->n = 0;
	return r < 0 ? up__proto_error(p) : 0;
}

/*
 * Under the readers' lock: walk the live slots from tail, copying up to @max
 * bytes out through @c (or, with c == NULL, just consuming them), retiring
 * emptied slots and returning their pages. With @whole (coalescing), leave
 * the last slot alone once something was taken. Returns the bytes taken or
 * -EPROTO; sets *freed_any when pages went back to the pool.
 */
ssize_t up__read_locked(struct up_end *rd, struct up__cur *c, size_t max, bool whole,
			bool *freed_any)
{
	struct up_pipe *p = rd->p;
	const uint32_t ps = p->g.page_size;
	bool caught = false, fin, fin_set = false, hand = rd->hand_off;
	struct freed f;
	uint32_t t, h, off;
	size_t got = 0, k;
	int r = 0;

	uint64_t pos0;

	f.n = 0;
	rd->hand_off = false;
	if (up__pos_take(rd, &pos0) < 0)
		return -EPROTO;
	t = up__pos_tail(pos0);
	off = up__pos_off(pos0);
	/* The cached slot is still the tail slot this end left: no other
	 * reader stored a position since this end did (bias, ring.h). */
	fin = rd->fin_valid && !rd->fin_last && up__pos_own(rd);
	/* [head] acq: slots [t, h) are filled; pairs with [head] rel in
	 * up__progress_store(). */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);
	if (h - t > p->g.slot_count)
		return up__proto_error(p);
	while (t != h && got < max) {
		struct up_shm_slot *s = up__slot_at(p, t);
		uint32_t pg;
		uint32_t len;

		/* Coalescing: leave the page the writer appends to alone. */
		if (whole && got > 0 && t + 1 == h) {
			caught = true;
			break;
		}
		if (fin && t == rd->fin_t) {
			/* The slot this end left part-read, final: its page
			 * and len as checked then; neither line is loaded. */
			pg = rd->fin_pg;
			len = rd->fin_len;
			if (off > len) {
				r = -EPROTO;
				break;
			}
			k = len - off < max - got ? len - off : max - got;
			if (c)
				up__cur_copy_out(c, up__page_ptr(p, pg) + off, k);
			off += (uint32_t)k;
			got += k;
			if (off < len)
				break; /* the caller's buffer is full */
			fin = false;
			goto retire;
		}
		/* relaxed: ordered by the [head] acquire above. */
		pg = atomic_load_explicit(&s->page, memory_order_relaxed);

		/* In range, and a page of the ring (pagepool.c): not a page
		 * in the pool or in a writer's hands, which a flipped page
		 * number or head would name. */
		if (pg >= p->g.page_count || !up__page_in_ring(p, pg)) {
			r = -EPROTO;
			break;
		}
		for (;;) {
			/* [len] acq: bytes below len are written; pairs with
			 * [len] rel in up__progress_store(). */
			len = atomic_load_explicit(&s->len, memory_order_acquire);
			if (len > ps || off > len) {
				r = -EPROTO;
				break;
			}
			if (len > off) {
				k = len - off < max - got ? len - off : max - got;
				if (c && whole && t + 2 == h)
					up__cur_copy_out_down(c, up__page_ptr(p, pg) + off, k);
				else if (c)
					up__cur_copy_out(c, up__page_ptr(p, pg) + off, k);
				off += (uint32_t)k;
				got += k;
				if (off < len) {
					/* The caller's buffer is full: keep the
					 * slot's page and len for the next call.
					 * The last slot may still grow. */
					rd->fin_t = t;
					rd->fin_pg = pg;
					rd->fin_len = len;
					rd->fin_last = t + 1 == h;
					fin_set = true;
					break;
				}
			}
			if (t + 1 != h)
				break; /* not the last slot: it can no longer grow */
			/* The last slot: has a later slot appeared since? Then a
			 * final merge into this one may have landed before it:
			 * re-read len after this head load.
			 * [head] acq: pairs with [head] rel in up__progress_store(). */
			h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);
			if (h - t > p->g.slot_count) {
				r = -EPROTO;
				break;
			}
			if (t + 1 == h)
				break;
		}
		if (r < 0)
			break;
		if (off < len)
			break;
		/* Fully read. The last live slot stays while its page has room,
		 * because a writer may still append to it (writer.c). */
		if (t + 1 == h && len < ps) {
			caught = true;
			break;
		}
retire:
		f.pages[f.n++] = pg;
		t++;
		off = 0;
		if (f.n == UP_FREE_BATCH) {
			/* [tail] rel: up__pos_store(): slots before t retired
			 * before their pages return; pairs with [tail] acq in
			 * up__publish(). */
			up__pos_store(rd, up__pos(t, 0));
			r = freed_flush(p, &f, hand);
			*freed_any = true;
			if (r < 0)
				break;
		}
	}
	if (r < 0)
		return up__proto_error(p);
	rd->seen_head = h;
	rd->caught = caught || t == h;
	rd->fin_valid = fin_set || (fin && rd->fin_t == t);
	/* [tail] rel: up__pos_store(): we are done with slots before t;
	 * pairs with [tail] acq in up__publish(). Stored only when it moved:
	 * writers read this line. */
	if (up__pos(t, off) != pos0)
		up__pos_store(rd, up__pos(t, off));
	if (f.n) {
		*freed_any = true;
		r = freed_flush(p, &f, hand);
		if (r < 0)
			return r;
	}
	return (ssize_t)got;
}

/* up__chain_wake() found a sleeping reader. */
void up__chain_wake_slow(struct up_end *rd)
{
	if (up__rd_ready(rd) > 0)
		up__wake_line(rd, &rd->p->ln->rd_wait, 1);
}

/* True when the reader should take whole pages only (see the top). */
bool up__coalesce(struct up_end *rd)
{
	_Atomic uint32_t *head = &rd->p->ln->prod.head;
	uint64_t t0;
	unsigned int i;

	if (!up__streak_full(rd))
		return false;
	/* Data is left from the last call: no wait, unless all of it is in the
	 * page the writer appends to. */
	if (!rd->caught && !(rd->fin_valid && rd->fin_last))
		return true;
	t0 = up__now_ns();
	for (i = 0;; i++) {
		/* relaxed: a hint; up__read_locked() loads head again with
		 * [head] acq. */
		if (atomic_load_explicit(head, memory_order_relaxed) - rd->seen_head != 0) {
			if (rd->coalesce_backoff > 0)
				rd->coalesce_backoff--;
			return true;
		}
		if ((i & 15) == 15 && up__now_ns() - t0 >= UP_COALESCE_NS) {
			rd->streak = 0; /* the writer stopped streaming */
			if (rd->coalesce_backoff < UP_BACKOFF_MAX)
				rd->coalesce_backoff++;
			return false;
		}
		up__cpu_relax();
	}
}

/*
 * A read or peek found nothing, with @writers loaded before it looked:
 * 0 for end of stream (writers came and none is left), -EAGAIN on a non-blocking end, 1 after waiting for
 * data (look again), or an error. A sleep ends the streak; a spin does not.
 */
int up__read_idle(struct up_end *rd, uint32_t writers)
{
	uint64_t slept;
	int r;

	if (up__side_gone(writers))
		return 0;
	if (rd->flags & UP_NONBLOCK) {
		rd->streak = 0;
		return -EAGAIN;
	}
	/* relaxed: our own counter. */
	slept = atomic_load_explicit(&rd->c.waits, memory_order_relaxed);
	r = up__wait_ready(rd, &rd->p->ln->rd_wait, up__rd_ready, UP_END_WRITER);
	/* relaxed: our own counter. */
	if (atomic_load_explicit(&rd->c.waits, memory_order_relaxed) != slept) {
		rd->streak = 0;
		/* Slept: the pages the next read frees are a trickle's (the
		 * hand-off, pagepool.c). */
		rd->hand_off = true;
	}
	return r < 0 ? r : 1;
}

ssize_t up__ring_read(struct up_end *rd, const struct iovec *iov, int iovcnt, size_t len)
{
	bool waited = false, whole;
	struct up_pipe *p = rd->p;
	struct up__cur c;
	ssize_t n;
	int r;

	if (len == 0)
		return 0;
	rd->deadline_ns = 0; /* a new call: its timeout runs from its first sleep */
	if (up__unlikely(rd->armed))
		up__ring_disarm(rd);
	up__peek_unlock(rd);
	up__cur_init(&c, iov, iovcnt);
	whole = up__coalesce(rd);
	for (;;) {
		bool freed = false;
		uint32_t writers;

		if (up__is_broken(p))
			return -EPROTO;
		/* Load writers before looking at the ring: if they are gone
		 * here, every publish happened before and the walk sees it.
		 * [wait] sc: pairs with [wait] sc in up__side_leave(). */
		writers = atomic_load_explicit(&p->ln->state.writers, memory_order_seq_cst);
		r = up__rlock_take(rd);
		if (r < 0)
			return r;
		n = up__read_locked(rd, &c, len, whole, &freed);
		up__rlock_drop(rd);
		if (freed)
			up__wake_writers(rd, n >= 0 && (size_t)n < len);
		if (n != 0) {
			if (n > 0) {
				up__chain_wake(rd);
				up__count(&rd->c.bytes_read, (uint64_t)n);
				up__count(&rd->c.reads, 1);
				up__streak_note(rd, waited);
			}
			return n;
		}
		r = up__read_idle(rd, writers);
		if (r <= 0)
			return r;
		waited = true;
	}
}
