/* SPDX-License-Identifier: MIT */
/*
 * shm_layout.h - the fixed-width layout of a pipe's shared segment.
 *
 * Everything here is ABI between processes that may run different builds of
 * the library: fields have fixed widths, the header carries a magic, a layout
 * version and a checksum, and every region's offset is a pure function of the
 * geometry (page size, page count, slot count), so a process attaching a
 * segment recomputes the offsets instead of trusting stored ones.
 *
 *   offset 0                 struct up_shm_hdr      immutable after creation
 *   + 2 lines                struct up_shm_state    reader/writer counts, broken flag
 *   + 1 line                 struct up_shm_prod     head                      (producers)
 *   + 1 line                 struct up_shm_cons     tail + offset in its slot (consumers)
 *   + 1 line                 struct up_shm_lock     writers' lock
 *   + 1 line                 struct up_shm_lock     readers' lock
 *   + 1 line                 struct up_shm_pool_get pool index writers take at
 *   + 1 line                 struct up_shm_pool_put pool index readers return at
 *   + 1 line                 struct up_shm_wait     readers' sleep line (futex)
 *   + 1 line                 struct up_shm_wait     writers' sleep line (futex)
 *   ends[UP_SHM_MAX_ENDS]    struct up_shm_end      who holds an endpoint
 *   under[2][UP_SHM_MAX_ENDS] uint32 lock words     what each end's last
 *                                                   take-back claim (or its
 *                                                   attempt) of the
 *                                                   readers' (0) and the
 *                                                   writers' (1) lock
 *                                                   replaced (takeback.c)
 *   slots[slot_count]        struct up_shm_slot     the ring (cf. pipe_buffer)
 *   pool[slot_count]         uint32 page indices    free pages, a ring
 *   owner[page_count]        uint32 tags            who holds a page taken from
 *                                                   the pool and not yet
 *                                                   published (see pagepool.c)
 *   (aligned to 4 KiB)
 *   pages[page_count]        page_size bytes each   data
 *
 * Each line written by one side sits alone on its 64-byte line, so a
 * producer never invalidates the consumer's line and vice versa (DPDK
 * rte_ring_core.h does the same). The wait lines are written only when
 * somebody sleeps, so the hot path merely reads them from its own cache.
 *
 * Nothing read from this segment is trusted after attach: the immutable
 * header is copied into a private struct up__geom once and never re-read,
 * and every index, length and page number taken from the shared lines is
 * range-checked at the point of use (the data path's files, which ring.h
 * lists; pagepool.c for page indices).
 */
#ifndef UP_CORE_SHM_LAYOUT_H
#define UP_CORE_SHM_LAYOUT_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define UP_SHM_MAGIC      0x455049504752554eull /* "NURGPIPE" little-endian */
/* 4: the writers' lock's npoll and UP_ARMED_LINE_WLOCK (poll-mode writers
 * wait on the lock word; a peer of version 3 would wake one of them).
 * 5: spare_pages in the header (a peer of version 4 would take the spare
 * pages and hold more than the capacity).
 * 6: UP_COUNT_EVER in the reader and writer counts (a peer of version 5
 * would read a count with it as thousands of open ends).
 * 7: endpoint entries of 32 bytes (pidns, held), and liveness by an OFD
 * lock per entry on the memfd (a peer of version 6 would take a live
 * entry in another pid namespace for a dead one).
 * 8: pages in live slots tagged UP_OWNER_RING in owner[], and the readers'
 * lock's bias naming the last reader to move cons.pos (a peer of version 7
 * would sweep a live page back into the pool as an orphan, and move pos
 * without leaving its id).
 * 9: a drop hands a lock word straight to the sleeper named in the lock's
 * handoff (a peer of version 8 would find a lock word naming itself, which
 * it took for a corrupt segment).
 * 10: the readers' lock is biased to a lone reader as the writers' lock is
 * to a lone writer (rlock.bias, the owner's busy); the last reader to move
 * cons.pos is named in cons.pos_by; the lone writer grows len with a
 * release store, and a sleeping reader supplies the fence with membarrier()
 * (rd_wait.nofence when it cannot). A peer of version 9 would take rlock's
 * word beside a reader inside through the bias, and sleep through a len
 * grown under its announcement.
 * 11: pput.hot, a free page outside the pool's ring (a peer of version 10
 * would not count it free, and a writer of it would wait for ever for the
 * last page the capacity allows while it sat there).
 * 12: an endpoint entry's counted, which says whether its end is in its
 * side's count (a peer of version 11 would not mark its ends, and a reaper
 * of this version would leave them counted when they die).
 * 13: UP_LOCK_CLAIM in a lock word, a generation bit before (a peer of
 * version 12 would read a take-back's claim as a hold by an end of another
 * generation, and take it over as a dead holder's).
 * 14: under[], after the endpoint table: the value each end's last
 * take-back claim of each lock replaced (a peer of version 13 would not store it, and a
 * taker of this version would restore whatever was left there when that
 * peer died inside its claim). */
