/* SPDX-License-Identifier: MIT */
/*
 * writer.h - what the write path (writer.c) shares with reservations
 * (reserve.c). The two steps every small write and small commit runs are
 * inline: entering the lone writer's short way, and publishing a merge.
 */
#ifndef UP_CORE_WRITER_H
#define UP_CORE_WRITER_H

#include "bias.h"

/* writer.c: what reserve.c shares with the write path. */
int up__merge_open(struct up_end *w, size_t n, struct up_shm_slot **sp, uint32_t *lenp,
		   uint32_t *pgp, bool try);
int up__last_slot(struct up_end *w, struct up_shm_slot **sp, uint32_t *lenp, uint32_t *pgp);
int up__publish(struct up_end *w, const uint32_t *pages, const uint32_t *lens, uint32_t n);
int up__cache_fill(struct up_end *w, uint32_t want);
int up__wait_pages(struct up_end *w);
void up__cache_shift(struct up_end *w, uint32_t n);
void up__resv_cancel(struct up_end *w);


/* A large reservation is committed or dropped: its fill hint goes. */
static inline void up__resv_fill_end(struct up_end *w)
{
	if (w->resv_fill) {
		w->resv_fill = false;
		/* relaxed: a hint (shm_layout.h). */
		atomic_store_explicit(&w->p->ln->prod.fill_until, 0, memory_order_relaxed);
	}
}

/*
 * The writers' progress store, the one a sleeping reader waits for: @v into
 * @word (a slot's len, grown by a merge, or head, moved by a publish), with
 * the writers' lock held. The lone writer (the bias ours, so our process is
 * registered for membarrier) stores with release: the store and the nwait
 * load in up__wake_line() after it may pass each other, and a reader
 * announcing itself meanwhile supplies the fence with membarrier() before
 * its re-check (wait.c, up__wait_fence(); tests/model/wake.pml -DBROKEN
 * -DFENCED). Unless a reader that may not call it has opened (nofence):
 * then the store is sequentially consistent, the fence on our side.
 * relaxed: nofence is sticky; a reader setting it covers the stores before
 * we see it by a grace period (up__wait_fence()).
 */
static inline void up__progress_store(struct up_end *w, struct up_shm_lines *ln,
				      _Atomic uint32_t *word, uint32_t v)
{
	/* relaxed: nofence is sticky (above). */
	if (w->biased && atomic_load_explicit(&ln->rd_wait.nofence, memory_order_relaxed) == 0) {
		/* [len] rel: the bytes below a slot's new len; pairs with
		 * [len] acq in up__read_locked() and peek_locked(). [head]
		 * rel: the slots below the new head; pairs with [head] acq in
		 * up__read_locked(). Also [wait] mb: the progress store; pairs
		 * with [wait] mb in up__wait_fence(). */
		atomic_store_explicit(word, v, memory_order_release);
		/* [wait] mb: a compiler barrier only, keeping the store before
		 * the nwait load in the code; pairs with [wait] mb in
		 * up__wait_fence(), the barrier that orders them on the CPU. */
		atomic_signal_fence(memory_order_seq_cst);
	} else
		/* [len] rel: pairs with [len] acq in up__read_locked(). [head]
		 * rel: pairs with [head] acq in up__read_locked(). Also [wait]
		 * sc: the progress store; pairs with [wait] sc in
		 * up__rd_ready(). */
		atomic_store_explicit(word, v, memory_order_seq_cst);
}

/*
 * The lines a writer of small messages stores to next, asked for ahead
 * (docs/DESIGN.md, "Stores ahead"): a page comes back from the pool with
 * its lines still in the cache of the reader that emptied it, and each
 * store to such a line waits in the store buffer for the other core to give
 * the line up. A writer of 100-byte messages fills the buffer with them and
 * then stalls on every write. So each merge asks for the two lines
 * UP_STORE_AHEAD bytes past its end, a window that moves with the writer
 * and covers every line for merges of up to two lines; the publish that
 * starts a page asks for the window's first lines (writer.c, last_keep()).
 * It stays inside the page: the page next in memory may be one a reader is
 * copying out, whose lines we must not take. A hint only: a stale address
 * costs a wasted fetch, never a fault or an ordering.
 */
