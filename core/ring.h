/* SPDX-License-Identifier: MIT */
/*
 * ring.h - what the files of the data path share: slot and page access, the
 * tuning constants, and the calls each file offers the ones above it.
 *
 * The slot ring is the shared-memory analogue of the kernel's pipe_buffer
 * array: slot_count slots (a power of two), each naming one pool page and
 * the bytes [off, len) of it that are stream data. head and tail run free
 * as unsigned 32-bit counters and are masked only when a slot is
 * dereferenced, so occupancy is head - tail and wrap-around needs no special
 * case. Slots [tail, head) are live. docs/DESIGN.md describes the data path
 * as a whole; each file below opens with the part it implements.
 *
 * Files call only downwards in this list (.ci/check_calls.py checks it):
 *
 *   pipe.c     public calls                       (top)
 *   peek.c     up_peek, up_consume
 *   reader.c   up_read: the walk from tail, coalescing
 *   reserve.c  up_reserve, up_commit
 *   writer.c   up_write: page batches, publish, merging into the last page
 *   poll.c     arm and disarm for poll mode
 *   wait.c     readiness, the spin window, sleeping in slices
 *   reclaim.c  pool trim, orphan sweep, returning pages
 *   bias.c     the two locks biased to a lone end, bias.h its fast path
 *   lock.c     the lock words: backoff, hand-off, wake; lock.h the fast path
 *   take.c     a taker's slow path: dead holders, sleeping on the word
 *   takeback.c a word that names no holder taken back, a dead claimer's claim
 *   peer.c     dead-peer detection
 *   wake.c     waking a wait line
 *   copy.c     iovec cursor, streaming copies
 *   shm.c live.c pagepool.c fence.c numa.c alloc*.c wake_futex.c wake_select.c
 *
 * Untrusted data: head, tail, len, off and page numbers are range-checked at
 * every use; a violation marks the pipe broken and returns -EPROTO.
 */
#ifndef UP_CORE_RING_H
#define UP_CORE_RING_H

#include "up_int.h"
#include "copy.h"
#include "lock.h"

/* Large writes are published in chunks of this many bytes. */
#define UP_CHUNK_BYTES   (64u * 1024u)
/* Sleeps are cut into slices so a sleeper re-checks brokenness and, where
 * the backend cannot watch pidfds (futex(2)), dead peers: the slice bounds
 * how late a peer's death is noticed there. */
#define UP_WAIT_SLICE_NS 50000000ull /* 50 ms */
#define UP_WAIT_SLICE_MIN_NS 1000000ull /* the shortest sleep slice_left() asks */
/* After a close event that found every lock held (closewatch.c, peer.c). */
#define UP_CLOSE_RECHECK_NS 2000000ull
/* Liveness while a call never sleeps (up__live_tick()): the clock is read
 * every UP_LIVE_CALLS calls, and the peers' locks asked at most every
 * UP_LIVE_CHECK_NS, so a streaming end notices a dead peer within about
 * that interval, for a system call per interval, never one per call. */
#define UP_LIVE_CALLS    16u
#define UP_LIVE_CHECK_NS 20000000ull /* 20 ms */
/* Pages a reader gathers before returning them to the pool at once. */
#define UP_FREE_BATCH    64u

static inline struct up_shm_slot *up__slot_at(struct up_pipe *p, uint32_t i)
{
	return &p->slots[i & p->g.slot_mask];
}

static inline unsigned char *up__page_ptr(struct up_pipe *p, uint32_t pg)
{
	return p->pages + ((size_t)pg << p->g.page_shift);
}

static inline bool up__is_broken(struct up_pipe *p)
{
	/* relaxed: a hint; every path that acts on shared state re-validates. */
	return atomic_load_explicit(&p->ln->state.broken, memory_order_relaxed) != 0;
}

static inline int up__proto_error(struct up_pipe *p)
{
	up__mark_broken(p);
	return -EPROTO;
}

/* A reader or writer count (state.readers/writers) says the side came and
 * left: every end of it is closed, and one was open. */