#define UP_SHM_VERSION    14u
#define UP_CACHELINE      64u
#define UP_SHM_MAX_ENDS   64u
#define UP_SHM_PAGE_ALIGN 4096u

#define UP_MIN_PAGE_SIZE  4096u
#define UP_MAX_PAGE_SIZE  (1u << 20)
#define UP_MAX_CAPACITY   ((uint64_t)UP_MIN_PAGE_SIZE << 31) /* slot_count <= 2^31: 8 TiB */
#define UP_MIN_PAGES      2u

struct up_shm_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;   /* sizeof(struct up_shm_hdr) */
	uint64_t seg_size;   /* bytes of the memfd */
	uint32_t page_size;  /* power of two, UP_MIN..UP_MAX_PAGE_SIZE */
	uint32_t page_count; /* pages in the pool */
	uint32_t slot_count; /* ring slots: power of two >= page_count */
	uint32_t max_ends;   /* entries of the endpoint table */
	uint32_t flags;      /* UP_CFG_* the pipe was created with */
	int32_t  numa_node;  /* node asked for at creation (-1 = policy) */
	uint32_t keep_pages; /* free pages kept resident; the rest is trimmed */
	uint32_t trim_ms;    /* at most one trim per this many ms per end */
	uint64_t off_ends, off_slots, off_pool, off_pages;
	/* Pages of the pool beyond the capacity: writers leave this many free
	 * pages in the pool, so at most page_count - spare_pages are ever in
	 * use, while the pool's FIFO order goes round all of them. */
	uint32_t spare_pages;
	uint32_t resv_;      /* 0 */
	uint64_t checksum;   /* FNV-1a 64 of the bytes before this field */
	uint8_t  pad_[2 * UP_CACHELINE - 104];
};

/* In state.readers and state.writers, above the count of open ends: an end
 * of that side has been open. A side whose word is exactly UP_COUNT_EVER
 * came and left (end of stream for readers, EPIPE for writers); a word of 0
 * means none came yet, and the other side waits for one, as with pipe(2)
 * and FIFOs. One word, so that "came and left" is a single load. */
#define UP_COUNT_EVER 0x80000000u

struct up_shm_state {
	_Atomic uint32_t readers; /* open reader endpoints, all processes, | UP_COUNT_EVER */
	_Atomic uint32_t writers; /* open writer endpoints, all processes, | UP_COUNT_EVER */
	_Atomic uint32_t broken;  /* set once a violation was seen */
	_Atomic uint32_t ends_gen;/* bumped when the endpoint table changes */
	uint8_t pad_[UP_CACHELINE - 16];
};

/* Producer line: written only by writers, under the writers' lock; read by
 * readers polling for data. */
struct up_shm_prod {
	_Atomic uint32_t head; /* free-running slot index: next slot to fill */
	uint32_t pad0_;
	/* CLOCK_MONOTONIC ns until which a writer is filling a large
	 * reservation (reserve.c), so a reader waiting for data spins on
	 * rather than sleeps (wait.c). A hint, stored outside the lock: any
	 * value is harmless, and a stale one expires by itself. */
	_Atomic uint64_t fill_until;
	uint8_t pad_[UP_CACHELINE - 16];
};