#define UP_STORE_AHEAD 512u

static inline void up__store_ahead(struct up_end *w, uint32_t len)
{
	const uint32_t ps = w->p->g.page_size;

	if (!w->last_ok)
		return;
	if (len + UP_STORE_AHEAD < ps)
		up__prefetch_store(w->last_base + len + UP_STORE_AHEAD);
	if (len + UP_STORE_AHEAD + UP_CACHELINE < ps)
		up__prefetch_store(w->last_base + len + UP_STORE_AHEAD + UP_CACHELINE);
}

/* writer.c: up__merge_close()'s ways out of line. */
void up__merge_close_locked(struct up_end *w);
void up__merge_close_wake(struct up_end *w, bool revoked, bool wake);

/* Publish the merged bytes by growing @s's len to @len, the lock still
 * held, and ask for the lines the next merge stores to. */
static inline void up__merge_publish(struct up_end *w, struct up_shm_lines *ln,
				     struct up_shm_slot *s, uint32_t len)
{
	up__progress_store(w, ln, &s->len, len);
	w->last_len = len;
	up__store_ahead(w, len);
}

/*
 * The bias owner's leave after a progress store: up__wlock_drop(), then
 * up__wake_line(), with both loads before either call. The nwait load
 * stays after the progress store, as up__wake_line() needs.
 */
static inline void up__merge_leave_own(struct up_end *w, struct up_shm_lines *ln)
{
	bool revoked = up__bias_leave_own(w, &ln->wlock);
	/* [wait] sc: the waker's load of nwait, as in up__wake_line(); pairs
	 * with [wait] sc in up__wait_ready(). */
	uint32_t nwait = atomic_load_explicit(&ln->rd_wait.nwait, memory_order_seq_cst);

	if (up__unlikely(revoked || nwait != 0))
		up__merge_close_wake(w, revoked, nwait != 0);
}

/*
 * Publish the merged bytes by growing @s's len to @len; drop the lock.
 * Inline into the short ways, which are bound by their stores: here the
 * lone writer (the bias ours) makes at most one call, out of line and
 * only when a revoker or a sleeping reader needs it, so that no register
 * has to be saved across it (each saved register is a store on every
 * write). An end without the bias drops the lock word out of line.
 */
static inline void up__merge_close(struct up_end *w, struct up_shm_slot *s, uint32_t len)
{
	/* Loaded once: the atomics below would make the compiler load the
	 * pointers again for each use. */
	struct up_shm_lines *ln = w->p->ln;

	up__merge_publish(w, ln, s, len);
	if (up__unlikely(!w->biased)) {
		up__merge_close_locked(w);
		return;
	}
	up__merge_leave_own(w, ln);
}

/* The lone writer's copy of the last slot (writer.c, last_keep()) still
 * matches the slot @s. Nobody else writes it while the bias is ours. */
static inline bool up__last_slot_same(struct up_end *w, struct up_shm_slot *s)
{
	/* relaxed: written only by us, under the bias. */
	return atomic_load_explicit(&s->len, memory_order_relaxed) == w->last_len &&
	       atomic_load_explicit(&s->page, memory_order_relaxed) == w->last_pg;
}

/* The short way's way in: true with the writers' lock held (through the
 * bias) when @len bytes fit the room left in the last page and nothing asks
 * for the general path. */
static inline bool up__short_enter(struct up_end *w, size_t len)
{
	struct up_pipe *p = w->p;

	/* resv_bytes covers a merge reservation too (reserve.c). */
	/* A slot that no longer matches our copy: the general path finds it
	 * (up__last_slot()) and fails the write. */
	if (!w->last_ok || len > p->g.page_size - w->last_len || w->armed ||
	    w->resv_bytes != 0 || up__is_broken(p) ||
	    !up__last_slot_same(w, w->last_slot))
		return false;
	/* [wait] sc: the EPIPE edge, as in up__write_check(); pairs with [wait]
	 * sc in up__side_leave(). */
	if (up__side_gone(atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst)))
		return false;
	return up__wlock_bias_enter(w);
}

#endif /* UP_CORE_WRITER_H */
