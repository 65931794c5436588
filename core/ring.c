/* SPDX-License-Identifier: MIT */
/*
 * ring.c - the slot ring: the only file that touches head and tail.
 *
 * DESIGN NOTE
 *
 * The ring is the shared-memory analogue of the kernel's pipe_buffer array:
 * slot_count slots (a power of two), each naming one pool page and the bytes
 * [off, len) of it that are stream data. head and tail run free as unsigned
 * 32-bit counters and are masked only when a slot is dereferenced, so
 * occupancy is head - tail and wrap-around needs no special case (see
 * include/linux/pipe_fs_i.h). Slots [tail, head) are live.
 *
 *   writers: take pages from the pool (pagepool.c) in one batch, copy the
 *            data into them with no lock held, then, under the writers'
 *            lock, fill the slots at head and advance head (R1);
 *   readers: under the readers' lock, copy out of the slots at tail, advance
 *            tail (R3), and return the emptied pages to the pool in one batch.
 *
 * Merging (the kernel's PIPE_BUF_FLAG_CAN_MERGE): a write that fits entirely
 * in the room left in the last live page is appended there under the
 * writers' lock and published by growing that slot's len (R2). A hundred-byte
 * write therefore costs one memcpy and one store, not a page. To make that
 * safe without a shared lock, a reader never retires the last live slot
 * unless its page is full: the writer only appends to slot head-1 when it has
 * room, the reader only retires slot head-1 when it has none, and len is
 * written only by writers, so the two never act on the same slot at once.
 *
 * The writers' lock is a futex-backed spinlock on its own line. With one
 * writer it is biased to that writer, which then enters with a plain store
 * and a load and no locked instruction; a second writer takes the bias back
 * with membarrier(2) ("the writers' lock, biased to a lone writer", below).
 * Rejected alternatives:
 *  - DPDK-style multi-producer CAS on head, then in-order tail update: a
 *    preempted writer stalls all later writers (bad with 5 writers on 2
 *    cores) and merging into the last page would need a second protocol;
 *  - a lone-writer mode switched on the writer count alone: a writer
 *    joining while the sole writer is mid-publish needs a handshake, and
 *    with an ordinary fence on both sides it costs the lone writer what the
 *    lock's CAS costs. The bias puts that fence on the joining side only.
 *
 * Memory-order pairs (tags used below):
 *   R1/A1  head: slot contents written before the head store are visible to
 *          a reader that loads head;
 *   R2/A2  slot len: bytes merged into the last page before the len store
 *          are visible to a reader that loads len;
 *   R3/A3  tail: a reader has finished with slots (and their pages' bytes)
 *          before a writer that loads tail reuses those slots;
 *   the lock words are acquire/release; the pool has R1-pool/A1-pool.
 * The publishing stores (R1, R2, pool put, reader/writer counts) are seq_cst
 * because they are also the "progress" half of the sleep handshake
 * (core/wake.h); the re-check loads in rd_ready()/wr_ready() are seq_cst for
 * the same reason (plain loads on x86, ldar on arm64: no extra cost).
 *
 * Untrusted data: head, tail, len, off and page numbers are range-checked at
 * every use; a violation marks the pipe broken and returns -EPROTO.
 */
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "up_int.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define UP_HAVE_NT_STORES 1
#endif

#define UP_CHUNK_BYTES   (64u * 1024u) /* large writes are published in chunks */
/* Sleeps are cut into slices so a sleeper re-checks brokenness and, where
 * the backend cannot watch pidfds (futex(2)), dead peers: the slice bounds
 * how late a peer's death is noticed there (DESIGN.md asks for 100 ms). */
#define UP_WAIT_SLICE_NS 50000000ull /* 50 ms */
#define UP_LOCK_SPINS    256
#define UP_LOCK_YIELDS   64
#define UP_FREE_BATCH    64u

/* ------------------------------------------------------------------------ */
/* small helpers */

static inline struct up_shm_slot *slot_at(struct up_pipe *p, uint32_t i)
{
	return &p->slots[i & p->g.slot_mask];
}

static inline unsigned char *page_ptr(struct up_pipe *p, uint32_t pg)
{
	return p->pages + ((size_t)pg << p->g.page_shift);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline bool is_broken(struct up_pipe *p)
{
	/* Relaxed: a hint; every path that acts on shared state re-validates. */
	return atomic_load_explicit(&p->ln->state.broken, memory_order_relaxed) != 0;
}

static int proto_error(struct up_pipe *p)
{
	up__mark_broken(p);
	return -EPROTO;
}

/* A cursor over an iovec array. */
struct iov_cur {
	const struct iovec *iov;
	int cnt;
	int i;
	size_t off;
};


/*
 * Whole pages are filled with non-temporal stores. The page a writer fills
 * was last read by a reader, so its lines sit in the reader's cache; plain
 * stores must first fetch each line from there (a read-for-ownership across
 * cores) only to overwrite all of it. Streaming stores skip that fetch: the
 * other copies are invalidated and the bytes go towards memory, where the
 * reader's loads find them. Measured here, 1 writer + 1 reader, 1 MiB
 * pipe, alternating runs: 4 KiB writes 10.2-10.6 GB/s against 5.8-7.9,
 * 64 KiB writes 10.5-15.9 against 7.0-10.2; in the VM's slow phases, when
 * moving a line between the two vCPUs is slowest, 11-15 GB/s against 3-4.
 * Partial pages (small writes, merged into the last page, which the reader
 * will want from the cache soon) keep memcpy. The stores are weakly
 * ordered: nt_fence() orders them before the publishing store.
 */
#ifdef UP_HAVE_NT_STORES
static void copy_nt(unsigned char *dst, const unsigned char *src, size_t n)
{
	size_t head = (16u - ((uintptr_t)dst & 15u)) & 15u;

	if (head > n)
		head = n;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	for (; n >= 64; n -= 64, dst += 64, src += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));

		_mm_stream_si128((__m128i *)(void *)dst, a);
		_mm_stream_si128((__m128i *)(void *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(void *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(void *)(dst + 48), d);
	}
	for (; n >= 16; n -= 16, dst += 16, src += 16)
		_mm_stream_si128((__m128i *)(void *)dst,
				 _mm_loadu_si128((const __m128i *)(const void *)src));
	memcpy(dst, src, n);
}

static inline void nt_fence(void)
{
	_mm_sfence();
}
#else
static void copy_nt(unsigned char *dst, const unsigned char *src, size_t n)
{
	memcpy(dst, src, n);
}

static inline void nt_fence(void)
{
}
#endif

/* Copy @n bytes from the cursor to @dst, with streaming stores if @nt. */
static void cur_copy_in(struct iov_cur *c, unsigned char *dst, size_t n, bool nt)
{
	while (n) {
		size_t avail = c->iov[c->i].iov_len - c->off;
		size_t k = n < avail ? n : avail;
		const unsigned char *src = (const unsigned char *)c->iov[c->i].iov_base + c->off;

		if (nt)
			copy_nt(dst, src, k);
		else
			memcpy(dst, src, k);
		dst += k;
		n -= k;
		c->off += k;
		if (c->off == c->iov[c->i].iov_len && c->i + 1 < c->cnt) {
			c->i++;
			c->off = 0;
		}
	}
}

static void cur_copy_from(struct iov_cur *c, unsigned char *dst, size_t n)
{
	cur_copy_in(c, dst, n, false);
}

static void cur_copy_to(struct iov_cur *c, const unsigned char *src, size_t n)
{
	while (n) {
		size_t avail = c->iov[c->i].iov_len - c->off;
		size_t k = n < avail ? n : avail;

		memcpy((unsigned char *)c->iov[c->i].iov_base + c->off, src, k);
		src += k;
		n -= k;
		c->off += k;
		if (c->off == c->iov[c->i].iov_len && c->i + 1 < c->cnt) {
			c->i++;
			c->off = 0;
		}
	}
}

/*
 * Copy @n bytes out as cur_copy_to() does, but in 64-byte blocks from the
 * end of the range down to its start, so that the loads run downwards (see
 * read_locked() for why). A range that does not fit the caller's current
 * iovec is copied upwards.
 */
static void cur_copy_down(struct iov_cur *c, const unsigned char *src, size_t n)
{
	unsigned char *d;
	size_t i = n;

	if (n > c->iov[c->i].iov_len - c->off) {
		cur_copy_to(c, src, n);
		return;
	}
	d = (unsigned char *)c->iov[c->i].iov_base + c->off;
	while (i >= 64) {
		i -= 64;
		/* Opaque to the optimiser, which may otherwise fold the loop
		 * back into one (upward) memcpy. */
		__asm__("" : "+r"(i));
		memcpy(d + i, src + i, 64);
	}
	memcpy(d, src, i);
	c->off += n;
	if (c->off == c->iov[c->i].iov_len && c->i + 1 < c->cnt) {
		c->i++;
		c->off = 0;
	}
}

static void cur_init(struct iov_cur *c, const struct iovec *iov, int cnt)
{
	c->iov = iov;
	c->cnt = cnt;
	c->i = 0;
	c->off = 0;
	/* Skip leading empty entries so copies always find room. */
	while (c->i + 1 < c->cnt && c->iov[c->i].iov_len == 0)
		c->i++;
}

/* ------------------------------------------------------------------------ */
/* waking and sleeping: the handshake of core/wake.h */

static void wake_line(struct up_end *e, struct up_shm_wait *wl, uint32_t nr)
{
	uint64_t sc = 0;

	/* Pairs with the sleeper's nwait increment; the caller's progress
	 * store came before, seq_cst (see wake.h). */
	if (atomic_load_explicit(&wl->nwait, memory_order_seq_cst) == 0)
		return;
	/* A wake in flight covers this progress too, except that on the
	 * readers' line it may be for one reader only, and a wake for all
	 * (end of stream, broken) must reach every one (tests/model/:
	 * wake_mutant6). The writers' line has only wakes for all. */
	if (atomic_exchange_explicit(&wl->pending, 1, memory_order_seq_cst) != 0 &&
	    (nr != UP_WAKE_ALL || wl != &e->p->ln->rd_wait))
		return;
	/* A poll-mode end takes a wake like any sleeper, and its event loop
	 * may not read for a while: a wake for one could stop there and leave
	 * a reader that blocks in up_read asleep for its whole slice. Wake
	 * them all while such an end is armed. (The pending rule above still
	 * holds, so an armed end that never reads costs one wake, not one per
	 * write.) Relaxed: a hint; armed ends count it before nwait. */
	if (nr != UP_WAKE_ALL && atomic_load_explicit(&wl->npoll, memory_order_relaxed) != 0)
		nr = UP_WAKE_ALL;
	atomic_fetch_add_explicit(&wl->seq, 1, memory_order_seq_cst);
	e->waker->ops->wake(e->waker, &wl->seq, nr, &sc);
	up__count(&e->c.syscalls, sc);
	up__count(&e->c.wakes, 1);
}

void up__ring_wake_all(struct up_end *e, struct up_shm_wait *wl)
{
	wake_line(e, wl, UP_WAKE_ALL);
}

/*
 * A reader returned pages: wake sleeping writers, with hysteresis. A writer
 * only sleeps when the pool has no page beyond the spare ones (shm_layout.h);
 * waking it for every page a reader frees would cost a sleep/wake round
 * trip (~45 us here, BASELINES.md) per page, so writers are woken once a
 * quarter of the capacity is free beyond the spare pages, or
 * when the ring has just been drained (the reader will free nothing more
 * until more is written). A writer whose wake was held back still re-checks
 * at the end of its sleep slice, so a reader that stops reading with less
 * than a quarter free delays a writer by at most one slice, never forever.
 */
static void wake_writers(struct up_end *rd, bool drained)
{
	struct up_pipe *p = rd->p;

	/* The pool put (seq_cst) came before: this is the handshake's load. */
	if (atomic_load_explicit(&p->ln->wr_wait.nwait, memory_order_seq_cst) == 0)
		return;
	if (!drained &&
	    up__pool_free(p) < p->g.spare_pages + (p->g.page_count - p->g.spare_pages) / 4)
		return;
	wake_line(rd, &p->ln->wr_wait, UP_WAKE_ALL);
}

static int lock_take(struct up_end *e, _Atomic uint32_t *lk, bool nonblock);
static void lock_drop(struct up_end *e, _Atomic uint32_t *lk);

/*
 * Give free pages beyond the keep-level back to the kernel. Called by a
 * reader that slept a whole slice without data: the ring is (nearly) empty,
 * so the pool holds almost every page, and the burst that needed them is
 * over. Trimming at every sleep instead punched pages mid-stream that the
 * writer then faulted back in (measured: a 1 GiB burst through 64 MiB kept
 * re-faulting about a tenth of its pages). Rate-limited
 * per endpoint (trim_ms); the pages are taken out of the pool with the
 * writers' CAS, punched with no lock held, and returned under the readers'
 * lock. A writer that finds the pool short meanwhile sleeps and is woken by
 * the return.
 */
static void pool_trim(struct up_end *rd)
{
	struct up_pipe *p = rd->p;
	uint32_t pages[UP_END_CACHE_MAX];
	uint32_t free_pages;
	uint64_t now, sc = 0;
	int n, r;

	if (p->g.keep_pages >= p->g.page_count)
		return;
	free_pages = up__pool_free(p);
	/* Writers leave the spare pages free (shm_layout.h): beyond them is
	 * what says the burst is over. */
	if (free_pages <= p->g.keep_pages + p->g.spare_pages)
		return;
	now = now_ns();
	if (now - rd->last_trim_ns < p->g.trim_ns)
		return;
	rd->last_trim_ns = now;
	while (free_pages > p->g.keep_pages) {
		uint32_t want = free_pages - p->g.keep_pages;

		if (want > UP_END_CACHE_MAX)
			want = UP_END_CACHE_MAX;
		/* Leave writers a page beyond the spare ones meanwhile: the
		 * pool is FIFO, so the next round takes pages not yet punched,
		 * and the loop still gets down to the keep-level. */
		n = up__pool_take(p, pages, want, p->g.spare_pages + 1, rd->tag);
		if (n <= 0)
			break;
		r = up__pages_punch(p, pages, (uint32_t)n, &sc);
		if (lock_take(rd, &p->ln->rlock.word, false) < 0)
			break; /* broken: the pages stay out; nothing more to do */
		up__pages_untag(p, pages, (uint32_t)n);
		if (up__pool_put(p, pages, (uint32_t)n) < 0)
			up__mark_broken(p);
		lock_drop(rd, &p->ln->rlock.word);
		wake_line(rd, &p->ln->wr_wait, UP_WAKE_ALL);
		if (r < 0)
			break; /* e.g. a file system without hole punching */
		free_pages -= (uint32_t)n;
	}
	up__count(&rd->c.syscalls, sc);
}

/*
 * Give back pages that a dead process took from the pool and never
 * published (pagepool.c, up__pages_orphaned). Runs on the sleep path after
 * the endpoint table changed (someone closed, opened or was reaped), so a
 * writer killed holding its page batch costs the pipe capacity only until
 * the next sleeper notices. The readers' lock serialises pool returns; if
 * it is busy, the next sweep tries again.
 */
static uint32_t sweep_orphans(struct up_end *e)
{
	struct up_pipe *p = e->p;
	uint32_t pages[UP_END_CACHE_MAX];
	uint32_t gen = atomic_load_explicit(&p->ln->state.ends_gen, memory_order_acquire);
	uint32_t n;

	if (e->sweep_gen == gen + 1)
		return 0;
	n = up__pages_orphaned(p, pages, UP_END_CACHE_MAX);
	if (n == 0) {
		e->sweep_gen = gen + 1;
		return 0;
	}
	if (lock_take(e, &p->ln->rlock.word, true) < 0)
		return 0;
	/* Under the lock, recheck: an orphan stays one (its owner is gone),
	 * but another sweeper may have returned it meanwhile. */
	n = up__pages_orphaned(p, pages, UP_END_CACHE_MAX);
	up__pages_untag(p, pages, n);
	if (n && up__pool_put(p, pages, n) < 0)
		up__mark_broken(p);
	lock_drop(e, &p->ln->rlock.word);
	if (n)
		wake_line(e, &p->ln->wr_wait, UP_WAKE_ALL);
	if (n < UP_END_CACHE_MAX)
		e->sweep_gen = gen + 1;
	return n;
}

/* Readable: a byte in some live slot, or end of stream, or broken.
 * Lock-free hint: tail and off may move under us (other readers); the
 * caller re-checks under the readers' lock. */
static int rd_ready(struct up_end *r)
{
	struct up_pipe *p = r->p;
	uint32_t t, h;

	if (is_broken(p))
		return -EPROTO;
	uint64_t pos = atomic_load_explicit(&p->ln->cons.pos, memory_order_seq_cst);

	t = up__pos_tail(pos);
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_seq_cst);
	if (h - t >= 2)
		return 1;
	if (h - t == 1) {
		struct up_shm_slot *s = slot_at(p, t);

		if (up__pos_off(pos) < atomic_load_explicit(&s->len, memory_order_seq_cst))
			return 1;
	}
	if (atomic_load_explicit(&p->ln->state.writers, memory_order_seq_cst) == 0)
		return 1;
	return 0;
}