/* Consumer line: written only by readers, under the readers' lock; read by
 * writers once per page published. */
struct up_shm_cons {
	/* The readers' position: tail (free-running index of the next slot to
	 * read) in the low half, the bytes of that slot already read in the
	 * high half. One word, so a reader that dies between two stores cannot
	 * leave an offset that belongs to another slot. */
	_Atomic uint64_t pos;
	/* The lock id of the reader that last stored pos, so that a reader
	 * finding its own id here can hold pos to what it stored (ring.h,
	 * up__pos_take()). Written only under the readers' lock. */
	_Atomic uint32_t pos_by;
	uint8_t pad_[UP_CACHELINE - 12];
};

static inline uint32_t up__pos_tail(uint64_t pos) { return (uint32_t)pos; }
static inline uint32_t up__pos_off(uint64_t pos) { return (uint32_t)(pos >> 32); }
static inline uint64_t up__pos(uint32_t tail, uint32_t off)
{
	return (uint64_t)tail | (uint64_t)off << 32;
}

/* A lock on its own line: 0 free, else the owner's lock id (its end index +
 * 1 and a generation), with UP_LOCK_WAITERS when somebody sleeps on it and
 * UP_LOCK_CLAIM while the id is a take-back's claim, not a hold. Apart from head/tail because
 * the other side polls those: taking the lock must not steal their line. */
struct up_shm_lock {
	_Atomic uint32_t word;
	/* The lock id of the end the lock is biased to (a writer for the
	 * writers' lock, a reader for the readers'; it enters without touching
	 * word), with UP_BIAS_REVOKE once a holder of word has begun to take
	 * the bias back; 0 = none. Written only by a holder of word. See
	 * bias.h. */
	_Atomic uint32_t bias;
	/* The owner whose marked bias a taker has already fenced with
	 * membarrier(): a later taker need not fence again. 0 = none. Written
	 * only by a holder of word. */
	_Atomic uint32_t fenced;
	/* Writers' lock only: poll-mode ends armed on word (bias.c,
	 * up__wlock_poll_arm()); while not 0, a drop that finds the waiters bit
	 * wakes every sleeper, not one. Padding before version 4. */
	_Atomic uint32_t npoll;
	/* CLOCK_MONOTONIC ns when the bias was marked UP_BIAS_REVOKE; for a
	 * taker that cannot fence (bias.c, UP_BIAS_GRACE_NS). Written only by
	 * a holder of word. */
	_Atomic uint64_t marked_ns;
	/* The lock id of a sleeper the next drop hands the word to (lock.c,
	 * up__lock_pass()), 0 = none. Set from 0 by the sleeper itself, taken
	 * back by it, or cleared by the holder that hands it the word. */
	_Atomic uint32_t handoff;
	uint8_t pad_[UP_CACHELINE - 28];
};

/* Pool indices: writers take free pages at get, readers return them at put.
 * put - get is the number of free pages in the pool. */
struct up_shm_pool_get {
	_Atomic uint32_t get;
	uint8_t pad_[UP_CACHELINE - 4];
};
struct up_shm_pool_put {
	_Atomic uint32_t put;
	/* The page a reader freed last, held out of the FIFO for a writer of
	 * a trickle (pagepool.c, the hand-off); UP_POOL_HOT_NONE when none. */
	_Atomic uint32_t hot;
	uint8_t pad_[UP_CACHELINE - 8];
};
#define UP_POOL_HOT_NONE 0xffffffffu

/* A sleep line; the protocol is described in core/wake.h. */
struct up_shm_wait {
	_Atomic uint32_t seq;     /* the futex word */
	_Atomic uint32_t nwait;   /* sleepers announced */
	_Atomic uint32_t pending; /* a waker has bumped seq and not been seen yet */
	/* Of the nwait, those announced by an armed poll-mode end (up_poll_arm,
	 * up_uring_prep_poll), whose event loop may be slow to act on a wake:
	 * wakes on this line then go to every sleeper (wake.c,
	 * up__wake_line_slow()). */
	_Atomic uint32_t npoll;
	/* CLOCK_MONOTONIC ns until which one waiter spins on this line; the
	 * others sleep at once (wait.c, spin_claim()). A hint: any value is
	 * harmless, a stale one expires by itself. */
	_Atomic uint64_t spin_until;
	/* Readers' line only: a reader whose process may not call membarrier()
	 * has opened (sticky; wait.c, up__wait_fence()). Writers then publish
	 * every len with a full fence (writer.h, up__merge_close()). */
	_Atomic uint32_t nofence;
	uint8_t pad_[UP_CACHELINE - 28];
};

