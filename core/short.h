/* SPDX-License-Identifier: MIT */
/*
 * short.h - the short ways of up_write(), up_read(), up_reserve(),
 * up_commit(), up_peek() and up_consume(), inline into the API's entry
 * points (pipe.c) and used by the general paths (reserve.c, peek.c) where
 * they fit.
 *
 * A writer of messages is bound by its stores: an entry point that calls
 * out to a general function saves four to six registers first, a store
 * each, on every call. So the entry points run these inline and tail-call
 * the general path only when they decline. Each does what the general path
 * does in its case and leaves every other case, errors included, to it.
 */
#ifndef UP_CORE_SHORT_H
#define UP_CORE_SHORT_H

#include <string.h>

#include "writer.h"

/*
 * up_write()'s short way: the lone writer appends @len bytes (not 0) to the
 * last page, which it knows has room without looking at the segment. The
 * general path does the same through try_merge(), after an iovec cursor, a
 * reservation check and a loop. Returns @len when done, or 0: the general
 * path takes the write and finds whatever stopped this one.
 */
static inline size_t up__ring_write_small(struct up_end *w, const void *buf, size_t len)
{
	uint32_t have = w->last_len;

	if (!up__short_enter(w, len))
		return 0;
	memcpy(w->last_base + have, buf, len);
	/* Counted before the publish: after it only the wake may call out,
	 * so fewer registers live across a call need saving on entry. */
	up__count(&w->c.bytes_written, len);
	up__count(&w->c.writes, 1);
	up__merge_close(w, w->last_slot, have + (uint32_t)len);
	return len;
}

/*
 * up_read()'s short way: the reader takes @len bytes (not 0) from the slot
 * it left part-read (reader.c, see its top), without retiring it. Only the
 * readers' lock (through the bias, our own entry), our own position line
 * and the data are touched; no
 * slot, no head, no coalescing. Returns the bytes taken, or 0: the general
 * path takes the read (the lock is busy, another reader moved the position,
 * the read would retire the slot or needs more than was seen, the end is
 * armed or mid-peek).
 */
static inline size_t up__ring_read_small(struct up_end *rd, void *buf, size_t len)
{
	struct up_pipe *p = rd->p;
	uint32_t off;

	if (!up__fin_usable(rd) || rd->armed || rd->peek_locked || up__is_broken(p) ||
	    up__rlock_try(rd) < 0)
		return 0;
	if (!up__fin_here(rd, &off) || !up__fin_room(rd, off, len)) {
		up__rlock_drop(rd);
		return 0;
	}
	memcpy(buf, up__page_ptr(p, rd->fin_pg) + off, len);
	/* [tail] rel: up__pos_store(); pairs with [tail] acq in
	 * up__publish(). */
	up__pos_store(rd, up__pos(rd->fin_t, off + (uint32_t)len));
	up__rlock_drop(rd);
	rd->caught = false; /* data left: the streak stays as it is */
	up__chain_wake(rd);
	up__count(&rd->c.bytes_read, len);
	up__count(&rd->c.reads, 1);
	return len;
}

/*
 * The lone writer's short way (see up__ring_write_small()): the room in the
 * last page, keeping up__ring_reserve()'s rule for a writer that has just
 * joined: over half a page, a page of its own.
 */
static inline size_t up__reserve_small(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = w->p;

	if (len == 0 || *iovcnt <= 0)
		return 0;
	/* relaxed: a hint, as in up__ring_reserve(). */
	if ((len <= p->g.page_size / 2 ||
	     up__side_open(atomic_load_explicit(&p->ln->state.writers, memory_order_relaxed)) == 1) &&
	    up__short_enter(w, len)) {
		/* The room is at last_head, last_pg and last_len, which stay
		 * put until the commit (the lock is ours): the commit reads
		 * them there (last_ok), so resv_head/pg/len are not written. */
		iov[0].iov_base = w->last_base + w->last_len;
		iov[0].iov_len = len;
		*iovcnt = 1;
		if (!w->resv_merge) /* up__resv_is_merge(): kept set */
			w->resv_merge = true;
		w->resv_bytes = len;
		return len;
	}
	return 0;
}

/*
 * up_commit()'s short way: all or part of the lone writer's merge
 * reservation, while the slot says what it said at up_reserve(). Anything
 * else (an error to report included) is the general path's.
 */
static inline bool up__commit_small(struct up_end *w, size_t n)
{
	struct up_pipe *p = w->p;
	struct up_shm_slot *s;

	if (!up__resv_is_merge(w) || !w->last_ok || n == 0 || n > w->resv_bytes)
		return false;
	/* With last_ok the reservation is the room after last_len in slot
	 * last_head - 1 (up__reserve_small(), reserve_merge()). */
	s = w->last_slot;
	/* relaxed: written only under the lock we hold. [wait] sc: the
	 * EPIPE edge; pairs with [wait] sc in up__side_leave(). */
	if (atomic_load_explicit(&s->len, memory_order_relaxed) != w->last_len ||
	    up__side_gone(atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst)))
		return false;
	w->resv_bytes = 0; /* resv_merge stays set: up__resv_is_merge() */
	/* Counted before the publish, as in up__ring_write_small(). */
	up__count(&w->c.bytes_written, n);
	up__count(&w->c.writes, 1);
	up__merge_close(w, s, w->last_len + (uint32_t)n);
	return true;
}