static inline bool up__side_gone(uint32_t count)
{
	return count == UP_COUNT_EVER;
}

/* The number of open ends in a reader or writer count. */
static inline uint32_t up__side_open(uint32_t count)
{
	return count & ~UP_COUNT_EVER;
}

/* An end of a side opens: one more in its count, which now says the side
 * came. One RMW, so no peer ever sees the side as come and gone before its
 * first end is counted. */
static inline void up__side_join(_Atomic uint32_t *count)
{
	/* relaxed: the CAS below decides. */
	uint32_t old = atomic_load_explicit(count, memory_order_relaxed);

	/* [wait] sc: the counts are part of the sleep handshake (end of stream
	 * and EPIPE); pairs with [wait] sc in up__rd_ready() and up__wr_ready(). */
	while (!atomic_compare_exchange_weak_explicit(count, &old, (old | UP_COUNT_EVER) + 1,
						      memory_order_seq_cst, memory_order_relaxed))
		;
}

/* An end of a side closes (or is reaped): one fewer, never below none,
 * whatever a peer stored, and the side stays one that came. */
static inline void up__side_leave(_Atomic uint32_t *count)
{
	/* relaxed: the CAS below decides. */
	uint32_t old = atomic_load_explicit(count, memory_order_relaxed);

	/* [wait] sc: the progress store for sleepers waiting for end of stream
	 * or EPIPE; pairs with [wait] sc in up__rd_ready() and up__wr_ready(). */
	while (up__side_open(old) != 0 &&
	       !atomic_compare_exchange_weak_explicit(count, &old, old - 1, memory_order_seq_cst,
						      memory_order_relaxed))
		;
}

/* The wait line an end sleeps on: readers wait for data, writers for pages. */
static inline struct up_shm_wait *up__end_line(struct up_end *e)
{
	return (e->flags & UP_RD) ? &e->p->ln->rd_wait : &e->p->ln->wr_wait;
}

/* peer.c: ask the peers' locks if UP_LIVE_CHECK_NS went by since the last
 * time; true when that changed a count (a peer reaped or a count put
 * right), so a call that was about to fail with -EAGAIN tries again. */
bool up__live_poll(struct up_end *e);

/* On a call that may never sleep: every UP_LIVE_CALLS calls, up__live_poll().
 * Inline: on the data path this is an increment and a branch. */
static inline void up__live_tick(struct up_end *e)
{
	if (up__unlikely(++e->live_calls >= UP_LIVE_CALLS)) {
		e->live_calls = 0;
		up__live_poll(e);
	}
}

/* wake.c: the waker's half of the handshake in wake.h. */
bool up__wake_line_slow(struct up_end *e, struct up_shm_wait *wl, uint32_t nr);
void up__wake_writers_slow(struct up_end *rd, bool drained);
void up__wake_all(struct up_end *e, struct up_shm_wait *wl);

/*
 * Wake up to @nr sleepers on @wl after a progress store; true when a wake
 * went out (not when nobody was announced or a wake was in flight).
 * Inline: on the write path this is one load when nobody sleeps.
 */
static inline bool up__wake_line(struct up_end *e, struct up_shm_wait *wl, uint32_t nr)
{
	/* [wait] sc: the waker's load of nwait, after its progress store;
	 * pairs with [wait] sc in up__wait_ready(). */
	if (atomic_load_explicit(&wl->nwait, memory_order_seq_cst) != 0)
		return up__wake_line_slow(e, wl, nr);
	return false;
}

/* A reader returned pages (@drained: it emptied the ring): wake sleeping
 * writers, with hysteresis (wake.c). One load when none sleeps. */
static inline void up__wake_writers(struct up_end *rd, bool drained)
{
	/* [wait] sc: the waker's load, after the pool put; pairs with [wait]
	 * sc in up__wait_ready(). */
	if (atomic_load_explicit(&rd->p->ln->wr_wait.nwait, memory_order_seq_cst) != 0)
		up__wake_writers_slow(rd, drained);
}