/* Writable: a free page in the pool beyond the spare ones, or no reader
 * left, or broken. Counters that do not add up count as writable: the take
 * that follows finds them out. */
static int wr_ready(struct up_end *w)
{
	struct up_pipe *p = w->p;
	uint32_t put, get;

	if (is_broken(p))
		return -EPROTO;
	if (w->ncache > w->resv_pages)
		return 1;
	put = atomic_load_explicit(&p->ln->pput.put, memory_order_seq_cst);
	get = atomic_load_explicit(&p->ln->pget.get, memory_order_seq_cst);
	if (put - get > p->g.spare_pages)
		return 1;
	if (atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst) == 0)
		return 1;
	return 0;
}

/*
 * Wait until ready() says so: spin for the endpoint's adaptive budget, then
 * sleep on @wl. Returns 0 when ready, -EPROTO when broken, or a backend
 * error. Exclusive on end.
 */
/*
 * One spinner per line. Ten readers spinning on two cores for the same data
 * take the cores the writer needs to produce it (measured: 1 writer and 10
 * readers ran 64 KiB writes at 0.9x the kernel pipe). The first waiter
 * claims the line's spin window and spins; the others sleep at once and are
 * woken one at a time as data comes. The window is a deadline, not a flag,
 * so a spinner that dies leaves nothing stuck.
 */
static bool spin_claim(struct up_shm_wait *wl, uint64_t now, uint64_t budget)
{
	/* Relaxed: a scheduling hint, orders nothing. */
	uint64_t until = atomic_load_explicit(&wl->spin_until, memory_order_relaxed);

	if (until > now && until - now <= 2 * (uint64_t)UP_SPIN_MAX_NS)
		return false; /* somebody is spinning (a far-off value is junk) */
	return atomic_compare_exchange_strong_explicit(&wl->spin_until, &until, now + budget,
						       memory_order_relaxed,
						       memory_order_relaxed);
}

static void spin_release(struct up_shm_wait *wl)
{
	atomic_store_explicit(&wl->spin_until, 0, memory_order_relaxed);
}

/* The UP_ARMED_LINE_* value of @wl, for the endpoint table (peer.c). */
static uint32_t line_id(struct up_end *e, struct up_shm_wait *wl)
{
	return wl == &e->p->ln->rd_wait ? UP_ARMED_LINE_RD : UP_ARMED_LINE_WR;
}

/* Tell a reaper which count to take off should we die announced: set
 * after the increment, cleared before the decrement, so a death in between
 * leaks a count (extra wakes), never takes one that was not there (a lost
 * wake). Relaxed: read only by a reaper, after our death. */
static void announce_mark(struct up_end *e, uint32_t v)
{
	atomic_store_explicit(&e->p->ends[e->idx].armed, v, memory_order_relaxed);
}

static int wait_ready(struct up_end *e, struct up_shm_wait *wl,
		      int (*ready)(struct up_end *), uint32_t peer_role)
{
	uint64_t t0 = now_ns();
	unsigned int i;
	int r;

	if (spin_claim(wl, t0, e->spin_ns)) {
		for (i = 0;; i++) {
			r = ready(e);
			if (r != 0) {
				spin_release(wl);
				/* Spinning paid off: back to a generous budget
				 * fast. */
				e->spin_ns = e->spin_ns * 2 < UP_SPIN_MAX_NS ? e->spin_ns * 2
									   : UP_SPIN_MAX_NS;
				return r < 0 ? r : 0;
			}
			if ((i & 31) == 31 && now_ns() - t0 > e->spin_ns)
				break;
			up__cpu_relax();
		}
		spin_release(wl);
	} else {
		r = ready(e);
		if (r != 0)
			return r < 0 ? r : 0;
		/* With more waiters than cores, give the producer the core
		 * before the sleep's system calls. */
		sched_yield();
		up__count(&e->c.syscalls, 1);
	}
	/*
	 * It did not: spin less next time. With more threads than cores the
	 * peer we wait for may need this very core, so the budget shrinks
	 * while spinning keeps failing, slowly (an eighth per failure) and
	 * never below UP_SPIN_MIN_NS: a floor under the time a 64 KiB chunk
	 * takes to copy, or a streaming reader would sleep on every chunk
	 * (measured: with a 2 us floor a saturated 64 KiB stream made about
	 * 4,500 system calls per GiB instead of a few).
	 */
	if (e->spin_ns - e->spin_ns / 8 >= UP_SPIN_MIN_NS)
		e->spin_ns -= e->spin_ns / 8;

	for (;;) {
		uint32_t s;
		uint64_t sc = 0;

		s = atomic_load_explicit(&wl->seq, memory_order_seq_cst);

		/* Outside the handshake: may enter the kernel (pidfd_open). A
		 * peer already gone has no pidfd to fire: reap it now. */
		if (up__peers_watch(e, peer_role))
			up__peers_reap(e);
		/* Cheap unless the endpoint table changed since last time. */
		sweep_orphans(e);
		atomic_store_explicit(&wl->pending, 0, memory_order_seq_cst);
		atomic_fetch_add_explicit(&wl->nwait, 1, memory_order_seq_cst);
		announce_mark(e, line_id(e, wl));
		r = ready(e);
		if (r == 0) {
			up__count(&e->c.waits, 1);
			r = e->waker->ops->wait(e->waker, &wl->seq, s, UP_WAIT_SLICE_NS,
						e->peer_pidfds, e->npeer, &sc);
			up__count(&e->c.syscalls, sc);
			if (r == -ETIMEDOUT)
				up__count(&e->c.timeouts, 1);
			/* Up again: let the next progress wake another sleeper
			 * (wake.h: wakes of data are for one sleeper). */
			atomic_store_explicit(&wl->pending, 0, memory_order_seq_cst);
			/* A pidfd fired, or a slice ended: some peer may be dead
			 * (the reaping wakes everyone who needs to know). */
			if (r == 1 || r == -ETIMEDOUT) {
				up__peers_reap(e);
				sweep_orphans(e);
			}
			/* A whole slice without data: the burst is over. */
			if (r == -ETIMEDOUT && (e->flags & UP_RD))
				pool_trim(e);
			if (r == 1 || r == -ETIMEDOUT || r == -EINTR || r == -EAGAIN)
				r = 0;
			if (r == 0)
				r = ready(e);
		}
		announce_mark(e, UP_ARMED_LINE_NONE);
		atomic_fetch_sub_explicit(&wl->nwait, 1, memory_order_seq_cst);
		if (r < 0 && wl == &e->p->ln->rd_wait)
			/* We may have taken a wake meant for data that we now
			 * leave to the others: pass it on. */
			wake_line(e, wl, 1);
		if (r != 0)
			return r < 0 ? r : 0;
	}
}