/*
 * up_commit_reserve()'s short way: the lone writer publishes its merge
 * reservation as up__commit_small() does and reserves the room after it as
 * up__reserve_small() would, without leaving the writers' lock in between.
 * Staying inside is a longer critical section, which the bias allows (a
 * revoker waits while the owner is inside, bias.h); so the leave and the
 * entry, two stores, become one look at the bias for a revoker's mark.
 * Every check comes before the first store. Returns the bytes reserved (the
 * call is done); 0 when declined, nothing done (the general path takes the
 * call); -1 when published with the lock still ours and something to do
 * out of line first (a revoker's mark, a sleeping reader, the liveness
 * tick): the caller finishes out of line (io.c, commit_reserve_out()).
 */
static inline ssize_t up__commit_reserve_small(struct up_end *w, size_t n, size_t len,
					       struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = w->p;
	struct up_shm_lines *ln = p->ln;
	struct up_shm_slot *s = w->last_slot;
	uint32_t have = w->last_len + (uint32_t)n, nwait;
	bool out;

	if (!up__resv_is_merge(w) || !w->last_ok || !w->biased || n == 0 || n > w->resv_bytes ||
	    len == 0 || *iovcnt <= 0 || len > p->g.page_size - have || w->armed ||
	    up__is_broken(p) || !up__last_slot_same(w, s))
		return 0;
	/* relaxed: a hint, as in up__reserve_small(). */
	if (len > p->g.page_size / 2 &&
	    up__side_open(atomic_load_explicit(&ln->state.writers, memory_order_relaxed)) != 1)
		return 0;
	/* [wait] sc: the EPIPE edge; pairs with [wait] sc in up__side_leave(). */
	if (up__side_gone(atomic_load_explicit(&ln->state.readers, memory_order_seq_cst)))
		return 0;
	up__count(&w->c.bytes_written, n);
	up__count(&w->c.writes, 1);
	up__merge_publish(w, ln, s, have);
	/* relaxed: as in up__bias_leave_own(), ordered by a revoker's
	 * barrier; a mark missed here is seen at the next leave. */
	out = (atomic_load_explicit(&ln->wlock.bias, memory_order_relaxed) & UP_BIAS_REVOKE) != 0;
	/* [wait] sc: the waker's load of nwait after its progress store, as
	 * in up__merge_close(); pairs with [wait] sc in up__wait_ready(). */
	nwait = atomic_load_explicit(&ln->rd_wait.nwait, memory_order_seq_cst);
	if (up__unlikely(out || nwait != 0 || ++w->live_calls >= UP_LIVE_CALLS))
		return -1;
	iov[0].iov_base = w->last_base + have;
	if (iov[0].iov_len != len)
		iov[0].iov_len = len;
	if (*iovcnt != 1)
		*iovcnt = 1;
	w->resv_bytes = len; /* resv_merge stays set */
	return (ssize_t)len;
}

/* A fresh peek's short way (peek.c, see its top): the rest of the slot this
 * end keeps, when it holds @want bytes. Only the readers' lock (through the
 * bias, our own entry) and our position line are touched. True when taken (the lock then held). */
static inline bool up__peek_small(struct up_end *rd, struct iovec *iov, int *iovcnt, size_t want)
{
	struct up_pipe *p = rd->p;
	uint32_t off;

	if (want == 0 || !up__fin_usable(rd) || rd->armed || up__is_broken(p) ||
	    up__rlock_try(rd) < 0)
		return false;
	if (!up__fin_here(rd, &off) || rd->fin_len - off < want) {
		up__rlock_drop(rd);
		return false;
	}
	rd->peek_locked = true;
	rd->peek_fast = true;
	rd->peek_off = off;
	iov[0].iov_base = up__page_ptr(p, rd->fin_pg) + off;
	iov[0].iov_len = rd->fin_len - off;
	*iovcnt = 1;
	rd->caught = false; /* data left: the streak stays as it is */
	rd->peek_shown = iov[0].iov_len;
	return true;
}

/* up_peek()'s short way: a fresh peek whose want the kept slot holds. The
 * bytes shown, or 0. */
static inline size_t up__peek_small_entry(struct up_end *rd, struct iovec *iov, int *iovcnt)
{
	if (*iovcnt <= 0 || rd->peek_locked || !up__peek_small(rd, iov, iovcnt, rd->peek_want))
		return 0;
	return rd->peek_shown;
}

/* up_consume()'s short way, after a peek: @n bytes that leave the slot
 * kept by this end live (up__fin_room()). True when done (the lock let go). */