/* reclaim.c */
int up__pages_return(struct up_end *e, uint32_t *pages, uint32_t n, bool nonblock);
void up__pool_trim(struct up_end *rd);
uint32_t up__sweep_orphans(struct up_end *e);

/* wait.c */
int up__rd_ready(struct up_end *r);
uint64_t up__wait_fence(struct up_end *e, struct up_shm_wait *wl);
void up__nofence_mark(struct up_end *e);
int up__wr_ready(struct up_end *w);
/* early.c: the early wake's learning and planning. */
void up__early_note(struct up_end *e, uint64_t now, bool late);
uint64_t up__early_due(struct up_end *e, uint64_t now, bool slack, uint64_t *until);
void up__early_miss(struct up_end *e);
void up__early_lateness(struct up_end *e, uint64_t late_ns, bool slack);
void up__early_late_bound(struct up_end *e, uint64_t late_ns, bool slack);
int up__early_arm(struct up_end *e, uint64_t *early_ns);
int up__wait_ready(struct up_end *e, struct up_shm_wait *wl, int (*ready)(struct up_end *),
		   uint32_t peer_role);

/* The UP_ARMED_LINE_* value of @wl, for the endpoint table (peer.c). */
static inline uint32_t up__line_id(struct up_end *e, struct up_shm_wait *wl)
{
	return wl == &e->p->ln->rd_wait ? UP_ARMED_LINE_RD : UP_ARMED_LINE_WR;
}

/* Tell a reaper which count to take off should we die announced: set after
 * the increment, cleared before the decrement, so a death in between leaks
 * a count (extra wakes), never takes one that was not there (a lost wake). */
static inline void up__announce_mark(struct up_end *e, uint32_t v)
{
	/* relaxed: read only by a reaper, after our death. */
	atomic_store_explicit(&e->p->ends[e->idx].armed, v, memory_order_relaxed);
}

/* -EPROTO when broken, -EPIPE when readers came and none is left, else 0. */
static inline int up__write_check(struct up_pipe *p)
{
	if (up__is_broken(p))
		return -EPROTO;
	/* [wait] sc: the reader count (the EPIPE edge); pairs with [wait] sc
	 * in up__side_leave(). */
	if (up__side_gone(atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst)))
		return -EPIPE;
	return 0;
}

/*
 * Under the readers' lock: the readers' position (cons.pos). The reader that
 * stored it last leaves its lock id in cons.pos_by, so a reader that finds
 * its own id there knows nobody has
 * moved the position since, and that it must be the one it stored: a tail
 * or an offset moved either way (slots skipped or read twice) is refused.
 * One compare on a line the lock's CAS just brought in. Needs every reader
 * to store the id (layout 8). -EPROTO (pipe marked broken), or 0.
 */
static inline int up__pos_take(struct up_end *rd, uint64_t *pos)
{
	struct up_pipe *p = rd->p;

	/* relaxed: pos and pos_by are written only under the readers' lock
	 * we hold. */
	*pos = atomic_load_explicit(&p->ln->cons.pos, memory_order_relaxed);
	if (atomic_load_explicit(&p->ln->cons.pos_by, memory_order_relaxed) == rd->lock_id &&
	    *pos != rd->pos_last)
		return up__proto_error(p);
	return 0;
}

/* Under the readers' lock: this end stored the readers' position last, so
 * the slots from its tail on are as it left them (reader.c's cache). */
static inline bool up__pos_own(const struct up_end *rd)
{
	/* relaxed: written only under the readers' lock we hold. */
	return atomic_load_explicit(&rd->p->ln->cons.pos_by, memory_order_relaxed) == rd->lock_id;
}

/* Under the readers' lock: the position is inside the slot this end
 * keeps a copy of (reader.c), and this end stored it last, so no other
 * reader can have retired that slot. True, with the offset in *off. */