/* ------------------------------------------------------------------------ */
/* poll mode: the sleep handshake with the sleeping left to the caller */

static struct up_shm_wait *end_line(struct up_end *e)
{
	return (e->flags & UP_RD) ? &e->p->ln->rd_wait : &e->p->ln->wr_wait;
}

/*
 * The lock biased to another writer, which is inside (a reservation held
 * open, say): a non-blocking take marked the bias UP_BIAS_REVOKE, fenced the
 * owner with membarrier() and gave up (bias_revoke()). Wait on the owner's
 * busy word while it reads UP_BUSY_IN, as a blocking taker sleeps on it: the
 * owner's next drop (or failed entry, or close) loads the bias after its
 * busy store, sees the mark, because the barrier came before, and wakes
 * every sleeper on busy (wlock_drop(), busy_wake()). Only for a fenced mark:
 * without the barrier that load may miss the mark, and poll mode has no
 * sleep slices to fall back on. Returns 0 armed, or 1 (try again).
 */
static int bias_poll_arm(struct up_end *w, _Atomic uint32_t **word, uint32_t *expect)
{
	struct up_pipe *p = w->p;
	struct up_shm_lock *l = &p->ln->wlock;
	uint32_t b = atomic_load_explicit(&l->bias, memory_order_seq_cst);
	uint32_t owner = b & ~UP_BIAS_REVOKE, idx = owner & UP_END_ROLE_MASK;
	_Atomic uint32_t *busy;

	if (!(b & UP_BIAS_REVOKE) || owner == w->lock_id || idx == 0 || idx > p->g.max_ends ||
	    atomic_load_explicit(&l->fenced, memory_order_seq_cst) != owner)
		return 1;
	busy = &p->ends[idx - 1].busy;
	if (atomic_load_explicit(busy, memory_order_seq_cst) != UP_BUSY_IN)
		return 1;
	/* Dead inside (maybe reaped already): nobody will wake us; a retry
	 * passes it (bias_revoke()). */
	if (up__lock_owner_gone(w, owner))
		return 1;
	w->armed = UP_ARMED_EXTERNAL;
	w->armed_on = UP_ARMED_ON_BUSY;
	*word = busy;
	*expect = UP_BUSY_IN;
	up__count(&w->c.waits, 1);
	return 0;
}

/*
 * Poll mode for a writer with pages to write into that a non-blocking call
 * found held up by the writers' lock: another writer holds the word, over
 * its small reservation (up_reserve) or a publish. Without this,
 * up_poll_arm() said "ready" and the event loop went round until that
 * commit. Now the end waits on the lock word itself, as lock_take() sleeps
 * on it: it counts itself in the lock's npoll, sets the waiters bit and
 * hands back the word and the value to wait on. The holder's drop sees
 * the bit and, npoll being non-zero, wakes every sleeper on the word (see
 * lock_drop(); tests/model/lock.pml, -DPOLLER). A holder that dies is seen
 * through the peers' pidfds that the poll ring watches (up__ring_poll_arm());
 * one already dead makes the arm return 1.
 *
 * A lock biased to another writer is waited for on that owner's busy word
 * instead (bias_poll_arm()). Returns 0 armed (*word, *expect), 1 when the
 * lock is not held by another end (try again), or -EPROTO.
 */
static int wlock_poll_arm(struct up_end *w, _Atomic uint32_t **word, uint32_t *expect)
{
	struct up_pipe *p = w->p;
	struct up_shm_lock *l = &p->ln->wlock;
	uint32_t cur, owner;

	owner = atomic_load_explicit(&l->word, memory_order_seq_cst) & ~UP_LOCK_WAITERS;
	if (owner == 0)
		return bias_poll_arm(w, word, expect);
	if (owner == w->lock_id)
		return 1;
	/* npoll before the bit: a drop that takes our bit sees the count. */
	atomic_fetch_add_explicit(&l->npoll, 1, memory_order_seq_cst);
	cur = atomic_load_explicit(&l->word, memory_order_seq_cst);
	owner = cur & ~UP_LOCK_WAITERS;
	if (owner != 0 && owner != w->lock_id &&
	    ((owner & UP_END_ROLE_MASK) == 0 || (owner & UP_END_ROLE_MASK) > p->g.max_ends)) {
		atomic_fetch_sub_explicit(&l->npoll, 1, memory_order_seq_cst);
		return proto_error(p);
	}
	if (owner == 0 || owner == w->lock_id ||
	    (!(cur & UP_LOCK_WAITERS) &&
	     !atomic_compare_exchange_strong_explicit(&l->word, &cur, cur | UP_LOCK_WAITERS,
						      memory_order_seq_cst,
						      memory_order_seq_cst))) {
		/* Let go meanwhile, or changed hands: try again. */
		atomic_fetch_sub_explicit(&l->npoll, 1, memory_order_seq_cst);
		return 1;
	}
	/* A holder that died (maybe reaped already) never lets go, and its
	 * pidfd may never have been taken: a retry takes the lock over
	 * (lock_take()). The bit we set stays; it costs one wake at most. */
	if (up__lock_owner_gone(w, owner)) {
		atomic_fetch_sub_explicit(&l->npoll, 1, memory_order_seq_cst);
		return 1;
	}
	announce_mark(w, UP_ARMED_LINE_WLOCK | UP_ARMED_LINE_POLL);
	w->armed = UP_ARMED_EXTERNAL;
	w->armed_on = UP_ARMED_ON_WORD;
	*word = &l->word;
	*expect = cur | UP_LOCK_WAITERS;
	up__count(&w->c.waits, 1);
	return 0;
}

/*
 * Announce this end as a sleeper on its line, as wait_ready() does, but
 * return instead of sleeping: the caller sleeps in its own event loop
 * (up_pollfd, or an SQE on its own ring) and the end stays announced until
 * up__ring_disarm(). With @locks, a writer held up by another writer's
 * lock waits for it (wlock_poll_arm()); the caller must then watch every
 * peer process and cancel its wait before disarming. Returns 1 when
 * progress is possible now (nothing armed), 0 with *word and *expect to wait
 * on, or -EPROTO.
 */
int up__ring_arm(struct up_end *e, bool locks, _Atomic uint32_t **word, uint32_t *expect)
{
	int (*ready)(struct up_end *) = (e->flags & UP_RD) ? rd_ready : wr_ready;
	struct up_shm_wait *wl = end_line(e);
	uint32_t s;
	int r;

	up__ring_disarm(e);
	r = ready(e);
	/* Pages to write into, but maybe another writer's lock in the way:
	 * wait for that instead of going round. Not when no reader is left
	 * (the retry gives -EPIPE); a reader leaving while we wait does not end
	 * the wait, as it does not wake a writer blocked on the lock either
	 * (nor the kernel's, on pipe->mutex): the holder's commit does. */
	if (r > 0 && locks && (e->flags & UP_WR) &&
	    atomic_load_explicit(&e->p->ln->state.readers, memory_order_seq_cst) != 0)
		return wlock_poll_arm(e, word, expect);
	if (r != 0)
		return r < 0 ? r : 1;
	s = atomic_load_explicit(&wl->seq, memory_order_seq_cst);
	atomic_store_explicit(&wl->pending, 0, memory_order_seq_cst);
	/* npoll before nwait: a waker that counts us sees both. */
	atomic_fetch_add_explicit(&wl->npoll, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&wl->nwait, 1, memory_order_seq_cst);
	r = ready(e);
	if (r != 0) {
		atomic_fetch_sub_explicit(&wl->nwait, 1, memory_order_seq_cst);
		atomic_fetch_sub_explicit(&wl->npoll, 1, memory_order_seq_cst);
		return r < 0 ? r : 1;
	}
	announce_mark(e, line_id(e, wl) | UP_ARMED_LINE_POLL);
	e->armed = UP_ARMED_EXTERNAL;
	*word = &wl->seq;
	*expect = s;
	up__count(&e->c.waits, 1);
	return 0;
}

int up__ring_poll_arm(struct up_end *e)
{
	_Atomic uint32_t *word;
	uint64_t sc = 0;
	uint32_t s, role;
	int r;

	if (!e->waker->ops->arm)
		return -EOPNOTSUPP;
	/* Outside the handshake: may enter the kernel (pidfd_open). A writer
	 * may wait for readers (pages) or for another writer (its lock), so it
	 * watches every peer. */
	role = (e->flags & UP_RD) ? UP_END_WRITER : UP_PEERS_ANY;
	if (up__peers_watch(e, role))
		up__peers_reap(e);
	r = up__ring_arm(e, true, &word, &s);
	if (r != 0)
		return r;
	/* A peer that came (and so may be the lock's holder) since the list
	 * was made, or one already gone: look again. */
	if (up__peers_watch(e, role)) {
		up__ring_disarm(e);
		up__peers_reap(e);
		return 1;
	}
	r = e->waker->ops->arm(e->waker, word, s, e->peer_pidfds, e->npeer, &sc);
	up__count(&e->c.syscalls, sc);
	if (r < 0) {
		up__ring_disarm(e);
		return r;
	}
	e->armed = UP_ARMED_POLL;
	return 0;
}

void up__ring_disarm(struct up_end *e)
{
	uint64_t sc = 0;
	int peer = 0, arm_on;

	if (!e->armed)
		return;
	if (e->armed == UP_ARMED_POLL)
		peer = e->waker->ops->disarm(e->waker, &sc);
	e->armed = UP_ARMED_NONE;
	announce_mark(e, UP_ARMED_LINE_NONE);
	arm_on = e->armed_on;
	e->armed_on = UP_ARMED_ON_LINE;
	if (arm_on == UP_ARMED_ON_WORD) {
		atomic_fetch_sub_explicit(&e->p->ln->wlock.npoll, 1, memory_order_seq_cst);
	} else if (arm_on == UP_ARMED_ON_LINE) {
		atomic_fetch_sub_explicit(&end_line(e)->nwait, 1, memory_order_seq_cst);
		atomic_fetch_sub_explicit(&end_line(e)->npoll, 1, memory_order_seq_cst);
	}
	up__count(&e->c.syscalls, sc);
	if (peer == 1)
		up__peers_reap(e);
}

/* ------------------------------------------------------------------------ */
/* the two locks */