#define UP_LOCK_WAITERS 0x80000000u
/* A take-back's claim (core/takeback.c, up__take_back()): the word names the end
 * taking it back, which does not hold it yet. */
#define UP_LOCK_CLAIM 0x40000000u
#define UP_LOCK_FLAGS (UP_LOCK_WAITERS | UP_LOCK_CLAIM)

/* Endpoint table entry. state: 0 free, else role | gen << 8. */
#define UP_END_FREE   0u
#define UP_END_READER 1u
#define UP_END_WRITER 2u
#define UP_END_ROLE_MASK 0xffu
struct up_shm_end {
	_Atomic uint32_t state;
	/* The owner's pid in its own pid namespace, and that namespace's inode
	 * (pidns): hints for watching its death with a pidfd where both are
	 * ours too. Liveness itself is the entry's OFD lock (live.c). */
	_Atomic int32_t  pid;
	/* UP_BUSY_*: where the end its side's lock is biased to stands (bias.h);
	 * written only by that endpoint (and zeroed when the entry is claimed). */
	_Atomic uint32_t busy;
	/* UP_ARMED_LINE_*: the wait line this endpoint is announced on, asleep
	 * (wait.c, up__wait_ready()) or armed in poll mode (| UP_ARMED_LINE_POLL;
	 * poll.c, bias.c), so that reaping it when its process died takes its
	 * counts off nwait and npoll (peer.c). */
	_Atomic uint32_t armed;
	_Atomic uint64_t pidns;
	/* Locks this endpoint is inside a call to take or holds (lock.h): a
	 * lock word naming an endpoint whose held says otherwise was stored
	 * by somebody else, and is taken back. Written only by the owner. */
	_Atomic uint32_t held;
	/* The entry's state when its end was added to its side's count, 0
	 * when not (not yet, or taken out again): whoever clears it takes the
	 * end out of the count, so that an end is taken out once, whether it
	 * closes or is reaped, and never before it was put in (peer.c,
	 * up__end_count()). */
	_Atomic uint32_t counted;
};

#define UP_ARMED_LINE_NONE 0u
#define UP_ARMED_LINE_RD   1u
#define UP_ARMED_LINE_WR   2u
#define UP_ARMED_LINE_WLOCK 3u /* poll mode, on the writers' lock word */
#define UP_ARMED_LINE_MASK 3u
#define UP_ARMED_LINE_POLL 4u

#define UP_BUSY_OUT 0u /* not inside its lock's critical section */
#define UP_BUSY_IN  1u /* inside it, entered through the bias */
#define UP_BUSY_ACK 2u /* saw the bias taken back, and is out */
#define UP_BIAS_REVOKE 0x80000000u /* in bias: being taken back */

/* One ring slot: a page of the pool holding stream bytes [0, len). Written
 * only by writers: page before publishing head, len also later while the
 * slot is the last one (merging small writes). The readers' progress inside
 * the tail slot is in cons.pos, on the readers' own line, so that reading
 * never dirties a line the writer is about to write. */
struct up_shm_slot {
	_Atomic uint32_t page;
	_Atomic uint32_t len;
	uint32_t pad_[2]; /* unused; keeps four slots to a line, as layout 3 has */
};

struct up_shm_lines {
	struct up_shm_state    state;
	struct up_shm_prod     prod;
	struct up_shm_cons     cons;
	struct up_shm_lock     wlock;   /* writers' lock */
	struct up_shm_lock     rlock;   /* readers' lock */
	struct up_shm_pool_get pget;
	struct up_shm_pool_put pput;
	struct up_shm_wait     rd_wait; /* readers sleep here */
	struct up_shm_wait     wr_wait; /* writers sleep here */
};