static inline bool up__consume_small(struct up_end *rd, size_t n)
{
	uint32_t off;

	if (!rd->fin_valid || !up__fin_here(rd, &off) || !up__fin_room(rd, off, n))
		return false;
	/* [tail] rel: up__pos_store(); pairs with [tail] acq in
	 * up__publish(). */
	up__pos_store(rd, up__pos(rd->fin_t, off + (uint32_t)n));
	up__peek_unlock(rd);
	up__chain_wake(rd);
	up__count(&rd->c.bytes_read, (uint64_t)n);
	up__count(&rd->c.reads, 1);
	return true;
}

/*
 * up_consume()'s short way after a peek: @n bytes, fewer than it showed,
 * that leave the kept slot live; the next fresh peek then wants @n (peek.c,
 * next_want()'s first case). After a short-way peek nothing needs looking
 * at again: it found the position in the kept slot, stored last by this
 * end, and we have held the readers' lock since, so no honest reader moved
 * it (a peer that did breaks the protocol, and our store puts it back).
 */
static inline bool up__consume_small_entry(struct up_end *rd, size_t n)
{
	if (!rd->peek_locked || n == 0 || n >= rd->peek_shown)
		return false;
	if (rd->peek_fast && n < rd->fin_len - rd->peek_off) {
		/* [tail] rel: up__pos_store_own(); pairs with [tail] acq in
		 * up__publish(). */
		up__pos_store_own(rd, up__pos(rd->fin_t, rd->peek_off + (uint32_t)n));
		up__peek_unlock(rd);
		up__chain_wake(rd);
		up__count(&rd->c.bytes_read, (uint64_t)n);
		up__count(&rd->c.reads, 1);
	} else if (!up__consume_small(rd, n)) {
		return false;
	}
	rd->peek_want = n;
	return true;
}

/*
 * up_consume_peek()'s short way: the consume of up__consume_small_entry()'s
 * first case and the fresh peek of up__peek_small() in one, without leaving
 * the readers' lock in between, as up__commit_reserve_small() does for a
 * writer. A reader of messages in place is bound by its calls: the leave
 * and the entry, and the second call's checks, were a third of its work
 * per message. Staying inside is allowed by the bias (a revoker waits
 * while the owner is inside, bias.h), and a revoker's mark, or a reader
 * asleep that the consume must wake, sends the call the usual way.
 * Returns the bytes shown (the call is done, the lock still held); 0 when
 * declined, nothing done; -1 when consumed and the lock let go, the peek
 * still to make (io.c).
 */
static inline ssize_t up__consume_peek_small(struct up_end *rd, size_t n, struct iovec *iov,
					     int *iovcnt)
{
	struct up_pipe *p = rd->p;
	struct up_shm_lines *ln = p->ln;
	uint32_t off;

	if (!rd->peek_locked || !rd->peek_fast || !rd->biased || n == 0 ||
	    n >= rd->fin_len - rd->peek_off)
		return 0;
	/* As every entry through the bias does (up__bias_enter_own()): a
	 * claim stored into our held word by a peer lasts until our next
	 * call, whichever way it takes the lock. */
	up__held_check(rd);
	off = rd->peek_off + (uint32_t)n;
	/* [tail] rel: up__pos_store_own(), as in up__consume_small_entry();
	 * pairs with [tail] acq in up__publish(). */
	up__pos_store_own(rd, up__pos(rd->fin_t, off));
	up__count(&rd->c.bytes_read, (uint64_t)n);
	up__count(&rd->c.reads, 1);
	rd->peek_want = n;
	/* The next peek's short way would show the rest of the kept slot if it
	 * holds @n bytes (up__peek_small()); the lock is still ours and the
	 * position ours, so up__fin_here() holds at @off, and
	 * up__fin_usable() still holds from the short peek that set
	 * peek_fast (only the general ways change the streak). */
	if (up__unlikely(rd->fin_len - off < n || rd->armed || up__is_broken(p) ||
			 /* relaxed: as in up__commit_reserve_small(). */
			 (atomic_load_explicit(&ln->rlock.bias, memory_order_relaxed) &
			  UP_BIAS_REVOKE) ||
			 /* [wait] sc: after our tail store, as up__chain_wake();
			  * pairs with [wait] sc in up__wait_ready(). */
			 atomic_load_explicit(&ln->rd_wait.nwait, memory_order_seq_cst) != 0)) {
		up__peek_unlock(rd);
		up__chain_wake(rd);
		return -1;
	}
	rd->peek_off = off;
	iov[0].iov_base = up__page_ptr(p, rd->fin_pg) + off;
	iov[0].iov_len = rd->fin_len - off;
	*iovcnt = 1;
	rd->caught = false; /* data left: the streak stays as it is */
	rd->peek_shown = iov[0].iov_len;
	return (ssize_t)rd->peek_shown;
}

#endif /* UP_CORE_SHORT_H */