/*
 * The two locks are futex mutexes on shared words whose value names the
 * holder (its endpoint index + 1), so a waiter can tell a holder that died
 * (its entry freed, or its process gone: peer.c) and take the lock over,
 * and a value that names no endpoint is a corrupt segment, not a reason to
 * wait forever.
 */
/*
 * Waiting for another endpoint to let go (a lock's holder, a bias owner):
 * step @i of the backoff. Spins UP_LOCK_SPINS times, then yields
 * UP_LOCK_YIELDS times (the holder may be preempted on our core; a
 * non-blocking caller skips that and gives up instead). Returns true when
 * it spun or yielded, false when the caller should check for a dead holder
 * and then sleep or give up. After a sleep, the caller sets i to
 * UP_BACKOFF_SLEPT: no second round of spinning and yielding.
 */
#define UP_BACKOFF_SLEPT (UP_LOCK_SPINS + UP_LOCK_YIELDS - 1)

static bool backoff(struct up_end *e, unsigned int i, bool nonblock)
{
	if (i < UP_LOCK_SPINS) {
		up__cpu_relax();
		return true;
	}
	if (i < UP_LOCK_SPINS + UP_LOCK_YIELDS && !nonblock) {
		sched_yield();
		up__count(&e->c.syscalls, 1);
		return true;
	}
	return false;
}

static int lock_take(struct up_end *e, _Atomic uint32_t *lk, bool nonblock)
{
	struct up_pipe *p = e->p;
	uint32_t cur = 0, owner, keep = 0;
	unsigned int i;

	/* Acquire: the critical section's reads come after; pairs with the
	 * release in lock_drop(). */
	if (atomic_compare_exchange_strong_explicit(lk, &cur, e->lock_id,
						    memory_order_acquire,
						    memory_order_relaxed))
		return 0;
	for (i = 0;; i++) {
		cur = atomic_load_explicit(lk, memory_order_relaxed);
		owner = cur & ~UP_LOCK_WAITERS;
		if (owner == 0) {
			/* Keep the waiters bit: others may still sleep. */
			if (atomic_compare_exchange_weak_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acquire, memory_order_relaxed))
				return 0;
			continue;
		}
		if ((owner & UP_END_ROLE_MASK) == 0 ||
		    (owner & UP_END_ROLE_MASK) > p->g.max_ends || owner == e->lock_id ||
		    is_broken(p))
			return proto_error(p);
		if (backoff(e, i, nonblock))
			continue;
		/* Before giving up (non-blocking) or sleeping: a holder that
		 * died would otherwise keep a non-blocking end at -EAGAIN for
		 * ever (found by the fuzzing pass). */
		if (up__lock_owner_gone(e, owner)) {
			/* Take it over from the dead; what it published is
			 * whole (single stores), the rest was never visible. */
			if (atomic_compare_exchange_strong_explicit(
				    lk, &cur, e->lock_id | (cur & UP_LOCK_WAITERS) | keep,
				    memory_order_acquire, memory_order_relaxed))
				return 0;
			continue;
		}
		if (nonblock)
			return -EAGAIN;
		/* Sleep on the lock word itself, as a futex mutex does. */
		if (!(cur & UP_LOCK_WAITERS) &&
		    !atomic_compare_exchange_weak_explicit(lk, &cur, cur | UP_LOCK_WAITERS,
							   memory_order_relaxed,
							   memory_order_relaxed))
			continue;
		uint64_t sc = 0;
		up__count(&e->c.waits, 1);
		if (e->waker->ops->wait(e->waker, lk, cur | UP_LOCK_WAITERS, UP_WAIT_SLICE_NS,
					NULL, 0, &sc) == -ETIMEDOUT)
			up__count(&e->c.timeouts, 1);
		up__count(&e->c.syscalls, sc);
		/*
		 * Woken or timed out: look once more, then sleep again. The
		 * drop that woke us cleared the waiters bit, and others may
		 * still sleep behind us, so from now on we take the lock with
		 * the bit set: our drop then wakes the next, as a futex
		 * mutex's "contended" state does. Taking it without the bit
		 * left the second of two sleepers asleep, with the lock free,
		 * for its whole slice (found by test_wakeup_torture under
		 * TSan; test_lock_handoff, two_*_asleep_are_both_woken).
		 * Costs one needless wake when nobody else sleeps.
		 */
		keep = UP_LOCK_WAITERS;
		i = UP_BACKOFF_SLEPT;
	}
}

static void lock_drop(struct up_end *e, _Atomic uint32_t *lk)
{
	/* Release: pairs with the acquire in lock_take(). seq_cst: the load of
	 * npoll below must see a poller that set the bit we take
	 * (wlock_poll_arm()). */
	uint32_t old = atomic_exchange_explicit(lk, 0, memory_order_seq_cst);

	if (old & UP_LOCK_WAITERS) {
		struct up_shm_lock *l = (struct up_shm_lock *)(void *)((char *)lk -
					 offsetof(struct up_shm_lock, word));
		uint64_t sc = 0;

		/* One: the futex mutex hand-off; the woken keeps the
		 * waiters bit, so its unlock wakes the next. But every one
		 * while a poll-mode end is armed on the word: its event loop
		 * may never take the lock, and a wake for one that went to it
		 * would leave a blocked writer asleep for its whole slice
		 * (tests/model/lock.pml, -DPOLLER). */
		e->waker->ops->wake(e->waker, lk,
				    atomic_load_explicit(&l->npoll, memory_order_seq_cst)
					    ? UP_WAKE_ALL
					    : 1,
				    &sc);
		up__count(&e->c.syscalls, sc);
		up__count(&e->c.wakes, 1);
	}
}

/* ------------------------------------------------------------------------ */
/* the writers' lock, biased to a lone writer */

/*
 * With one writer, taking and dropping the writers' lock were two of the
 * three locked instructions of every small write (the third is the seq_cst
 * len store that the sleep handshake needs), and measured a fifth of the
 * 100-byte stream (docs/DESIGN-NOTES.md). So the lock is biased, as the
 * JVM's biased locking does, to a writer that takes it while it is the only
 * one: that writer then enters by storing UP_BUSY_IN to its own endpoint
 * entry and checking that the bias still names it, and leaves by storing
 * UP_BUSY_OUT: no locked instruction, no line another core writes.
 *
 * Any other writer takes the word as before and, finding a bias, takes it
 * back:
 *   1. marks it UP_BIAS_REVOKE, so the owner's next entry fails;
 *   2. membarrier() (fence.c): the owner either had stored UP_BUSY_IN
 *      before the barrier, and that store is visible now, or it loads the
 *      bias after it and sees the mark;
 *   3. waits while the owner is UP_BUSY_IN (or, where membarrier is
 *      refused, until the owner acknowledges with UP_BUSY_ACK), or gone:
 *      it spins, yields, then sleeps on the owner's busy word, which the
 *      owner wakes when it leaves and finds the mark;
 *   4. clears the bias. It holds the word and the owner stays out: the
 *      owner found the bias changed and takes the word like anyone else.
 * Step 2 replaces the fence the owner would need between its store and its
 * load; tests/model/bias.pml checks the protocol with the owner's store
 * buffer modelled, and that it fails without step 2 or 3. The bias is
 * entered only by a holder of the word that sees itself the only writer
 * and whose process registered for membarrier, so a second writer costs
 * one barrier (12 us here) once, and never two owners exist.
 */
/* A revoker sleeps on the owner's busy word in slices of this, looking for
 * a dead owner in between (the futex backend cannot watch pidfds). */
#define UP_BIAS_SLICE_NS 10000000ull /* 10 ms */
/*
 * A revoker whose process may not call membarrier() (a seccomp filter that
 * the owner's process does not have) cannot fence the owner. It waits for
 * the owner's UP_BUSY_ACK, which the owner gives on its next entry or its
 * close; an owner that stays open and idle gives none. So it also accepts
 * an owner that is out of the critical section once the mark is this old:
 * an entry that read the bias before the mark was visible stored
 * UP_BUSY_IN before that read, and a store does not stay in a store buffer
 * for milliseconds (a context switch or an interrupt on that CPU drains
 * it); every later entry sees the mark. This is the one timing argument of
 * the protocol; with membarrier available it is never used.
 */
#define UP_BIAS_GRACE_NS 20000000ull /* 20 ms */

/* Holding the word: take back the bias @b. 0, or -EAGAIN (non-blocking,
 * the owner is inside), or -EPROTO. */
static int bias_revoke(struct up_end *w, uint32_t b)
{
	struct up_pipe *p = w->p;
	_Atomic uint32_t *bias = &p->ln->wlock.bias;
	uint32_t owner = b & ~UP_BIAS_REVOKE;
	uint32_t idx = owner & UP_END_ROLE_MASK;
	_Atomic uint32_t *fenced_by = &p->ln->wlock.fenced;
	_Atomic uint64_t *marked = &p->ln->wlock.marked_ns;
	const bool nonblock = w->flags & UP_NONBLOCK;
	uint64_t sc = 0, t_mark, now = now_ns();
	uint32_t i;
	bool fenced;

	/* Garbage, or this end's own bias left from before (a bias is never
	 * entered twice by one end without the word): nobody to wait for. */
	if (idx == 0 || idx > p->g.max_ends || owner == w->lock_id)
		goto clear;
	if (b & UP_BIAS_REVOKE) {
		/* A taker before us marked it and gave up (non-blocking). If it
		 * fenced after its mark, that barrier serves us too. Relaxed:
		 * written under the word we hold. */
		t_mark = atomic_load_explicit(marked, memory_order_relaxed);
		if (t_mark == 0 || t_mark > now) /* none, or not ours to trust */
			atomic_store_explicit(marked, t_mark = now, memory_order_relaxed);
		fenced = atomic_load_explicit(fenced_by, memory_order_relaxed) == owner;
	} else {
		/* Step 1. seq_cst: before the barrier, which orders it anyway. */
		atomic_store_explicit(bias, owner | UP_BIAS_REVOKE, memory_order_seq_cst);
		atomic_store_explicit(marked, t_mark = now, memory_order_relaxed);
		fenced = false;
	}
	if (!fenced) {
		/* Step 2. */
		fenced = up__membarrier(&sc) == 0;
		up__count(&w->c.syscalls, sc);
		up__count(&w->c.revokes, 1);
		if (fenced)
			atomic_store_explicit(fenced_by, owner, memory_order_relaxed);
	}
	/* Step 3. */
	_Atomic uint32_t *busy = &p->ends[idx - 1].busy;
	for (i = 0;; i++) {
		/* Acquire: pairs with the owner's release of UP_BUSY_OUT or
		 * UP_BUSY_ACK; its critical section comes before ours. */
		uint32_t st = atomic_load_explicit(busy, memory_order_acquire);

		if (st == UP_BUSY_ACK || (fenced && st != UP_BUSY_IN))
			break;
		/* See UP_BIAS_GRACE_NS. */
		if (!fenced && st != UP_BUSY_IN && (i & 31) == 0 &&
		    now_ns() - t_mark >= UP_BIAS_GRACE_NS)
			break;
		if (is_broken(p))
			return -EPROTO;
		if (backoff(w, i, nonblock))
			continue;
		/* The owner is preempted, holds a reservation open, or died
		 * inside: whatever it published is whole (single stores). */
		if (up__lock_owner_gone(w, owner))
			break;
		if (nonblock)
			return -EAGAIN; /* the mark stays; the next taker goes on */
		/* Sleep while busy keeps the value just seen: the owner wakes
		 * us when it leaves and finds the mark (wlock_drop()), or
		 * acknowledges it. */
		sc = 0;
		up__count(&w->c.waits, 1);
		w->waker->ops->wait(w->waker, busy, st, UP_BIAS_SLICE_NS, NULL, 0, &sc);
		up__count(&w->c.syscalls, sc);
		i = UP_BACKOFF_SLEPT;
	}
clear:
	/* Step 4. Relaxed: we hold the word; its release publishes this. */
	atomic_store_explicit(bias, 0, memory_order_relaxed);
	atomic_store_explicit(fenced_by, 0, memory_order_relaxed);
	atomic_store_explicit(marked, 0, memory_order_relaxed);
	return 0;
}