static inline bool up__fin_here(struct up_end *rd, uint32_t *off)
{
	/* relaxed: written only under the readers' lock we hold. */
	uint64_t pos = atomic_load_explicit(&rd->p->ln->cons.pos, memory_order_relaxed);

	*off = up__pos_off(pos);
	return up__pos_own(rd) && pos == rd->pos_last && up__pos_tail(pos) == rd->fin_t &&
	       *off < rd->fin_len;
}

/*
 * The kept slot may be read by the short ways (reader.c, peek.c). Not the
 * last slot while the reader coalesces: that is the page the writer
 * appends to, which a coalescing reader leaves alone (reader.c); read
 * there, each message costs the writer a cross-core miss on the line the
 * reader just loaded. A reader that does not coalesce (its reads wait for
 * the writer) keeps the short way into the last slot.
 */
static inline bool up__streak_full(const struct up_end *rd)
{
	return rd->streak >= UP_STREAK_MIN << rd->coalesce_backoff;
}

static inline bool up__fin_usable(const struct up_end *rd)
{
	return rd->fin_valid && !(rd->fin_last && up__streak_full(rd));
}

/* @n bytes from @off in the kept slot can be taken without retiring it: all
 * but the end of a final slot, or up to what was seen of the last one. */
static inline bool up__fin_room(const struct up_end *rd, uint32_t off, size_t n)
{
	return n < rd->fin_len - off || (rd->fin_last && n == rd->fin_len - off);
}

/* Under the readers' lock: store the readers' position @pos (see above). */
static inline void up__pos_store(struct up_end *rd, uint64_t pos)
{
	struct up_pipe *p = rd->p;

	/* [tail] rel: we are done with the slots before pos's tail; pairs with
	 * [tail] acq in up__publish(). */
	atomic_store_explicit(&p->ln->cons.pos, pos, memory_order_release);
	rd->pos_last = pos;
	/* relaxed: read only under the readers' lock (up__pos_take()). */
	if (atomic_load_explicit(&p->ln->cons.pos_by, memory_order_relaxed) != rd->lock_id)
		atomic_store_explicit(&p->ln->cons.pos_by, rd->lock_id, memory_order_relaxed);
}

/* up__pos_store() by an end that has held the readers' lock since it found
 * itself the last to store the position (up__fin_here()). */
static inline void up__pos_store_own(struct up_end *rd, uint64_t pos)
{
	/* [tail] rel: as in up__pos_store(); pairs with [tail] acq in
	 * up__publish(). */
	atomic_store_explicit(&rd->p->ln->cons.pos, pos, memory_order_release);
	rd->pos_last = pos;
}

/* reader.c: what peek.c shares with the read path. */
ssize_t up__read_locked(struct up_end *rd, struct up__cur *c, size_t max, bool whole,
			bool *freed_any);
void up__chain_wake_slow(struct up_end *rd);
bool up__coalesce(struct up_end *rd);
int up__read_idle(struct up_end *rd, uint32_t writers);

/*
 * A reader leaves data behind (its buffer was full, or coalescing left the
 * writer's page) while other readers sleep: wake one, as the kernel's
 * pipe_read does, since the writer woke only one reader for that data.
 * Costs one load when nobody sleeps.
 */
static inline void up__chain_wake(struct up_end *rd)
{
	struct up_shm_wait *wl = &rd->p->ln->rd_wait;

	/* [wait] sc: after our tail store, as a waker's check; pairs with
	 * [wait] sc in up__wait_ready(). */
	if (atomic_load_explicit(&wl->nwait, memory_order_seq_cst) != 0)
		up__chain_wake_slow(rd);
}

/* A read or peek found data: one that found it without waiting and caught
 * up with the writers (rd->caught) adds to the streak; one that left data
 * behind, cut short by the caller's buffer, neither adds nor ends it: the
 * reader is ahead of nothing, and its next call reads on (reader.c). */
static inline void up__streak_note(struct up_end *rd, bool waited)
{
	if (rd->caught && !waited)
		rd->streak++;
}


/* peek.c */
void up__peek_let_go(struct up_end *rd);

#endif /* UP_CORE_RING_H */
