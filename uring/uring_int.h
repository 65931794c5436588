/* SPDX-License-Identifier: MIT */
/*
 * uring_int.h - what uring/ files share: the futex opcodes that Debian 12's
 * liburing 2.3 does not know and how their SQEs are laid out, the waker's
 * state, and the functions one uring/ file offers the others.
 *
 * Layers, each calling only those below it (and core/):
 *   wake_uring.c  the waker: construction, wait, wake, the ops
 *   poll_ring.c   poll mode: an end's own ring, whose fd is the pollfd
 *   tring.c       the calling thread's rings: made, probed, self-tested,
 *                 found, freed
 *   sq_anchor.c   the process's one SQPOLL thread
 *   uring_io.c    a thread's ring: setup, SQ publish, enter, CQ reap,
 *                 cancel
 * uring_api.c (include/uringpipe/uring.h) uses only the SQE layout.
 */
#ifndef UP_URING_INT_H
#define UP_URING_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <liburing.h>

#include "wake.h"

/* Opcode numbers from the kernel's enum io_uring_op (uapi io_uring.h).
 * Our SQE encoding follows the kernel's io_futex_prep() (io_uring/futex.c,
 * v6.7+) and matches liburing >= 2.5's io_uring_prep_futex_wait/wake. */
#define UP__IORING_OP_FUTEX_WAIT 51
#define UP__IORING_OP_FUTEX_WAKE 52
/* futex2 flags (uapi futex.h, v6.7+): size only. FUTEX2_PRIVATE (128) is
 * deliberately absent: the peer may be another process. */
#define UP__FUTEX2_SIZE_U32 0x02u
#ifndef FUTEX_BITSET_MATCH_ANY
#define FUTEX_BITSET_MATCH_ANY 0xffffffffu
#endif

/* The installed header predates the futex opcodes; make sure its enum still
 * lines up with the numbers above (SENDMSG_ZC, READ_MULTISHOT, WAITID, ...). */
_Static_assert(IORING_OP_SENDMSG_ZC == 48, "io_uring opcode numbering changed");

/*
 * IORING_OP_FUTEX_WAIT/WAKE as the kernel's io_futex_prep() reads them:
 *   addr  = futex address,   addr2 (the 'off' union) = value to compare
 *   (wait) or number to wake (wake),  addr3 = bitset mask,  fd = futex2
 *   flags; len, the op-flags union (futex_flags), buf_index and file_index
 *   must be 0 or the kernel returns -EINVAL. Zeroing the whole SQE first
 *   also clears ioprio/personality, which io_init_req() checks.
 */
static inline void up__prep_futex(struct io_uring_sqe *sqe, uint8_t op,
				  _Atomic uint32_t *word, uint64_t val)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = op;
	sqe->fd = (int)UP__FUTEX2_SIZE_U32;
	sqe->addr = (uint64_t)(uintptr_t)word;
	sqe->addr2 = val;
	sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
}

enum {
	UW_SQ_ENTRIES = 8,
	/* Worst case in flight: 1 futex + UW_MAX_PEERS polls + 1 cancel + a
	 * few unreaped wakes; 64 keeps the CQ from ever overflowing. */
	UW_CQ_ENTRIES = 64,
	/* Peers watched per wait; beyond this the caller's timeout covers the
	 * rest (wake.h allows backends that cannot watch pidfds). */
	UW_MAX_PEERS = 32,
	/* How long an SQ thread polls after its last request before it
	 * sleeps (and then needs IORING_ENTER_SQ_WAKEUP). */
	UW_SQ_IDLE_MS = 50,
};

/* user_data = generation << 8 | kind. Wakes carry generation 0. */
enum uw_kind {
	UW_WAKE = 1,
	UW_FUTEX = 2,
	UW_POLL = 3,
	UW_CANCEL = 4, /* also the drain NOP, in generation 0 */
	UW_TICK = 5,   /* poll mode, blind peers: a timeout that ends the arm */
	UW_POKE = 6,   /* a MSG_RING into a poll ring of this process */
	UW_EARLY = 7,  /* poll mode: a timeout that ends the arm, planned (wait.c) */
	UW_NOW = 8,    /* poll mode: a NOP that makes the fd readable at once */
};
/* Poll mode's tick for blind peers: the sleep slice, UP_WAIT_SLICE_NS. */
#define UW_TICK_NS 50000000ull
/* How long after its submission a parked wait may be taken up by a new arm
 * (poll_ring.c): an eighth of the tick. */
#define UW_PARK_NS (UW_TICK_NS / 8)
#define UW_TAG(gen, kind) (((uint64_t)(gen) << 8) | (uint64_t)(kind))
#define UW_PENDING 2 /* "no result yet"; real results are 0, 1 (peer) or -errno */

/*
 * A ring that sleeps and wakes: one per thread and flavour (plain, SQPOLL),
 * made at the thread's first wait or wake that needs it and freed by a
 * pthread key destructor at its exit (tring.c, tring_get()). Only its
 * own thread touches it, one call at a time: @busy is set for the length of
 * a wait or a wake, and a call that finds it set (a signal handler that
 * calls into the library while the thread sleeps or wakes) goes to
 * futex(2) instead.
 */