/* The owner changed its busy word while a revoker may sleep on it. */
static void busy_wake(struct up_end *w)
{
	uint64_t sc = 0;

	w->waker->ops->wake(w->waker, &w->p->ends[w->idx].busy, UP_WAKE_ALL, &sc);
	up__count(&w->c.syscalls, sc);
	up__count(&w->c.wakes, 1);
}

static int wlock_take_slow(struct up_end *w);

/* The bias owner's entry: one store, one load. True when entered; false
 * (the bias taken back, acknowledged) or not the owner: take the word. */
static inline bool wlock_bias_enter(struct up_end *w)
{
	struct up_pipe *p = w->p;

	if (up__likely(w->biased)) {
		_Atomic uint32_t *busy = &p->ends[w->idx].busy;

		/* Relaxed store, then load, with no fence between: the revoker's
		 * membarrier() is the fence (see above). The compiler barrier
		 * keeps the two in this order in the code. */
		atomic_store_explicit(busy, UP_BUSY_IN, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		/* Acquire: the critical section's loads come after. */
		if (up__likely(atomic_load_explicit(&p->ln->wlock.bias, memory_order_acquire) ==
			       w->lock_id))
			return true;
		/* Release: our earlier critical sections before the ACK. */
		atomic_store_explicit(busy, UP_BUSY_ACK, memory_order_release);
		busy_wake(w);
		w->biased = false;
		w->last_ok = false;
	}
	return false;
}

/* Inlined into every caller: the bias owner enters with no atomic RMW. */
static inline int wlock_take(struct up_end *w)
{
	if (wlock_bias_enter(w))
		return 0;
	return wlock_take_slow(w);
}

/* Everyone else: the word, then take back a bias found there, or set one. */
static __attribute__((noinline)) int wlock_take_slow(struct up_end *w)
{
	struct up_pipe *p = w->p;
	struct up_shm_lock *l = &p->ln->wlock;
	uint64_t sc = 0;
	uint32_t b;
	int r;

	r = lock_take(w, &l->word, w->flags & UP_NONBLOCK);
	if (r < 0)
		return r;
	/* Relaxed: written only by holders of the word, which we are. */
	b = atomic_load_explicit(&l->bias, memory_order_relaxed);
	if (b != 0) {
		r = bias_revoke(w, b);
		if (r < 0) {
			lock_drop(w, &l->word);
			return r == -EPROTO ? proto_error(p) : r;
		}
	}
	/* The only writer: bias the lock to this end. Relaxed: the writer
	 * count is a hint; a writer that joined meanwhile takes it back. */
	if (!w->bias_off && atomic_load_explicit(&p->ln->state.writers, memory_order_relaxed) == 1 &&
	    up__membarrier_registered(w->pid, &sc)) {
		atomic_store_explicit(&p->ends[w->idx].busy, UP_BUSY_IN, memory_order_relaxed);
		atomic_store_explicit(&l->bias, w->lock_id, memory_order_relaxed);
		w->biased = true;
		/* Release: both stores before the word is free. */
		lock_drop(w, &l->word);
	}
	up__count(&w->c.syscalls, sc);
	return 0;
}

static inline void wlock_drop(struct up_end *w)
{
	struct up_pipe *p = w->p;

	if (w->biased) {
		/* Release: the critical section before a revoker's acquire. */
		atomic_store_explicit(&p->ends[w->idx].busy, UP_BUSY_OUT, memory_order_release);
		/* The load below stays after the store in the code (C11 would
		 * let a relaxed load move above a release store). */
		atomic_signal_fence(memory_order_seq_cst);
		/*
		 * A revoker that saw us inside after its barrier sleeps on
		 * busy. Then our store above came after the barrier, and so
		 * does this load: it sees the mark (relaxed, one load of a
		 * line we read on entry anyway).
		 */
		if (up__unlikely(atomic_load_explicit(&p->ln->wlock.bias, memory_order_relaxed) &
				 UP_BIAS_REVOKE))
			busy_wake(w);
	} else
		lock_drop(w, &p->ln->wlock.word);
}

/*
 * Take the writers' lock only if that costs no wait: the bias owner's
 * entry, or else one attempt on the word, which must carry no bias (taking
 * a bias back means waiting for its owner). Returns 0 with the lock held,
 * or -EAGAIN. An owner whose bias was taken back acknowledges that and
 * tries the word like anyone else (found by a review: it used to wait for
 * the word).
 */
static int wlock_try(struct up_end *w)
{
	struct up_pipe *p = w->p;
	uint32_t cur = 0;

	if (wlock_bias_enter(w))
		return 0;
	/* Acquire: pairs with the release in lock_drop(). */
	if (!atomic_compare_exchange_strong_explicit(&p->ln->wlock.word, &cur, w->lock_id,
						    memory_order_acquire, memory_order_relaxed))
		return -EAGAIN;
	/* Relaxed: written only by holders of the word, which we are. */
	if (atomic_load_explicit(&p->ln->wlock.bias, memory_order_relaxed) != 0) {
		lock_drop(w, &p->ln->wlock.word);
		return -EAGAIN;
	}
	return 0;
}

/* A writer closing: give the bias up, so the next writer need not take it
 * back with a barrier. Never blocks (close must not). */
static void wlock_unbias(struct up_end *w)
{
	struct up_pipe *p = w->p;
	struct up_shm_lock *l = &p->ln->wlock;

	if (!w->biased)
		return;
	w->biased = false;
	w->last_ok = false;
	/* Out for good: a revoker that could not fence waits for this. */
	atomic_store_explicit(&p->ends[w->idx].busy, UP_BUSY_ACK, memory_order_release);
	busy_wake(w);
	if (lock_take(w, &l->word, true) < 0)
		return; /* a revoker holds it: it finds us out */
	/* Ours, marked or not: a taker that gave up on us (non-blocking)
	 * leaves its mark, and nobody needs to wait for us any more. */
	if ((atomic_load_explicit(&l->bias, memory_order_relaxed) & ~UP_BIAS_REVOKE) ==
	    w->lock_id) {
		atomic_store_explicit(&l->bias, 0, memory_order_relaxed);
		atomic_store_explicit(&l->fenced, 0, memory_order_relaxed);
		atomic_store_explicit(&l->marked_ns, 0, memory_order_relaxed);
	}
	lock_drop(w, &l->word);
}

/* ------------------------------------------------------------------------ */
/* writer side */

void up__ring_init(struct up_pipe *p)
{
	atomic_store_explicit(&p->ln->prod.head, 0, memory_order_relaxed);
	atomic_store_explicit(&p->ln->cons.pos, 0, memory_order_relaxed);
	/* Slot head-1 of the empty ring looks full, so nothing merges into it
	 * (see try_merge()). */
	atomic_store_explicit(&slot_at(p, (uint32_t)-1)->len, p->g.page_size,
			      memory_order_relaxed);
}

/*
 * The lone writer's last slot. A writer that holds the bias is the only one
 * that publishes or grows slots, so it keeps the last slot's index, page
 * and len as it wrote them and does not load them back from the segment.
 * That load was the one stall of a 100-byte write: the reader had taken the
 * slot's line while reading the page before it (4 slots share a line), and
 * perf put about two thirds of merge_open()'s samples on it.
 *
 * The copy is good from a publish made under the bias until the bias is
 * lost, which this end learns in wlock_bias_enter() (failing) or gives up
 * in wlock_unbias(); both clear last_ok, so last_ok implies biased.
 * Another writer can publish only after taking the bias back. A peer that
 * rewrites the slot meanwhile breaks the protocol; what we then store is
 * still a page index we own and a len within the page, which readers check
 * like any other.
 */
static inline void last_keep(struct up_end *w, uint32_t head, uint32_t pg, uint32_t len)
{
	w->last_ok = w->biased;
	w->last_head = head;
	w->last_pg = pg;
	w->last_len = len;
}

/*
 * Under the writers' lock: the last live slot, its len and its page, from
 * the lone writer's copy when it has one. Returns 0, or -EPROTO (the caller
 * drops the lock) when they are out of range.
 */
static int last_slot(struct up_end *w, struct up_shm_slot **sp, uint32_t *lenp, uint32_t *pgp)
{
	struct up_pipe *p = w->p;

	if (w->last_ok) {
		*sp = slot_at(p, w->last_head - 1);
		*lenp = w->last_len;
		*pgp = w->last_pg;
		return 0;
	}
	/* Relaxed: head is written only under the writers' lock we hold. */
	uint32_t h = atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed);
	/*
	 * No need to load tail (a line the readers write) to know that slot
	 * h-1 is still live: readers retire the last slot only once it is full,
	 * len never shrinks, so a slot h-1 with room has never been retired.
	 * The empty new ring has a full sentinel at h-1 (up__ring_init()).
	 */
	struct up_shm_slot *s = slot_at(p, h - 1);

	/* Relaxed: len and page of the last slot are written only by writers,
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
 * live page. Returns 1 with the lock held and *sp, *lenp, *pgp set; 0 when
 * there is no room (lock dropped); -EPROTO, or -EAGAIN (lock busy on a
 * non-blocking end, or at all when @try).
 */
static int merge_open(struct up_end *w, size_t n, struct up_shm_slot **sp, uint32_t *lenp,
		      uint32_t *pgp, bool try)
{
	struct up_pipe *p = w->p;
	int r;

	r = try ? wlock_try(w) : wlock_take(w);
	if (r < 0)
		return r;
	if (last_slot(w, sp, lenp, pgp) < 0) {
		wlock_drop(w);
		return proto_error(p);
	}
	if (p->g.page_size - *lenp < n) {
		wlock_drop(w);
		return 0;
	}
	return 1;
}

/* Publish the merged bytes by growing @s's len to @len; drop the lock. */
static void merge_close(struct up_end *w, struct up_shm_slot *s, uint32_t len)
{
	/* R2: the bytes below len before the new len; pairs with A2 in
	 * read_locked(). seq_cst: the progress store of the handshake. */
	atomic_store_explicit(&s->len, len, memory_order_seq_cst);
	w->last_len = len;
	wlock_drop(w);
	wake_line(w, &w->p->ln->rd_wait, 1);
}

/*
 * Append @n bytes at the end of the last live page when they all fit.
 * Returns 1 when done, 0 when there is no room (nothing written), -EPROTO,
 * -EAGAIN (lock busy on a non-blocking end).
 */
static int try_merge(struct up_end *w, struct iov_cur *c, size_t n)
{
	struct up_shm_slot *s;
	uint32_t len, pg;
	int r;

	r = merge_open(w, n, &s, &len, &pg, false);
	if (r <= 0)
		return r;
	cur_copy_from(c, page_ptr(w->p, pg) + len, n);
	merge_close(w, s, len + (uint32_t)n);
	return 1;
}

/* The short way's way in: true with the writers' lock held (through the
 * bias) when @len bytes fit the room left in the last page and nothing asks
 * for the general path. */
static bool short_enter(struct up_end *w, size_t len)
{
	struct up_pipe *p = w->p;

	/* resv_bytes covers a merge reservation too (resv_merge_give()). */
	if (!w->last_ok || len > p->g.page_size - w->last_len || w->armed ||
	    w->resv_bytes != 0 || is_broken(p))
		return false;
	/* seq_cst: as in up__ring_write() (the EPIPE edge). */
	if (atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst) == 0)
		return false;
	return wlock_bias_enter(w);
}

