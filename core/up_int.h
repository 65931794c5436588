/* SPDX-License-Identifier: MIT */
/*
 * up_int.h - private structures shared by the files of core/.
 */
#ifndef UP_CORE_INT_H
#define UP_CORE_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "uringpipe.h"
#include "copy.h"
#include "shm_layout.h"
#include "wake.h"

#if defined(__GNUC__)
#define up__likely(x)   __builtin_expect(!!(x), 1)
#define up__unlikely(x) __builtin_expect(!!(x), 0)
#else
#define up__likely(x)   (x)
#define up__unlikely(x) (x)
#endif

/* Ask for the line at @p in a state this core may store to (a hint: no
 * fault, no ordering). Intel cores from Core 2 to Haswell, which lack
 * PREFETCHW, run its encoding as a NOP; x86-64 cores older than those are
 * not supported. */
static inline void up__prefetch_store(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

static inline void up__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * The geometry, copied out of the header once at create/attach and never
 * re-read from shared memory: a peer that rewrites the header later cannot
 * change what this process believes the bounds are.
 */
struct up__geom {
	uint32_t page_size;
	uint32_t page_shift;
	uint32_t page_count;
	uint32_t slot_count;
	uint32_t slot_mask;
	uint32_t max_ends;
	uint32_t flags;
	uint32_t keep_pages;  /* free pages kept resident (pool trim) */
	uint32_t spare_pages; /* pool pages beyond the capacity (shm_layout.h) */
	uint32_t sys_page;    /* the kernel's page: what a fault or a madvise takes */
	uint64_t trim_ns;     /* minimum time between two trims of one end */
	struct up_shm_offsets off;
};

#define UP_DEFAULT_TRIM_MS  100u
#define UP_DEFAULT_MIN_KEEP ((size_t)64 * 1024)

/* Per-endpoint counters. Written by the endpoint's one thread with relaxed
 * load+store (no RMW: nobody else writes them), read by up_stats from any
 * thread. */
struct up__counters {
	_Atomic uint64_t bytes_written, bytes_read, writes, reads;
	_Atomic uint64_t waits, wakes, syscalls;
	_Atomic uint64_t revokes; /* writer: biases of another end taken back */
	_Atomic uint64_t timeouts; /* sleeps that ended with their slice, unwoken */
	_Atomic uint64_t trims;    /* reader: trim looks that went through the pool */
	/* Reader: waits that ended in a spin after an early wake, early
	 * wakes whose spin ran out first, and the ns those spins took
	 * (early.c, the early wake). */
	_Atomic uint64_t early, early_misses, early_spin_ns;
};

static inline void up__count(_Atomic uint64_t *c, uint64_t n)
{
	/* Relaxed: a statistic; single writer, so load+store is not a race. */
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

struct up_pipe {
	_Atomic uint32_t refs; /* the handle (until release) + each open end */
	bool released;         /* up_pipe_release called */
	int fd;                /* our description: it holds our ends' liveness locks */
	/* up_pipe_fd()'s: another description of the memfd, holding no lock,
	 * made at its first call (-1 until then). */
	_Atomic int share_fd;
	unsigned char *base;   /* the mapping */
	struct up__geom g;

	/* Pointers into the mapping, computed from g.off, never from shm. */
	struct up_shm_hdr *hdr;
	struct up_shm_lines *ln;
	struct up_shm_end *ends;
	_Atomic uint32_t *under;
	struct up_shm_slot *slots;
	_Atomic uint32_t *pool;
	_Atomic uint32_t *owner;
	unsigned char *pages;

	int numa_node;          /* where the pages are (read back) */
	/* live.c: the up__live_gen() under which fd became this process's
	 * own open file description, and the entries this handle holds in
	 * this process (bit i: entry i), which no liveness check asks about. */
	uint32_t live_gen;
	_Atomic uint64_t own;
	struct up_pipe *proc_next, *proc_prev; /* every handle of the process (fork.c) */
	bool unmapped; /* a fork child lost the mapping (live.c): ends refuse */
	/* closewatch.c, under its lock: the inotify watch on fd (-1: none)
	 * and the generation of the instance it was made in. */
	int cw_wd;
	uint32_t cw_gen;
	struct up_pipe *cw_next; /* the next handle of the same watch */
	pthread_mutex_t mu;     /* guards ends_list and closed */
	struct up_end *ends_list;
	struct up__counters closed; /* counters of closed ends, folded in */
};

#define UP_END_CACHE_MAX 256u
#define UP_MAX_PEER_FDS  16
#define UP_CAME_READERS  1u
#define UP_CAME_WRITERS  2u

#define UP_ARMED_NONE     0
#define UP_ARMED_POLL     1 /* up_poll_arm(): our poll ring waits */
#define UP_ARMED_EXTERNAL 2 /* the caller's own ring waits (uringpipe/uring.h) */
/* What an armed end waits on (wlock.c, up__wlock_poll_arm()). */
#define UP_ARMED_ON_LINE  0 /* its side's wait line (nwait, npoll counted) */
#define UP_ARMED_ON_WORD  1 /* the writers' lock word (wlock.npoll counted) */
#define UP_ARMED_ON_BUSY  2 /* a bias owner's busy word (nothing counted) */
#define UP_ARMED_ON_NONE  3 /* nothing: the fd readable at once, an early window (poll.c) */
/* Reads that drain the ring without waiting before a reader coalesces
 * (reader.c, up__coalesce()), shifted left by the end's coalesce_backoff,
 * which a coalescing wait that ran out raises up to UP_BACKOFF_MAX. */
#define UP_STREAK_MIN    4u
#define UP_BACKOFF_MAX   10u
#define UP_SPIN_INIT_NS  20000u /* first spin budget before sleeping */
#define UP_SPIN_MIN_NS   10000u
#define UP_SPIN_MAX_NS   100000u /* and the longest sleep it learns from (wait.c) */
/* The longest spin while the other side is inside a call that ends the
 * wait (wait.c, peer_inside()): a reader's work on a pipe's worth. */
#define UP_SPIN_INSIDE_NS 500000u
/* The early wake (early.c): gaps agree, and a reader spins for data past
 * its due time, within an eighth of the gap, in these bounds; only gaps
 * up to UP_EARLY_GAP_MAX_NS are learnt (beyond, a wake's latency is
 * noise). */
#define UP_EARLY_WINDOW_MIN_NS 30000u
#define UP_EARLY_WINDOW_MAX_NS 60000u
#define UP_EARLY_GAP_MAX_NS  20000000u

struct up_end {
	struct up_pipe *p;
	int flags;            /* UP_RD/UP_WR | UP_NONBLOCK */
	uint32_t idx;         /* entry in the segment's endpoint table */
	_Atomic uint32_t *busy; /* &p->ends[idx].busy, set with idx */
	uint32_t lock_id;     /* up__lock_id(): the value this end writes into locks */
	uint32_t tag;         /* owner tag of pages it holds: gen << 8 | idx + 1 */
	pid_t pid;            /* this process, cached at open (ends do not survive fork) */
	struct up__waker *waker;
	struct up__counters c;
	uint32_t spin_ns;     /* adaptive spin budget before sleeping */
	/*
	 * Reader: the early wake (early.c). The gap between the ends of its
	 * waits for data, learnt; when the last ended, and whether a wake
	 * ended it (early_late: so up to a wake's latency after the data
	 * came, or dated back by an estimate of that, early.c); poll mode's
	 * plan for the wait in progress (0: none): the
	 * early wake's time and when the window after it closes; how late
	 * its timed early sleeps end, learnt (0: none yet); waits to let
	 * pass after an early wake that missed, how many gaps in a row
	 * agreed, and such misses in a row; whether a poll-mode wait is in
	 * progress (armed since the data last came), and whether the plan's
	 * wake is a timeout's (its lateness is learnt then). Ordered by size.
	 */
	uint32_t early_gap;
	uint64_t early_seen;
	uint64_t early_wake, early_until;
	uint32_t early_lat;
	uint16_t early_skip;
	uint8_t early_hits, early_misses;
	bool early_late, early_polling, early_timed;
	int err;              /* deferred error after a partial transfer */

	/* Writer: pages taken from the pool but not yet published (reserve
	 * spans, or left over from a batch). */
	uint32_t ncache;
	uint32_t take_batch;  /* pages taken from the pool at once */
	/* Reader: slept for data or armed since its last read; the next read
	 * hands the last page it frees to a writer (pagepool.c). */
	bool hand_off;
	uint32_t tail_cache;  /* last tail seen (publish's overrun guard) */
	uint32_t resv_pages;  /* first resv_pages of cache are reserved */
	size_t resv_bytes;   /* 0: no reservation */
	/* The reservation is the room at the end of the last live page, and
	 * this end holds the writers' lock until commit (see reserve_merge()).
	 * Meaningful only while resv_bytes != 0 (up__resv_is_merge()): a
	 * merge reservation is never empty, and the short ways leave it set
	 * from one reservation to the next, a store saved on each. */
	bool resv_merge;
	bool resv_fill;       /* this reservation stored prod.fill_until */
	/* Where a merge reservation's room is: the slot's index, its page and
	 * its len when reserved. Commit finds the same or fails (-EPROTO).
	 * Read only while !last_ok: with last_ok the room is after last_len
	 * in slot last_head - 1, and the short way does not write these. */
	uint32_t resv_head, resv_pg, resv_len;
	/* Its side's lock is biased to this end (bias.h); bias_off
	 * keeps it from ever being biased (set by tests of the plain lock). */
	bool biased;
	bool bias_off;
	/* Writer, while biased: the last live slot as this end published or
	 * grew it (writer.c, last_keep()). */
	bool last_ok;
	uint32_t last_head, last_len, last_pg;
	/* While last_ok: up__slot_at(last_head - 1) and up__page_ptr(last_pg),
	 * kept so that the short ways compute neither per call. */
	struct up_shm_slot *last_slot;
	unsigned char *last_base;
	/* Writer: the base page last populated ahead (writer.c, populate_ahead()). */
	unsigned char *ahead;
	uint32_t cache[UP_END_CACHE_MAX];
	/* Writer: streaming or plain stores for whole pages (copy.h). */
	struct up__stores stores;

	/* Announced as a sleeper without sleeping (poll mode). */
	int armed;            /* UP_ARMED_* */
	int armed_on;         /* ... on what (UP_ARMED_ON_*) */
	/* Not armed, but the poll ring's last wait is parked (poll.c): looked
	 * at by a call about to return -EAGAIN (io.c). */
	bool parked;

	/* Reader: holding the readers' lock between peek and consume; the
	 * peek took the short way (short.h) and showed the kept slot from
	 * peek_off, where the position still is. */
	bool peek_locked, peek_fast;
	uint32_t peek_off;
	/* Reader: the bytes a fresh peek shows before it stops walking
	 * (0: every span), and what the last peek showed (peek.c). */
	size_t peek_want, peek_shown;
	/* Reader: the readers' position as this end last stored it (ring.h,
	 * up__pos_take()). */
	uint64_t pos_last;
	/* Reader: consecutive reads that found small amounts without waiting
	 * (a fast writer streaming small writes); see reader.c. */
	uint32_t streak;
	/* Reader: UP_STREAK_MIN << this is the streak that coalesces; one
	 * more for each coalescing wait that ran out, one less for each that
	 * saw a page come (reader.c, up__coalesce()). */
	uint32_t coalesce_backoff;
	uint32_t seen_head;   /* head when this end last read (coalescing) */
	/* Reader: the slot it left part-read, with its page and len as checked
	 * then; valid while fin_valid and no other reader has moved the
	 * position (reader.c). fin_last: it was the last live slot, so len may
	 * have grown since and reading up to fin_len does not retire it. */
	uint32_t fin_t, fin_pg, fin_len;
	bool fin_last;
	bool trim_due;        /* reader: see trim_at below */
	/* Reader: its last read or peek ended where the writers' data ends
	 * (or at the page they append to, coalescing): reader.c. */
	bool caught;
	bool fin_valid;

	/* Peer-death watching (peer.c): pidfds of the processes whose death
	 * should wake this end while it sleeps, then, when peer_ino, the
	 * process's inotify instance (closewatch.c; not ours to close) at
	 * peer_pidfds[npeer], and the instance's seq at our last look. */
	int peer_pidfds[UP_MAX_PEER_FDS + 1];
	int npeer;
	bool peer_ino;
	uint32_t cw_seen;
	uint32_t cw_tried;    /* peers_gen when the watch was last tried */
	uint32_t peers_gen;   /* ends_gen + 1 when built, 0 = never */
	uint32_t peers_role;
	int peers_blind;      /* live peers whose death no pidfd of ours signals */
	/* Liveness while streaming (up__live_tick()): calls until the next
	 * look at the clock, when the last check ran, and the sides seen to
	 * have come (bit 0 readers, bit 1 writers; counts_repair()). */
	uint32_t live_calls;
	uint64_t pidns;       /* this process's pid namespace (live.c) */
	uint64_t live_ns;
	/* Reader: when this end found its process may not call membarrier()
	 * and set rd_wait.nofence (wait.c, up__wait_fence()); 0: not yet. */
	uint64_t nofence_ns;
	uint32_t came;        /* UP_CAME_* */
	uint32_t sweep_gen;    /* ends_gen + 1 at the last orphan sweep */
	/* Reader: the trim's last look (reclaim.c, up__pool_trim()): when,
	 * the pool's get and put then, and whether pages beyond the need were left
	 * for a later look (poll mode then ticks, as for a blind peer). */
	uint64_t trim_at;
	uint32_t trim_get, trim_put;

	struct up_end *next, *prev;
	/* up_set_timeout() (UP_NO_TIMEOUT: none), the current call's deadline
	 * (0: not yet sleeping), where this end sleeps and up_wakeup()'s kick
	 * (cancel.c); no_cancel while it must finish what it started. */
	uint64_t timeout_ns, deadline_ns;
	_Atomic uintptr_t sleep_on;
	/* Every open end of this process (fork.c), and the entry claimed
	 * for a forked child's copy while a fork is under way. */
	struct up_end *proc_next, *proc_prev;
	uint32_t fork_idx, fork_state;
	_Atomic uint32_t kick;
	bool no_cancel;
	/* The UP_HELD_* bits this end last stored in its entry's held word
	 * (lock.h): its own copy, so taking a lock costs one store, no load. */
	uint32_t held;
	/* When this end first saw the pool's pages lost (reclaim.c,
	 * pool_lost()); 0: not seen since. */
	uint64_t pool_lost_ns;
};

/* Whether @w holds a merge reservation (see resv_merge). */
static inline bool up__resv_is_merge(const struct up_end *w)
{
	return w->resv_bytes != 0 && w->resv_merge;
}

/* shm.c: the segment; a pipe found inconsistent is marked broken for good. */
int up__shm_create(const struct up_config *cfg, struct up_pipe **out);
int up__shm_attach(int fd, struct up_pipe **out);
void up__shm_unmap(struct up_pipe *p);
void up__mark_broken(struct up_pipe *p);

/* pipe.c */
void up__pipe_put(struct up_pipe *p);

/* The data path's entry points (ring.h lists its files). */
ssize_t up__ring_write(struct up_end *w, const struct iovec *iov, int iovcnt, size_t len);
ssize_t up__ring_read(struct up_end *r, const struct iovec *iov, int iovcnt, size_t len);
ssize_t up__ring_reserve(struct up_end *w, size_t len, struct iovec *iov, int *iovcnt);
int up__ring_commit(struct up_end *w, size_t n);
ssize_t up__ring_peek(struct up_end *r, struct iovec *iov, int *iovcnt);
int up__ring_consume(struct up_end *r, size_t n);
int up__ring_arm(struct up_end *e, bool locks, _Atomic uint32_t **word, uint32_t *expect);
int up__ring_poll_arm(struct up_end *e);
void up__ring_disarm(struct up_end *e);
void up__ring_parked_look(struct up_end *e);

/* pagepool.c: the free-page ring; batch take (writers) and put (readers). */
int up__pool_take(struct up_pipe *p, uint32_t *pages, uint32_t want, uint32_t leave,
		  uint32_t tag);
int up__pool_put(struct up_pipe *p, const uint32_t *pages, uint32_t n);
void up__pages_untag(struct up_pipe *p, const uint32_t *pages, uint32_t n);
uint32_t up__pages_orphaned(struct up_pipe *p, uint32_t *pages, uint32_t max);
static inline uint32_t up__owner_tag(uint32_t state, uint32_t idx)
{
	return (state & ~UP_END_ROLE_MASK) | (idx + 1);
}
/* The owner tag of a page in a live slot (pagepool.c): names no endpoint
 * (its low byte, an end index + 1 in a tag, is 0). */
#define UP_OWNER_RING 0xffffff00u
int up__pages_to_ring(struct up_pipe *p, const uint32_t *pages, uint32_t n, uint32_t tag);
void up__pages_from_ring(struct up_pipe *p, const uint32_t *pages, uint32_t n);
/* Page @pg is in a live slot as far as its tag says: 1 compare, before
 * anyone reads or appends to it through a slot. */
static inline bool up__page_in_ring(struct up_pipe *p, uint32_t pg)
{
	/* relaxed: stored before the [head] release that published the slot
	 * (up__pages_to_ring()), which the caller's [head] acquire or the
	 * writers' lock ordered before this load. */
	return atomic_load_explicit(&p->owner[pg], memory_order_relaxed) == UP_OWNER_RING;
}

/* The value an endpoint writes into a lock word: like its owner tag, but the
 * generation cut to 22 bits so UP_LOCK_FLAGS stay free. The generation
 * tells a holder that died and whose entry was claimed again (same index)
 * from the new endpoint in that entry. */
static inline uint32_t up__lock_id(uint32_t state, uint32_t idx)
{
	return (state & ~UP_END_ROLE_MASK & ~UP_LOCK_FLAGS) | (idx + 1);
}

/* The lock id a lock word names (its holder, or a take-back's claimer). */
static inline uint32_t up__lock_owner(uint32_t word)
{
	return word & ~UP_LOCK_FLAGS;
}
uint32_t up__pool_free(struct up_pipe *p);
int up__pool_take_hot(struct up_pipe *p, uint32_t *page, uint32_t tag);
bool up__pool_put_hot(struct up_pipe *p, uint32_t page);
long up__pages_punch(struct up_pipe *p, uint32_t *pages, uint32_t n, uint64_t *syscalls);
void up__pool_init(struct up_pipe *p);

/* peer.c: the endpoint table and dead-peer detection. */
/* The pid a forking parent claims its child's entries with; the child
 * stores its own (fork.c). */
#define UP_PID_HANDOVER (-1)
int up__end_claim(struct up_pipe *p, uint32_t role, pid_t pid, uint32_t which, uint64_t pidns,
		  uint32_t *idx, uint32_t *state);
void up__end_free(struct up_pipe *p, uint32_t idx, bool drop);
void up__end_count(struct up_pipe *p, uint32_t idx, uint32_t state, _Atomic uint32_t *count);
void up__end_uncount(struct up_pipe *p, uint32_t idx, uint32_t state, _Atomic uint32_t *count);
/* The state an end's entry was claimed with (peer.c), from its owner tag. */
static inline uint32_t up__end_state(uint32_t tag, uint32_t role)
{
	return (tag & ~UP_END_ROLE_MASK) | role;
}
void up__end_handed(struct up_pipe *p, uint32_t idx);
void up__end_mine(struct up_pipe *p, uint32_t idx);
int up__peers_reap(struct up_end *e);
bool up__lock_owner_gone(struct up_end *e, uint32_t owner);
/* @role: UP_END_READER, UP_END_WRITER, or UP_PEERS_ANY (every peer). */
#define UP_PEERS_ANY 0xffffffffu
int up__peers_watch(struct up_end *e, uint32_t role);
void up__peers_closewatch(struct up_end *e);
int up__peers_nfds(const struct up_end *e);
void up__peers_forget(struct up_end *e);
/* Poll mode: is there a peer whose death no pidfd of e->peer_pidfds will
 * signal (peers_blind), or no pidfd at all (a peer process that comes after
 * the arm would be watched by none)? Then the pollfd turns readable every
 * UP_WAIT_SLICE_NS or so while armed (pollfd_futex.c, poll_ring.c). */
static inline bool up__peers_blind(const struct up_end *e)
{
	return e->peers_blind != 0 || e->npeer == 0;
}

/* fork.c: ends inherited across fork(2); the process's list of open ends. */
void up__fork_track(struct up_end *e);
void up__fork_untrack(struct up_end *e);
void up__fork_track_pipe(struct up_pipe *p);
void up__fork_untrack_pipe(struct up_pipe *p);
/* Run @fn(@e) if @e is an open end of this process, holding the list's
 * lock (so @e stays open meanwhile): 0, or -EBADF. */
int up__ends_with(struct up_end *e, void (*fn)(struct up_end *));


/* cancel.c: timeouts and up_wakeup(). */
#define UP_NO_TIMEOUT UINT64_MAX
int up__sleep_begin(struct up_end *e, _Atomic uint32_t *word, bool seq, uint64_t *slice_ns);
void up__sleep_end(struct up_end *e);
void up__kick(struct up_end *e);

/* fence.c: asymmetric fences. Has process @self registered for the
 * private and the global expedited barriers (registering on first call)?
 * Then up__membarrier(): a full barrier on every running thread that
 * @reach names, 0 or -errno. */
bool up__membarrier_registered(pid_t self, uint64_t *syscalls);
/* How far a barrier must reach (fence.c has which command does what). */
enum up_fence_reach {
	UP_FENCE_OWN,      /* the threads of this process */
	UP_FENCE_ANY,      /* every process; exclusion rests on it */
	UP_FENCE_ANY_FAST, /* every registered process, as a rule; a wake rests on it */
};
int up__membarrier(enum up_fence_reach reach, uint64_t *syscalls);

/* live.c: liveness by OFD locks on the memfd, one byte per entry. */
#define UP_LIVE_OWNER    0u /* the entry's owner */
#define UP_LIVE_HANDOVER 1u /* a forking parent, for its child's entry */
uint32_t up__live_gen(void);
void up__live_forked(void);
/* closewatch.c: the process's inotify instance, watching @p's memfd (or
 * -errno); dropped with the last handle; drained (returns its seq). */
int up__closewatch_fd(struct up_pipe *p, uint64_t *syscalls);
void up__closewatch_drop(struct up_pipe *p);
uint32_t up__closewatch_drain(int fd, uint64_t *syscalls);
uint32_t up__closewatch_seq(void);
/* For a sleep that cannot poll @fd (the futex backend): the thread that
 * wakes such sleepers on a close (closewatch.c). */
void up__closewatch_serve(int fd);
bool up__closewatch_served(void);
void up__closewatch_forked(void);
int up__live_reopen(int fd);
int up__live_private(struct up_pipe *p, uint64_t *syscalls);
int up__live_hold(struct up_pipe *p, uint32_t idx, uint32_t which);
void up__live_drop(struct up_pipe *p, uint32_t idx);
int up__live_check(struct up_pipe *p, uint32_t idx, uint64_t *syscalls);
uint64_t up__live_pidns(void);

static inline bool up__live_own(struct up_pipe *p, uint32_t idx)
{
	/* relaxed: bits of this process's own entries. A bit is set before the
	 * claim's CAS and cleared after the free's store, so a thread that read
	 * the entry claimed (acquire) sees the bit of an end of ours. */
	return (atomic_load_explicit(&p->own, memory_order_relaxed) >> idx) & 1;
}

/* The barrier that reaches the end whose lock id is @owner: the private one
 * when the end is this process's own (fence.c), else @far. */
static inline enum up_fence_reach up__reach_of(struct up_pipe *p, uint32_t owner,
					       enum up_fence_reach far)
{
	uint32_t idx = owner & UP_END_ROLE_MASK;

	return idx != 0 && idx <= p->g.max_ends && up__live_own(p, idx - 1) ? UP_FENCE_OWN : far;
}

/* numa.c */
int up__numa_bind(void *addr, size_t len, int node);
int up__numa_node_of(const void *addr);
/* 1: @node is a node to bind to; 0: nothing to bind (-1, or node 0 on a
 * machine without NUMA); -EINVAL: no such node. Any thread. */
int up__numa_check(int node);
/* MPOL_BIND [addr, addr + len) to @node (already checked) with the
 * MPOL_MF_* @flags. 0 or -errno (-ENOSYS without libnuma). */
int up__numa_mbind(void *addr, size_t len, int node, unsigned int flags);

/* alloc.c: the only caller of the process-private allocator. */
void *up__calloc(size_t n, size_t sz);
void up__free(void *ptr);

#endif /* UP_CORE_INT_H */