struct uw_ring {
	struct io_uring ring;
	uint64_t gen;  /* generation of the latest wait */
	int sqpoll;    /* ring has an SQ thread (IORING_SETUP_SQPOLL) */
	int wake_err;  /* first failed FUTEX_WAKE CQE not yet reported */
	int poke_err;  /* a poke failed: its ring needs a futex wake */
	/* Ring unusable (an error we cannot recover from, such as its fd
	 * closed under us): this call waits or wakes through
	 * up__futex_wait/wake(), and the ring is retired at its end
	 * (tring.c, tring_retire()). Same shared futex, so the peer does
	 * not notice; pidfds are then covered by the caller's timeout only. */
	int broken;
	/* An enter found the fd no longer our ring's (-EBADF, -EOPNOTSUPP):
	 * closed under us, maybe reused, and not closed again by us. */
	int fd_lost;
	int busy;      /* in a wait or a wake; see [u-reenter] */
	pid_t owner;   /* process that made it (see uw_destroy()) */
	struct uw_ring *next, *prev; /* the process's rings (tring.c) */
};

/*
 * The per-endpoint waker: no ring of its own for waiting and waking (it
 * uses the calling thread's uw_ring), and a poll ring only once
 * up_pollfd() is asked for (poll_ring.c).
 */
struct uring_waker {
	struct up__waker base; /* first: core/ only sees this */
	int sqpoll;            /* the thread ring flavour to use */
	/* Poll mode (poll_ring.c): a ring of the end's own, NULL until
	 * up_pollfd; its fd is what up_pollfd() returns (readable while a
	 * CQE waits). */
	struct io_uring *pring;
	unsigned pinflight; /* armed requests whose CQE is still to come */
	int parmed;         /* pring has a wait armed (up__uw_arm) */
	uint64_t pgen;      /* generation of the latest arm */
	/* Parking (poll_ring.c): the latest arm's requests and word, whether
	 * it may be parked, the thread that submitted it; pparked while its
	 * requests stay in the kernel after the disarm. */
	unsigned pnreq;
	uint64_t parm_ns; /* CLOCK_MONOTONIC of its submission */
	_Atomic uint32_t *pword;
	const void *pthread;
	bool pparkable;
	bool pparked;
	int poke_slot;      /* its entry in poll_ring.c's pokes, or -1 */
	uint32_t poke_gen;  /* up__live_gen() when it was registered */
};

static inline struct uring_waker *to_uw(struct up__waker *w)
{
	return (struct uring_waker *)w;
}

/* A futex SQE of ours: up__prep_futex() plus our user_data tag. */
static inline void uw_prep_futex(struct io_uring_sqe *sqe, uint8_t op,
				 _Atomic uint32_t *word, uint64_t val, uint64_t tag)
{
	up__prep_futex(sqe, op, word, val);
	sqe->user_data = tag;
}

/* uring_io.c: a thread's ring. */
int up__uw_ring_init(struct io_uring *ring, int sqpoll, int attach_fd, __u32 *features);
unsigned up__uw_sq_publish(struct uw_ring *uw);
bool up__uw_sq_needs_wakeup(struct uw_ring *uw);
int up__uw_enter(struct uw_ring *uw, unsigned to_submit, unsigned min_complete,
		 unsigned flags, const struct __kernel_timespec *ts, uint64_t *syscalls);
struct io_uring_sqe *up__uw_sqe_get(struct uw_ring *uw, uint64_t *syscalls);
unsigned up__uw_cq_peek(struct io_uring_cq *cq, unsigned *head);
void up__uw_cq_advance(struct io_uring_cq *cq, unsigned head);
unsigned up__uw_cq_reap(struct uw_ring *uw, uint64_t gen, unsigned *inflight,
			int *result);
void up__uw_cancel(struct uw_ring *uw, uint64_t gen, unsigned *inflight,
		   int *result, uint64_t *syscalls);
void up__uw_drain_wakes(struct uw_ring *uw);
int up__uw_probe_ok(struct io_uring *ring);
int up__uw_selftest_ok(struct uw_ring *uw);

/* tring.c: the calling thread's rings. */
struct uw_ring *up__tring_take(const struct uring_waker *uw);
void up__tring_put(struct uw_ring *tr);
bool up__tring_usable(int sqpoll);
void up__tring_drain_sqpoll(void);

/* poll_ring.c: poll mode (the ops' pollfd/arm/disarm). */
int up__uw_pollfd(struct up__waker *w, uint64_t *syscalls);
int up__uw_arm(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
	       const int *peer_pidfds, int npeer, uint64_t *syscalls);
int up__uw_disarm(struct up__waker *w, uint64_t *syscalls);
int up__uw_arm_now(struct up__waker *w, uint64_t *syscalls);
void up__uw_pring_exit(struct uring_waker *uw);
int up__uw_poke_begin(struct io_uring *ring, _Atomic uint32_t *word, uint32_t nr,
		      const struct up_shm_wait *line, uint32_t *bits);
unsigned up__uw_poke_end(struct io_uring *ring);

/* sq_anchor.c: the fd of this process's SQPOLL anchor ring, or -1. */
int up__uw_sq_anchor_fd(void);

#endif /* UP_URING_INT_H */