/*
 * up_write()'s short way: the lone writer appends @len bytes (not 0) to the
 * last page, which it knows has room without looking at the segment (see
 * last_keep()). The general path does the same through try_merge(), after
 * an iovec cursor, a reservation check and a loop. Measured with 100-byte
 * writes (docs/DESIGN-NOTES.md): 11-12 ns a write against 18-19 with one
 * thread writing and then reading, a median of 26 ns against 37 with the
 * reader on the other vCPU. Returns @len when done, or 0: the general path
 * takes the write and finds whatever stopped this one (an error, no room,
 * a reservation to end, the bias taken back).
 */
size_t up__ring_write_small(struct up_end *w, const void *buf, size_t len)
{
	struct up_pipe *p = w->p;
	uint32_t have = w->last_len;

	if (!short_enter(w, len))
		return 0;
	memcpy(page_ptr(p, w->last_pg) + have, buf, len);
	merge_close(w, slot_at(p, w->last_head - 1), have + (uint32_t)len);
	up__count(&w->c.bytes_written, len);
	up__count(&w->c.writes, 1);
	return len;
}

/* Publish @n filled pages (lengths in @lens) at head. */
static int publish(struct up_end *w, const uint32_t *pages, const uint32_t *lens,
		   uint32_t n)
{
	struct up_pipe *p = w->p;
	uint32_t h, t, i;
	int r;

	if (n == 0) /* callers have a page at least; nothing to publish */
		return 0;
	r = wlock_take(w);
	if (r < 0)
		return r;
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed);
	/*
	 * The slots [h, h+n) must be retired. Holding n pages already implies
	 * it for honest peers (pages <= slots, one page per live slot), so
	 * this is a guard against a lying peer, checked first against the
	 * tail this end saw last: tail only grows, so an old value can only
	 * make the check stricter. Reload (a line the readers write) only when
	 * the old value does not suffice.
	 */
	t = w->tail_cache;
	if (h - t > p->g.slot_count || p->g.slot_count - (h - t) < n) {
		/* A3: pairs with R3; the slots we are about to fill are retired. */
		t = up__pos_tail(atomic_load_explicit(&p->ln->cons.pos, memory_order_acquire));
		w->tail_cache = t;
		if (h - t > p->g.slot_count || p->g.slot_count - (h - t) < n) {
			wlock_drop(w);
			return proto_error(p);
		}
	}
	/* Untag first: a page we die holding after this is leaked, never
	 * handed out twice (pagepool.c, up__pages_orphaned). */
	up__pages_untag(p, pages, n);
	for (i = 0; i < n; i++) {
		struct up_shm_slot *s = slot_at(p, h + i);

		/* Relaxed: ordered by R1 below. */
		atomic_store_explicit(&s->page, pages[i], memory_order_relaxed);
		atomic_store_explicit(&s->len, lens[i], memory_order_relaxed);
	}
	/* R1: publish slots [h, h+n); pairs with A1 in read_locked() and
	 * peek. seq_cst: the progress store of the handshake. */
	atomic_store_explicit(&p->ln->prod.head, h + n, memory_order_seq_cst);
	last_keep(w, h + n, pages[n - 1], lens[n - 1]);
	wlock_drop(w);
	wake_line(w, &p->ln->rd_wait, 1);
	return 0;
}

/* Make sure the writer's cache holds at least one unreserved page, taking
 * up to @want in one batch. Returns pages available, 0 if none, -EPROTO. */
static int cache_fill(struct up_end *w, uint32_t want)
{
	uint32_t have = w->ncache - w->resv_pages;
	int r;

	if (have >= want)
		return (int)have;
	/* Take a few more than this write needs: one CAS on the pool line per
	 * batch instead of per page. Kept small next to the capacity, since
	 * pages in one writer's cache are not available to the others. */
	if (want < w->take_batch)
		want = w->take_batch;
	if (want - have > UP_END_CACHE_MAX - w->ncache)
		want = UP_END_CACHE_MAX - w->ncache + have;
	r = up__pool_take(w->p, w->cache + w->ncache, want - have, w->p->g.spare_pages, w->tag);
	if (r < 0)
		return proto_error(w->p);
	w->ncache += (uint32_t)r;
	return (int)(have + (uint32_t)r);
}

/* Drop the first @n pages of the cache (they were published). */
static void cache_shift(struct up_end *w, uint32_t n)
{
	memmove(w->cache, w->cache + n, (w->ncache - n) * sizeof(w->cache[0]));
	w->ncache -= n;
}

/*
 * A page was just published with room left, so small writes will fill it by
 * merging, and then the writer moves to the next page in its cache. When
 * pages fill slowly, store to every line of that next page now, so its
 * lines are fetched together, a page ahead of need, instead of one by one
 * inside the merges.
 *
 * The lines were last read by a reader on another core. A merge's first
 * store to each must fetch it from there before the publishing store can
 * complete. In the VM's slow phases (the two vCPUs far apart on this AMD
 * EPYC host) that made a 100-byte write cost 120-170 ns against 25-35.
 * PREFETCHW of the same lines changed nothing; plain stores did. Micro
 * benchmark (1 writer + 1 reader, 100-byte writes, 1 MiB pipe, alternating
 * builds): slow phases 64-117 ns a write against 137-176 without. But in
 * the medium phases (30-55 ns a write) the burst of fetches cost 10-15%, so
 * the writer claims only while a page takes long to fill: from
 * UP_CLAIM_ON_NS per 4 KiB (about 60 ns per 100-byte write) until it falls
 * under UP_CLAIM_OFF_NS. A writer paced by its caller fills pages slowly
 * too; claiming costs it nothing that matters, and its next writes find
 * their lines at hand.
 *
 * Full pages never come here: they are written with streaming stores, which
 * a store first defeats (4 KiB writes fell to a third when every page was
 * claimed). The page is in this writer's cache, taken from the pool and not
 * yet published: nobody reads it, and the zeros left at line starts lie
 * beyond any len it will be published with, or are overwritten first.
 */
#define UP_CLAIM_ON_NS  2500u
#define UP_CLAIM_OFF_NS 1500u

static void claim_next_page(struct up_end *w)
{
	struct up_pipe *p = w->p;
	uint64_t now = now_ns();
	uint64_t took = (now - w->part_ns) >> (p->g.page_shift - 12);
	volatile unsigned char *q;
	uint32_t o;

	/* Time since the last page with room was published: how long it took
	 * to fill, per 4 KiB. */
	if (w->part_ns != 0)
		w->claim = took >= (w->claim ? UP_CLAIM_OFF_NS : UP_CLAIM_ON_NS);
	w->part_ns = now;
	if (!w->claim || w->ncache == 0)
		return;
	q = page_ptr(p, w->cache[0]);
	for (o = 0; o < p->g.page_size; o += 64)
		q[o] = 0;
}

/* Forget the current reservation, if any, without publishing it. */
static void resv_cancel(struct up_end *w)
{
	if (w->resv_merge) {
		w->resv_merge = false;
		wlock_drop(w);
	}
	w->resv_pages = 0;
	w->resv_bytes = 0;
}

ssize_t up__ring_write(struct up_end *w, const struct iovec *iov, int iovcnt, size_t len)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	const uint32_t chunk_pages = ps >= UP_CHUNK_BYTES ? 1 : UP_CHUNK_BYTES >> p->g.page_shift;
	uint32_t lens[UP_END_CACHE_MAX];
	struct iov_cur c;
	size_t done = 0;
	int r = 0;

	if (len == 0)
		return 0;
	if (up__unlikely(w->armed))
		up__ring_disarm(w);
	resv_cancel(w); /* a write ends a reservation, as a commit of 0 */
	cur_init(&c, iov, iovcnt);
	while (done < len) {
		size_t rem = len - done;
		uint32_t want, n, i;
		bool part;

		if (is_broken(p)) {
			r = -EPROTO;
			break;
		}
		/* seq_cst: pairs with the last reader's decrement (EPIPE edge). */
		if (atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst) == 0) {
			r = -EPIPE;
			break;
		}
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
		want = (uint32_t)((rem + ps - 1) >> p->g.page_shift);
		if (want > chunk_pages)
			want = chunk_pages;
		r = cache_fill(w, want);
		if (r < 0)
			break;
		if (r == 0) {
			if (w->flags & UP_NONBLOCK) {
				/* Pages a dead writer held may be all that is
				 * missing (cheap unless the table changed). */
				if (sweep_orphans(w))
					continue;
				r = -EAGAIN;
				break;
			}
			r = wait_ready(w, &p->ln->wr_wait, wr_ready, UP_END_READER);
			if (r < 0)
				break;
			continue;
		}
		n = (uint32_t)r < want ? (uint32_t)r : want;
		part = false;
		/* Copy with no lock held: other writers and the readers go on. */
		for (i = 0; i < n && rem; i++) {
			uint32_t k = rem < ps ? (uint32_t)rem : ps;

			cur_copy_in(&c, page_ptr(p, w->cache[i]), k, k == ps);
			lens[i] = k;
			rem -= k;
			part = k < ps;
		}
		n = i;
		/* The streaming stores above before publish()'s head store. */
		nt_fence();
		r = publish(w, w->cache, lens, n);
		if (r < 0)
			break;
		cache_shift(w, n);
		if (part) /* the last page has room */
			claim_next_page(w);
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

/* Holding the writers' lock: hand out the @len bytes after @have in page @pg
 * of slot @head - 1 as the reservation. */
static ssize_t resv_merge_give(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt,
			       uint32_t head, uint32_t pg, uint32_t have)
{
	iov[0].iov_base = page_ptr(w->p, pg) + have;
	iov[0].iov_len = len;
	*iovcnt = 1;
	w->resv_merge = true;
	w->resv_bytes = len;
	w->resv_head = head;
	w->resv_pg = pg;
	w->resv_len = have;
	return (ssize_t)len;
}

/*
 * A small reservation: hand out the room at the end of the last live page,
 * as try_merge() would fill it, and keep the writers' lock until commit
 * publishes it by growing the slot's len. Without this a 100-byte
 * reserve+commit took a page of its own: a 1 MiB pipe filled with 256 of
 * them held 25 KiB, the reader walked a slot per message, and writers slept
 * on an empty pool.
 *
 * The lock held across the caller's fill stalls the other writers'
 * publishes until the commit, as the kernel's pipe_write holds pipe->mutex
 * across its copy from user memory. So the only writer may wait for the
 * lock here (@try false), while with several writers (@try true) a
 * reservation takes the lock only when it is free at once and the
 * reservation is at most half a page; otherwise it takes a page of its own,
 * which never waits for another writer's fill. Measured with 2 writers and
 * 1 reader, 100-byte reserve+commit: 3.4-5.8x the kernel pipe and up to
 * 53,000 system calls per GiB with a page per reservation, 11.7-19.3x and
 * at most 2,400 with this (docs/DESIGN-NOTES.md).
 * Returns the bytes reserved, 0 when the room is too small, -EAGAIN when
 * @try found the lock busy, or an error.
 */