static_assert(sizeof(struct up_shm_hdr) == (size_t)2 * UP_CACHELINE, "header is two lines");
static_assert(offsetof(struct up_shm_hdr, checksum) == 96, "checksum offset");
static_assert(sizeof(struct up_shm_state) == UP_CACHELINE, "line");
static_assert(offsetof(struct up_shm_lines, prod) % UP_CACHELINE == 0, "prod on its line");
static_assert(offsetof(struct up_shm_lines, cons) - offsetof(struct up_shm_lines, prod) ==
	      UP_CACHELINE, "producer and consumer lines apart");
static_assert(offsetof(struct up_shm_lines, wr_wait) % UP_CACHELINE == 0, "wait line");
static_assert(sizeof(struct up_shm_lines) == (size_t)9 * UP_CACHELINE, "nine lines");
static_assert(sizeof(struct up_shm_slot) == 16, "slot is 16 bytes");
static_assert(sizeof(struct up_shm_end) == 32, "end is 32 bytes");
static_assert(UP_SHM_MAX_ENDS <= 64, "a process's own entries are a 64-bit mask (live.c)");
static_assert(ATOMIC_INT_LOCK_FREE == 2, "shared atomics must be lock-free across processes");
static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit shared atomics must be lock-free too");

#define UP_SHM_LINES_OFF ((uint64_t)sizeof(struct up_shm_hdr))
static_assert((UP_SHM_LINES_OFF + sizeof(struct up_shm_lines)) % UP_CACHELINE == 0,
	      "the endpoint table starts a line: even entries each begin one (peer.c)");

/* The layout as a pure function of the geometry. Returns 0, or -1 when the
 * geometry itself is out of range (callers map that to -EINVAL/-EPROTO). */
struct up_shm_offsets {
	uint64_t ends, under, slots, pool, owner, pages, size;
};

static inline int up__shm_offsets(uint32_t page_size, uint32_t page_count,
				  uint32_t slot_count, uint32_t max_ends,
				  struct up_shm_offsets *o)
{
	uint64_t x;

	if (page_size < UP_MIN_PAGE_SIZE || page_size > UP_MAX_PAGE_SIZE ||
	    (page_size & (page_size - 1)) != 0)
		return -1;
	if (page_count < UP_MIN_PAGES ||
	    (uint64_t)page_count * page_size > UP_MAX_CAPACITY)
		return -1;
	if (slot_count < page_count || (slot_count & (slot_count - 1)) != 0 ||
	    slot_count / 2 >= page_count)
		return -1;
	if (max_ends != UP_SHM_MAX_ENDS)
		return -1;
	x = UP_SHM_LINES_OFF + sizeof(struct up_shm_lines);
	o->ends = x;
	x += (uint64_t)max_ends * sizeof(struct up_shm_end);
	o->under = x;
	x += (uint64_t)2 * max_ends * sizeof(uint32_t);
	x = (x + UP_CACHELINE - 1) & ~(uint64_t)(UP_CACHELINE - 1);
	o->slots = x;
	x += (uint64_t)slot_count * sizeof(struct up_shm_slot);
	o->pool = x;
	x += (uint64_t)slot_count * sizeof(uint32_t);
	x = (x + UP_CACHELINE - 1) & ~(uint64_t)(UP_CACHELINE - 1);
	o->owner = x;
	x += (uint64_t)page_count * sizeof(uint32_t);
	x = (x + UP_SHM_PAGE_ALIGN - 1) & ~(uint64_t)(UP_SHM_PAGE_ALIGN - 1);
	o->pages = x;
	x += (uint64_t)page_count * page_size;
	o->size = x;
	return 0;
}

/* FNV-1a 64 over the header bytes before the checksum. */
static inline uint64_t up__shm_hdr_sum(const struct up_shm_hdr *h)
{
	const unsigned char *b = (const unsigned char *)h;
	uint64_t s = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < offsetof(struct up_shm_hdr, checksum); i++) {
		s ^= b[i];
		s *= 0x100000001b3ull;
	}
	return s;
}

#endif /* UP_CORE_SHM_LAYOUT_H */