static ssize_t reserve_merge(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt,
			     bool try)
{
	struct up_shm_slot *s;
	uint32_t have, pg;
	int r;

	r = merge_open(w, len, &s, &have, &pg, try);
	if (r <= 0)
		return r;
	/* Relaxed: head is written only under the lock we hold. */
	return resv_merge_give(w, len, iov, iovcnt,
			       w->last_ok ? w->last_head
					  : atomic_load_explicit(&w->p->ln->prod.head,
								 memory_order_relaxed),
			       pg, have);
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
	 * never wrote, and its own would be lost. The lone writer wrote the
	 * slot's head and page itself (last_keep()); only len is looked at. */
	if (w->last_ok) {
		s = slot_at(p, w->resv_head - 1);
		/* Relaxed: written only under the lock we hold. */
		if (atomic_load_explicit(&s->len, memory_order_relaxed) != w->resv_len) {
			wlock_drop(w);
			return proto_error(p);
		}
		have = w->resv_len;
	} else if (last_slot(w, &s, &have, &pg) < 0 || p->g.page_size - have < n ||
	    atomic_load_explicit(&p->ln->prod.head, memory_order_relaxed) != w->resv_head ||
	    pg != w->resv_pg || have != w->resv_len) {
		wlock_drop(w);
		return proto_error(p);
	}
	merge_close(w, s, have + (uint32_t)n);
	up__count(&w->c.bytes_written, n);
	up__count(&w->c.writes, 1);
	return 0;
}

ssize_t up__ring_reserve(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	size_t want_pages, bytes = 0;
	uint32_t i;
	int r, spans = 0;

	if (len == 0 || *iovcnt <= 0)
		return -EINVAL;
	/* The lone writer's short way (see up__ring_write_small()), keeping
	 * the rule below for a writer that has just joined: over half a page,
	 * a page of its own. Relaxed: a hint, as below. */
	if ((len <= ps / 2 ||
	     atomic_load_explicit(&p->ln->state.writers, memory_order_relaxed) == 1) &&
	    short_enter(w, len))
		return resv_merge_give(w, len, iov, iovcnt, w->last_head, w->last_pg,
				       w->last_len);
	if (up__unlikely(w->armed))
		up__ring_disarm(w);
	resv_cancel(w); /* a new reservation replaces the last one */
	if (len < ps && !is_broken(p) &&
	    atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst) != 0) {
		/* Relaxed: a hint; a writer that joins or leaves meanwhile
		 * only changes whether we wait for a busy lock. */
		bool lone = atomic_load_explicit(&p->ln->state.writers, memory_order_relaxed) == 1;

		if (lone || len <= ps / 2) {
			ssize_t got = reserve_merge(w, len, iov, iovcnt, !lone);

			/* 0: no room; -EAGAIN with several writers: the lock
			 * is busy. Either way, take a page of our own. */
			if (got != 0 && !(got == -EAGAIN && !lone))
				return got;
		}
	}
	want_pages = (len + ps - 1) >> p->g.page_shift;
	if (want_pages > UP_END_CACHE_MAX)
		want_pages = UP_END_CACHE_MAX;
	for (;;) {
		if (is_broken(p))
			return -EPROTO;
		if (atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst) == 0)
			return -EPIPE;
		r = cache_fill(w, (uint32_t)want_pages);
		if (r < 0)
			return r;
		if (r > 0)
			break;
		if (w->flags & UP_NONBLOCK) {
			if (sweep_orphans(w))
				continue;
			return -EAGAIN;
		}
		r = wait_ready(w, &p->ln->wr_wait, wr_ready, UP_END_READER);
		if (r < 0)
			return r;
	}
	/* Hand out the cached pages, joining neighbours into one span. */
	for (i = 0; i < w->ncache && i < want_pages && bytes < len; i++) {
		unsigned char *base = page_ptr(p, w->cache[i]);
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
	*iovcnt = spans;
	return (ssize_t)bytes;
}

int up__ring_commit(struct up_end *w, size_t n)
{
	struct up_pipe *p = w->p;
	const uint32_t ps = p->g.page_size;
	uint32_t lens[UP_END_CACHE_MAX];
	uint32_t k = 0;
	bool part;
	int r;

	if (n > w->resv_bytes)
		return -EINVAL;
	if (n == 0 || atomic_load_explicit(&p->ln->state.readers, memory_order_seq_cst) == 0) {
		resv_cancel(w);
		return n == 0 ? 0 : -EPIPE;
	}
	if (w->resv_merge)
		return commit_merge(w, n);
	part = (n & (ps - 1)) != 0; /* the last page has room */
	while (n) {
		lens[k] = n < ps ? (uint32_t)n : ps;
		n -= lens[k];
		k++;
	}
	r = publish(w, w->cache, lens, k);
	/* -EAGAIN: a non-blocking end found the writers' lock held (another
	 * writer's small reservation, say). The reservation stays, so the
	 * caller can commit again; any other error ends it. */
	if (r == -EAGAIN)
		return r;
	w->resv_pages = 0;
	w->resv_bytes = 0;
	if (r < 0)
		return r;
	{
		uint64_t bytes = 0;
		uint32_t i;

		for (i = 0; i < k; i++)
			bytes += lens[i];
		up__count(&w->c.bytes_written, bytes);
	}
	up__count(&w->c.writes, 1);
	cache_shift(w, k);
	if (part)
		claim_next_page(w);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* reader side */

struct freed {
	uint32_t n;
	uint32_t pages[UP_FREE_BATCH];
};

static int freed_flush(struct up_pipe *p, struct freed *f)
{
	int r = up__pool_put(p, f->pages, f->n);

	f->n = 0;
	return r < 0 ? proto_error(p) : 0;
}

/*
 * Which way a coalescing reader copies the page just below the writer's.
 *
 * The pool hands pages out in the order it got them back, and at first in
 * address order, so the page a writer appends to is usually the next one in
 * memory after the page the reader copies out. A copy that runs upwards
 * trains the core's hardware prefetcher upwards too, and at the page's end
 * it runs on into the writer's page: it takes lines the writer is storing
 * to, and each costs the writer a fetch back from the reader's core. So the
 * coalescing reader copies what it takes of that page (the slot before the
 * last of the head it loaded) downwards, and the prefetcher runs into the
 * page below, which the reader emptied already. Other pages are copied
 * upwards: a run of whole pages (64 KiB writes) is read fastest as one
 * ascending stream.
 *
 * Measured (docs/DESIGN-NOTES.md; 1 writer + 1 reader, 100-byte writes,
 * 1 MiB pipe, builds alternating for minutes, rounds grouped by the VM's
 * phase): 23.8 ns a write against 27.0 in fast phases, 30.1 against 40.5
 * in medium ones, 75 against 85 in slow ones. The same 64-byte loop run
 * upwards was no faster than memcpy(): the direction is the gain. Pages
 * handed out in descending order, or shuffled, gained about as much for
 * 100-byte writes but cost 64 KiB writes 60%.
 */
#ifndef UP_READ_DOWN
#define UP_READ_DOWN 1
#endif

/*
 * Under the readers' lock: walk the live slots from tail, copying up to
 * @max bytes out through @c (or, with c == NULL, just consuming them),
 * retiring emptied slots and returning their pages. Returns the bytes taken
 * or -EPROTO. Writes tail (R3) and the pool.
 */
static ssize_t read_locked(struct up_end *rd, struct iov_cur *c, size_t max, bool whole,
			   bool *freed_any)
{
	struct up_pipe *p = rd->p;
	const uint32_t ps = p->g.page_size;
	struct freed f;
	uint32_t t, h, off;
	size_t got = 0;
	int r = 0;

	f.n = 0;
	/* Relaxed: pos is written only under the readers' lock we hold. */
	uint64_t pos0 = atomic_load_explicit(&p->ln->cons.pos, memory_order_relaxed);

	t = up__pos_tail(pos0);
	off = up__pos_off(pos0);
	/* A1: pairs with R1 in publish(): slots [t, h) are filled. */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);
	if (h - t > p->g.slot_count)
		return proto_error(p);
	while (t != h && got < max) {
		struct up_shm_slot *s = slot_at(p, t);
		uint32_t pg;
		uint32_t len;

		/* Coalescing: leave the page the writer appends to alone. */
		if (whole && got > 0 && t + 1 == h)
			break;
		pg = atomic_load_explicit(&s->page, memory_order_relaxed);

		if (pg >= p->g.page_count) {
			r = -EPROTO;
			break;
		}
		for (;;) {
			/* A2: pairs with R2 in try_merge(): bytes below len are
			 * written. */
			len = atomic_load_explicit(&s->len, memory_order_acquire);
			if (len > ps || off > len) {
				r = -EPROTO;
				break;
			}
			if (len > off) {
				size_t k = len - off < max - got ? len - off : max - got;

				if (c && UP_READ_DOWN && whole && t + 2 == h)
					cur_copy_down(c, page_ptr(p, pg) + off, k);
				else if (c)
					cur_copy_to(c, page_ptr(p, pg) + off, k);
				off += (uint32_t)k;
				got += k;
				if (off < len)
					break; /* the caller's buffer is full */
			}
			if (t + 1 != h)
				break; /* not the last slot: it can no longer grow */
			/* The last slot: has a later slot appeared since? Then a
			 * final merge into this one may have landed before it:
			 * re-read len after the head load (A1 orders it). */
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
		 * because a writer may still append to it (see the design note). */
		if (t + 1 == h && len < ps)
			break;
		f.pages[f.n++] = pg;
		t++;
		off = 0;
		if (f.n == UP_FREE_BATCH) {
			/* R3 before the pages return: a writer that gets one of
			 * them must see its slot retired. */
			atomic_store_explicit(&p->ln->cons.pos, up__pos(t, 0),
					      memory_order_release);
			r = freed_flush(p, &f);
			*freed_any = true;
			if (r < 0)
				break;
		}
	}
	if (r < 0)
		return proto_error(p);
	rd->seen_head = h;
	/* R3: we are done with slots before t; pairs with A3 in the writers.
	 * Stored only when it moved: the writers read this line. */
	if (up__pos(t, off) != pos0)
		atomic_store_explicit(&p->ln->cons.pos, up__pos(t, off), memory_order_release);
	if (f.n) {
		*freed_any = true;
		r = freed_flush(p, &f);
		if (r < 0)
			return r;
	}
	return (ssize_t)got;
}

static void peek_unlock(struct up_end *r)
{
	if (r->peek_locked) {
		r->peek_locked = false;
		lock_drop(r, &r->p->ln->rlock.word);
	}
}

/*
 * A reader leaves data behind (its buffer was full, or coalescing left the
 * writer's page) while other readers sleep: wake one, as the kernel's
 * pipe_read does, since the writer woke only one reader for that data
 * (wake.h). Costs one load when nobody sleeps.
 */
static void chain_wake(struct up_end *rd)
{
	struct up_shm_wait *wl = &rd->p->ln->rd_wait;

	/* seq_cst: after our tail store, as a waker's check (wake.h). */
	if (atomic_load_explicit(&wl->nwait, memory_order_seq_cst) == 0)
		return;
	if (rd_ready(rd) > 0)
		wake_line(rd, wl, 1);
}

/*
 * A reader lets go of a peek without consuming (up_consume(0), a refused
 * up_consume, close): the writer's wake for one reader may have been the
 * one that brought it here, so pass it on, or another reader sleeps with
 * the data there for its whole slice (found by a review; test_lock_handoff,
 * peek_let_go_*). Not on the way into a new read or peek: this reader
 * takes the data itself then.
 */
static void peek_let_go(struct up_end *rd)
{
	if (!rd->peek_locked)
		return;
	peek_unlock(rd);
	chain_wake(rd);
}

/*
 * Read coalescing. A reader that keeps finding a few hundred bytes written by
 * a writer on another core and copies them at once makes both cores trade
 * the same cache lines (the last data line and the slot's len) after every
 * write, and every such line costs the writer a cross-core miss inside its
 * locked publish. Measured here: a 100-byte stream ran at a third of the
 * speed it reaches when the reader leaves the writer's page alone.
 *
 * So after UP_STREAK_MIN reads that drained the ring without waiting (the
 * reader keeps up with a streaming writer), the reader waits for a whole
 * page: it watches head, a line the writer stores to once per page, until a
 * page is published past the one it left off in, for at most
 * UP_COALESCE_NS, and then reads the whole pages only, leaving the page the
 * writer is appending to untouched. No program can tell this from a
 * slightly slower writer (read still returns whatever it finds, at least one
 * byte, and blocks no longer than UP_COALESCE_NS more).
 *
 * The streak ends when the writer shows it is not streaming: the reader had
 * to sleep for data (wait_for_data()), a coalescing wait ran out, a
 * non-blocking read found nothing, or the caller's buffer was full. A short
 * spin for data does not end it: a reader that catches up with a streaming
 * writer, as a zero-copy reader (no copy to slow it) does all the time,
 * used to start over after every such spin, take the writer's page 100
 * bytes at a time and trade its lines after each write. In the VM's slow
 * phases that took 100-byte zero-copy from about 28 ns a write to 50-100
 * (docs/DESIGN-NOTES.md). A request/response reader, whose reads all wait,
 * still never coalesces, and one whose reads sometimes find data at once
 * pays at most one UP_COALESCE_NS wait per UP_STREAK_MIN such reads.
 */
#ifndef UP_COALESCE_NS
#define UP_COALESCE_NS  4000u
#endif

/* Returns true when the reader should take whole pages only. */
static bool coalesce(struct up_end *rd)
{
	_Atomic uint32_t *head = &rd->p->ln->prod.head;
	uint64_t t0;
	unsigned int i;

	if (rd->streak < UP_STREAK_MIN)
		return false;
	t0 = now_ns();
	for (i = 0;; i++) {
		/* Relaxed: a hint; read_locked() loads head again with A1. */
		if (atomic_load_explicit(head, memory_order_relaxed) - rd->seen_head != 0)
			return true;
		if ((i & 15) == 15 && now_ns() - t0 >= UP_COALESCE_NS) {
			rd->streak = 0; /* the writer stopped streaming */
			return false;
		}
		up__cpu_relax();
	}
}

/* A reader found nothing: wait for data. A sleep ends the streak (see
 * above); a spin does not. */
static int wait_for_data(struct up_end *rd)
{
	uint64_t slept = atomic_load_explicit(&rd->c.waits, memory_order_relaxed);
	int r = wait_ready(rd, &rd->p->ln->rd_wait, rd_ready, UP_END_WRITER);

	if (atomic_load_explicit(&rd->c.waits, memory_order_relaxed) != slept)
		rd->streak = 0;
	return r;
}

ssize_t up__ring_read(struct up_end *rd, const struct iovec *iov, int iovcnt, size_t len)
{
	bool waited = false, whole;

	struct up_pipe *p = rd->p;
	struct iov_cur c;
	ssize_t n;
	int r;

	if (len == 0)
		return 0;
	if (up__unlikely(rd->armed))
		up__ring_disarm(rd);
	peek_unlock(rd);
	cur_init(&c, iov, iovcnt);
	whole = coalesce(rd);
	for (;;) {
		bool freed = false;
		uint32_t writers;

		if (is_broken(p))
			return -EPROTO;
		/* Load writers before looking at the ring: if it is 0 here,
		 * every publish happened before and the walk below sees it. */
		writers = atomic_load_explicit(&p->ln->state.writers, memory_order_seq_cst);
		r = lock_take(rd, &p->ln->rlock.word, rd->flags & UP_NONBLOCK);
		if (r < 0)
			return r;
		n = read_locked(rd, &c, len, whole, &freed);
		lock_drop(rd, &p->ln->rlock.word);
		if (freed)
			wake_writers(rd, n >= 0 && (size_t)n < len);
		if (n != 0) {
			if (n > 0) {
				chain_wake(rd);
				up__count(&rd->c.bytes_read, (uint64_t)n);
				up__count(&rd->c.reads, 1);
				/* Found data without waiting and took all of
				 * it the buffer allowed: keeping up with a
				 * streaming writer. */
				if ((size_t)n == len)
					rd->streak = 0;
				else if (!waited)
					rd->streak++;
			}
			return n;
		}
		if (writers == 0)
			return 0; /* end of stream */
		if (rd->flags & UP_NONBLOCK) {
			rd->streak = 0;
			return -EAGAIN;
		}
		waited = true;
		r = wait_for_data(rd);
		if (r < 0)
			return r;
	}
}

/* Under the readers' lock: the readable spans, without consuming. */
static ssize_t peek_locked(struct up_end *rd, struct iovec *iov, int *iovcnt, bool whole)
{
	struct up_pipe *p = rd->p;
	uint32_t t, h;
	size_t got = 0;
	int spans = 0;

	uint64_t pos = atomic_load_explicit(&p->ln->cons.pos, memory_order_relaxed);
	uint32_t off = up__pos_off(pos);

	t = up__pos_tail(pos);
	/* A1: pairs with R1 in publish(). */
	h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);
	if (h - t > p->g.slot_count)
		return proto_error(p);
	rd->seen_head = h;
	for (; t != h; t++, off = 0) {
		struct up_shm_slot *s = slot_at(p, t);
		uint32_t pg, len;
		unsigned char *base;

		/* Coalescing: leave the page the writer appends to alone. */
		if (whole && got > 0 && t + 1 == h)
			break;
		pg = atomic_load_explicit(&s->page, memory_order_relaxed);
		/* A2: pairs with R2 in try_merge(). */
		len = atomic_load_explicit(&s->len, memory_order_acquire);

		if (pg >= p->g.page_count || len > p->g.page_size || off > len)
			return proto_error(p);
		if (len == off)
			continue;
		base = page_ptr(p, pg) + off;
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
	}
	*iovcnt = spans;
	return (ssize_t)got;
}

ssize_t up__ring_peek(struct up_end *rd, struct iovec *iov, int *iovcnt)
{
	struct up_pipe *p = rd->p;
	bool waited = false, whole;
	ssize_t n;
	int r;

	if (*iovcnt <= 0)
		return -EINVAL;
	if (up__unlikely(rd->armed))
		up__ring_disarm(rd);
	/* Only on a fresh peek: one that re-peeks under the held lock must
	 * not stall the writer's page-boundary publishes. */
	whole = !rd->peek_locked && coalesce(rd);
	for (;;) {
		uint32_t writers;
		int cnt = *iovcnt;

		if (is_broken(p)) {
			peek_unlock(rd);
			return -EPROTO;
		}
		writers = atomic_load_explicit(&p->ln->state.writers, memory_order_seq_cst);
		if (!rd->peek_locked) {
			r = lock_take(rd, &p->ln->rlock.word, rd->flags & UP_NONBLOCK);
			if (r < 0)
				return r;
			rd->peek_locked = true;
		}
		n = peek_locked(rd, iov, &cnt, whole);
		if (n != 0) {
			if (n < 0) {
				peek_unlock(rd);
			} else {
				/* As in up__ring_read(): found without waiting,
				 * and not cut short by the caller's vector (still
				 * in *iovcnt until the store below). */
				if (cnt == *iovcnt)
					rd->streak = 0;
				else if (!waited)
					rd->streak++;
				*iovcnt = cnt;
			}
			return n;
		}
		peek_unlock(rd);
		if (writers == 0) {
			*iovcnt = 0;
			return 0;
		}
		if (rd->flags & UP_NONBLOCK) {
			rd->streak = 0;
			return -EAGAIN;
		}
		waited = true;
		r = wait_for_data(rd);
		if (r < 0)
			return r;
	}
}

int up__ring_consume(struct up_end *rd, size_t n)
{
	struct up_pipe *p = rd->p;
	bool freed = false;
	ssize_t avail;
	int r;

	if (!rd->peek_locked) {
		r = lock_take(rd, &p->ln->rlock.word, rd->flags & UP_NONBLOCK);
		if (r < 0)
			return r;
		rd->peek_locked = true;
	}
	if (n == 0) {
		peek_let_go(rd);
		return 0;
	}
	/* Count what is readable first: consume is all or nothing. */
	avail = 0;
	{
		uint64_t pos = atomic_load_explicit(&p->ln->cons.pos, memory_order_relaxed);
		uint32_t t = up__pos_tail(pos);
		uint32_t h = atomic_load_explicit(&p->ln->prod.head, memory_order_acquire);

		if (h - t > p->g.slot_count) {
			peek_unlock(rd);
			return proto_error(p);
		}
		uint32_t off = up__pos_off(pos);

		for (; t != h && (size_t)avail < n; t++, off = 0) {
			struct up_shm_slot *s = slot_at(p, t);
			uint32_t len = atomic_load_explicit(&s->len, memory_order_acquire);

			if (len > p->g.page_size || off > len) {
				peek_unlock(rd);
				return proto_error(p);
			}
			avail += len - off;
		}
	}
	if ((size_t)avail < n) {
		peek_let_go(rd);
		return -EINVAL;
	}
	avail = read_locked(rd, NULL, n, false, &freed);
	peek_unlock(rd);
	if (freed)
		wake_writers(rd, false);
	if (avail < 0)
		return (int)avail;
	chain_wake(rd);
	up__count(&rd->c.bytes_read, (uint64_t)avail);
	up__count(&rd->c.reads, 1);
	return 0;
}

/* An endpoint is closing: give back what it holds. */
void up__ring_end_closing(struct up_end *e)
{
	struct up_pipe *p = e->p;

	up__ring_disarm(e);
	if (e->flags & UP_RD) {
		peek_let_go(e);
		return;
	}
	resv_cancel(e);
	wlock_unbias(e);
	if (e->ncache && !is_broken(p)) {
		/* Pages taken but never published go back to the pool; put is
		 * serialised by the readers' lock. Never block on it in close:
		 * if it stays busy (a live peer sitting on it, or a forged
		 * holder), the pages stay tagged and a later sweep returns
		 * them once this end is gone. */
		if (lock_take(e, &p->ln->rlock.word, true) == 0) {
			up__pages_untag(p, e->cache, e->ncache);
			if (up__pool_put(p, e->cache, e->ncache) < 0)
				up__mark_broken(p);
			lock_drop(e, &p->ln->rlock.word);
			wake_line(e, &p->ln->wr_wait, UP_WAKE_ALL);
		}
	}
	e->ncache = 0;
	e->resv_pages = 0;
	e->resv_bytes = 0;
}
