/* SPDX-License-Identifier: MIT */
/*
 * wake_uring.c - the io_uring sleep/wake backend (see core/wake.h).
 *
 * DESIGN NOTE
 *
 * Each waker owns a small private ring (8 SQEs, 64 CQEs). A wait arms, in one
 * submission, an IORING_OP_FUTEX_WAIT on the shared word plus one
 * IORING_OP_POLL_ADD(POLLIN) per peer pidfd (a pidfd turns readable when its
 * process has exited), then blocks in io_uring_enter(GETEVENTS) with the
 * timeout passed through IORING_ENTER_EXT_ARG. The first completion of this
 * wait's generation decides the result; everything still armed is then
 * cancelled with one IORING_OP_ASYNC_CANCEL(ANY|ALL) and its CQEs are reaped
 * before returning, so the ring is empty when the next wait starts.
 * A wake queues an IORING_OP_FUTEX_WAKE (of one waiter, or all) with
 * IOSQE_CQE_SKIP_SUCCESS and does not wait for it: without SQPOLL the one
 * io_uring_enter that submits it is the wake's only system call; with SQPOLL
 * there is none while the SQ thread is awake. Skipping the success CQE keeps
 * the CQ free of wake traffic, so with SQPOLL a late wake completion cannot
 * end a later wait's sleep early (measured: 4.0 -> 2.0 enters per ping-pong
 * round). Destroy pushes still-unissued wakes out first (drain_wakes()).
 *
 * We publish SQEs and enter the kernel ourselves (sq_publish(), ring_enter())
 * instead of calling io_uring_submit*(): the budget in DESIGN.md is counted
 * per io_uring_enter, and liburing decides internally whether to enter
 * (SQPOLL wake-up flag, CQ overflow flush, timeout loops), so only a call we
 * make ourselves can be counted exactly. liburing is still used for setup,
 * io_uring_get_sqe(), the probe and the plain prep helpers.
 *
 * Alternatives rejected:
 *  - IORING_OP_TIMEOUT / LINK_TIMEOUT SQEs: a timeout SQE needs its own
 *    cancellation and CQE; EXT_ARG's timespec costs nothing when the futex
 *    completes first. (LINK_TIMEOUT only covers one SQE, not the set.)
 *  - keeping pidfd polls armed across waits to save the cancel enter: the
 *    poll pins the pidfd's file, and the caller may close the fd and reuse
 *    its number for another process, so "same fd number" would not mean
 *    "same peer". With peers, a wait costs 2 enters (arm+sleep, cancel+reap);
 *    without peers and woken by the futex, 1.
 *  - deferring the cancel to the next wait's submission: stale FUTEX_WAITs
 *    would stay queued on the word and steal wakeups' CPU; rejected as not
 *    worth one syscall on the sleep path.
 *  - IORING_SETUP_SINGLE_ISSUER / DEFER_TASKRUN: an endpoint is used by one
 *    thread at a time, not always the same thread.
 *  - registering the ring fd (IORING_ENTER_REGISTERED_RING): the registration
 *    is per task, and the waker may move between threads.
 *
 * Liburing 2.3 (Debian 12) has no futex helpers or opcode numbers; the SQE
 * encoding below follows the kernel's io_futex_prep() (io_uring/futex.c,
 * v6.7+) and matches liburing >= 2.5's io_uring_prep_futex_wait/wake.
 *
 * A waker must not be used across fork(): its ring is mapped MADV_DONTFORK,
 * so a child can only destroy it (which is safe) and must create its own.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "up_int.h"

#include "uring_int.h"
/* We treat the kernel's ring indices as atomics (as liburing's barrier.h
 * does); that needs lock-free 32-bit atomics of the same size. */
_Static_assert(sizeof(_Atomic unsigned) == sizeof(unsigned), "atomic size");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "atomic unsigned must be lock-free");

enum {
	UW_SQ_ENTRIES = 8,
	/* Worst case in flight: 1 futex + UW_MAX_PEERS polls + 1 cancel + a
	 * few unreaped wakes; 64 keeps the CQ from ever overflowing. */
	UW_CQ_ENTRIES = 64,
	/* Peers watched per wait; beyond this the caller's timeout covers the
	 * rest (wake.h allows backends that cannot watch pidfds). */
	UW_MAX_PEERS = 32,
	UW_SQ_IDLE_MS = 50,
};

/* user_data = generation << 8 | kind. Wakes carry generation 0. */
enum uw_kind {
	UW_WAKE = 1,
	UW_FUTEX = 2,
	UW_POLL = 3,
	UW_CANCEL = 4, /* also the drain NOP, in generation 0 */
};
#define UW_TAG(gen, kind) (((uint64_t)(gen) << 8) | (uint64_t)(kind))
#define UW_PENDING 2 /* "no result yet"; real results are 0, 1 (peer) or -errno */

struct uring_waker {
	struct up__waker base; /* first: core/ only sees this */
	struct io_uring ring;
	/* Poll mode (up_pollfd): a second ring that only ever carries the
	 * armed FUTEX_WAIT and pidfd polls, with an eventfd registered so its
	 * completions make the fd readable; kept apart from `ring` so no
	 * completion of one mode is ever mistaken for the other's. */
	struct io_uring *pring;
	int efd;
	unsigned pinflight; /* armed requests whose CQE is still to come */
	int parmed;
	uint64_t gen;  /* generation of the current/last wait */
	int sqpoll;
	pid_t owner;   /* process that created the ring (see uw_destroy) */
	int wake_err;  /* first failed FUTEX_WAKE CQE not yet reported */
	/* Ring unusable (an error we cannot recover from, such as its fd
	 * closed under us): wait and wake through up__futex_wait/wake() for
	 * good. Same shared futex, so the peer does not notice; pidfds are
	 * then covered by the caller's timeout only. */
	int broken;
};

static struct uring_waker *to_uw(struct up__waker *w)
{
	return (struct uring_waker *)w;
}

/* ---- ring plumbing ------------------------------------------------------ */

static void prep_futex(struct io_uring_sqe *sqe, uint8_t op,
		       _Atomic uint32_t *word, uint64_t val, uint64_t tag)
{
	up__prep_futex(sqe, op, word, val);
	sqe->user_data = tag;
}

static int ring_init(struct io_uring *ring, int sqpoll, int attach_fd, __u32 *features)
{
	struct io_uring_params p;
	int r;

	memset(&p, 0, sizeof(p));
	/* SUBMIT_ALL: a bad pidfd fails its own SQE, not the ones after it. */
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
	p.cq_entries = UW_CQ_ENTRIES;
	if (sqpoll) {
		p.flags |= IORING_SETUP_SQPOLL;
		p.sq_thread_idle = UW_SQ_IDLE_MS;
		if (attach_fd >= 0) {
			p.flags |= IORING_SETUP_ATTACH_WQ;
			p.wq_fd = (__u32)attach_fd;
		}
	}
	r = io_uring_queue_init_params(UW_SQ_ENTRIES, ring, &p);
	*features = p.features;
	return r;
}

/*
 * Hand every SQE we filled to the kernel by moving the SQ tail. Returns the
 * number the kernel has not consumed yet (what a non-SQPOLL enter submits).
 */
static unsigned sq_publish(struct uring_waker *uw)
{
	struct io_uring_sq *sq = &uw->ring.sq;
	unsigned tail = sq->sqe_tail;
	/* Relaxed: we are the only writer of the SQ tail. */
	unsigned kt = atomic_load_explicit((_Atomic unsigned *)sq->ktail,
					   memory_order_relaxed);

	/* io_uring_get_sqe() hands out sqes[n & mask] for the n-th SQE; map
	 * the SQ array slots 1:1 to that, whatever liburing set up. */
	for (; kt != tail; kt++)
		sq->array[kt & sq->ring_mask] = kt & sq->ring_mask;
	sq->sqe_head = tail;
	/* R1: publish the SQE contents before the tail; pairs with the
	 * kernel's smp_load_acquire(&rings->sq.tail) in io_sqring_entries(). */
	atomic_store_explicit((_Atomic unsigned *)sq->ktail, tail,
			      memory_order_release);
	/* A1: pairs with the kernel's release of sq.head after consuming. */
	return tail - atomic_load_explicit((_Atomic unsigned *)sq->khead,
					   memory_order_acquire);
}

/* With SQPOLL: whether the SQ thread sleeps, so that what sq_publish() just
 * published needs an enter with IORING_ENTER_SQ_WAKEUP to be seen. */
static bool sq_needs_wakeup(struct uring_waker *uw)
{
	/* F1: orders our SQ tail store (R1) before the flags load;
	 * pairs with the SQ thread's smp_mb() between setting
	 * NEED_WAKEUP and re-reading the tail before it sleeps
	 * (liburing sq_ring_needs_enter does the same). */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit((_Atomic unsigned *)uw->ring.sq.kflags,
				    memory_order_relaxed) &
	       IORING_SQ_NEED_WAKEUP;
}

/*
 * One io_uring_enter, counted. With SQPOLL the SQ thread does the submitting
 * (to_submit is ignored by the kernel except as the return value, so we pass
 * 0 and keep wait errors visible) and we only add SQ_WAKEUP when it sleeps.
 */
static int ring_enter(struct uring_waker *uw, unsigned to_submit,
		      unsigned min_complete, unsigned flags,
		      const struct __kernel_timespec *ts, uint64_t *syscalls)
{
	struct io_uring_getevents_arg arg;
	long r;

	if (uw->sqpoll) {
		to_submit = 0;
		if (sq_needs_wakeup(uw))
			flags |= IORING_ENTER_SQ_WAKEUP;
	}
	memset(&arg, 0, sizeof(arg));
	arg.sigmask_sz = _NSIG / 8;
	arg.ts = (uint64_t)(uintptr_t)ts;
	if (flags & IORING_ENTER_GETEVENTS)
		flags |= IORING_ENTER_EXT_ARG;
	(*syscalls)++;
	r = syscall(SYS_io_uring_enter, uw->ring.ring_fd, to_submit,
		    min_complete, flags,
		    (flags & IORING_ENTER_EXT_ARG) ? (void *)&arg : NULL,
		    (flags & IORING_ENTER_EXT_ARG) ? sizeof(arg) : (size_t)0);
	return r < 0 ? -errno : (int)r;
}

/* An SQE, making room if the SQ is full (only possible with SQPOLL, or after
 * a failed enter). NULL if the kernel will not take any. */
static struct io_uring_sqe *sqe_get(struct uring_waker *uw, uint64_t *syscalls)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&uw->ring);
	unsigned pending;

	if (sqe)
		return sqe;
	pending = sq_publish(uw);
	if (ring_enter(uw, pending, 0, uw->sqpoll ? IORING_ENTER_SQ_WAIT : 0u,
		       NULL, syscalls) < 0)
		return NULL;
	return io_uring_get_sqe(&uw->ring);
}

/* The CQEs the kernel has posted: [*head, returned tail). */
static unsigned cq_peek(struct io_uring_cq *cq, unsigned *head)
{
	/* Relaxed: we are the only writer of the CQ head. */
	*head = atomic_load_explicit((_Atomic unsigned *)cq->khead,
				     memory_order_relaxed);
	/* A2: see CQE contents written before the tail; pairs with the
	 * kernel's smp_store_release(&rings->cq.tail) in io_commit_cqring(). */
	return atomic_load_explicit((_Atomic unsigned *)cq->ktail,
				    memory_order_acquire);
}

/* Hand the CQ slots below @head back to the kernel. */
static void cq_advance(struct io_uring_cq *cq, unsigned head)
{
	/* R2: hand the slots back only after reading them; pairs with
	 * the kernel's acquire of cq.head when it checks for space. */
	atomic_store_explicit((_Atomic unsigned *)cq->khead, head,
			      memory_order_release);
}

/*
 * Consume every visible CQE. CQEs of generation @gen lower *inflight and,
 * for the first meaningful one, set *result. Wake CQEs only record an error.
 * Anything else is stale by construction (each wait reaps its own before
 * returning) and dropped. Returns how many CQEs were consumed.
 */
static unsigned cq_reap(struct uring_waker *uw, uint64_t gen,
			unsigned *inflight, int *result)
{
	struct io_uring_cq *cq = &uw->ring.cq;
	unsigned head, tail = cq_peek(cq, &head);
	unsigned n = 0;

	for (; head != tail; head++, n++) {
		const struct io_uring_cqe *cqe = &cq->cqes[head & cq->ring_mask];
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		unsigned kind = (unsigned)(ud & 0xff);

		if (kind == UW_WAKE) {
			/* Only failed wakes post a CQE (CQE_SKIP_SUCCESS). */
			if (res < 0 && !uw->wake_err)
				uw->wake_err = res;
			continue;
		}
		if ((ud >> 8) != (gen & (UINT64_MAX >> 8)) || !*inflight)
			continue;
		(*inflight)--;
		if (*result != UW_PENDING || res == -ECANCELED)
			continue;
		switch (kind) {
		case UW_FUTEX:
			/* 0: woken; -EAGAIN: the word already differed. */
			*result = (res >= 0 || res == -EAGAIN) ? 0 : res;
			break;
		case UW_POLL:
			/* >0: revents (POLLIN, or POLLHUP/POLLERR) = peer exited
			 * or the fd is unusable; either way the caller must
			 * look. <0: the pidfd itself is bad (-EBADF ...). */
			*result = res > 0 ? 1 : res;
			break;
		default: /* UW_CANCEL: its count is of no interest */
			break;
		}
	}
	if (n)
		cq_advance(cq, tail);
	return n;
}

/*
 * Cancel whatever of generation @gen is still armed and wait for all of its
 * CQEs, so no completion outlives the wait that armed it. Every armed request
 * posts exactly one CQE (completed or -ECANCELED) and the cancel posts one.
 */
static void cancel_pending(struct uring_waker *uw, uint64_t gen,
			   unsigned *inflight, int *result, uint64_t *syscalls)
{
	/* 100 ms per round and a bounded number of fruitless rounds: a cancel
	 * of a futex wait or a poll completes at once, so hitting the bound
	 * means the ring is broken, not slow. */
	const struct __kernel_timespec ts = { .tv_sec = 0,
					      .tv_nsec = 100000000LL };
	struct io_uring_sqe *sqe = sqe_get(uw, syscalls);
	int idle = 0;

	if (!sqe) {
		uw->broken = 1;
		return;
	}
	/* ANY|ALL: the ring is private to this waker and the only other
	 * requests ever in it are FUTEX_WAKEs, which are never pending. */
	io_uring_prep_cancel64(sqe, 0,
			       IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	sqe->user_data = UW_TAG(gen, UW_CANCEL);
	(*inflight)++;
	while (*inflight) {
		unsigned pending = sq_publish(uw);
		int r = ring_enter(uw, pending, *inflight,
				   IORING_ENTER_GETEVENTS, &ts, syscalls);

		if (cq_reap(uw, gen, inflight, result))
			idle = 0;
		else if (r < 0 && r != -EINTR && r != -ETIME && r != -EAGAIN &&
			 r != -EBUSY)
			idle = 1000; /* hard error: give up now */
		if (*inflight && ++idle > 50) {
			uw->broken = 1;
			return;
		}
	}
}

/* ---- the ops ------------------------------------------------------------ */

static int uw_wait(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		   uint64_t timeout_ns, const int *peer_pidfds, int npeer,
		   uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	struct io_uring_sqe *sqe;
	struct __kernel_timespec ts;
	uint64_t gen, deadline = 0;
	unsigned inflight = 0;
	int result = UW_PENDING, busy = 0, i;
	unsigned seen;

	if (uw->broken)
		return up__futex_wait(word, expect, timeout_ns, syscalls);

	/* Drop leftovers (failed-wake CQEs) so that min_complete = 1 below
	 * is met only by a completion of this wait. */
	cq_reap(uw, 0, &inflight, &result);
	/* A3: pairs with the waker's release bump of seq (see wake.h). The
	 * kernel compares again under the futex bucket lock; this load only
	 * saves the enter when the bump is already visible. */
	if (atomic_load_explicit(word, memory_order_acquire) != expect)
		return 0;

	if (timeout_ns) {
		uint64_t t = up__now_ns();

		deadline = timeout_ns > UINT64_MAX - t ? UINT64_MAX
						       : t + timeout_ns;
	}
	gen = ++uw->gen;

	sqe = sqe_get(uw, syscalls);
	if (!sqe)
		goto hard_fail;
	prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, word, expect,
		   UW_TAG(gen, UW_FUTEX));
	inflight++;
	if (npeer > UW_MAX_PEERS)
		npeer = UW_MAX_PEERS;
	for (i = 0; i < npeer; i++) {
		if (peer_pidfds[i] < 0)
			continue;
		sqe = sqe_get(uw, syscalls);
		if (!sqe) {
			result = -EBUSY;
			goto cleanup;
		}
		io_uring_prep_poll_add(sqe, peer_pidfds[i], POLLIN);
		sqe->user_data = UW_TAG(gen, UW_POLL);
		inflight++;
	}

	while (result == UW_PENDING) {
		const struct __kernel_timespec *tsp = NULL;
		unsigned pending = sq_publish(uw);
		int r;

		if (deadline) {
			uint64_t t = up__now_ns(), left;

			if (t >= deadline) {
				result = -ETIMEDOUT;
				break;
			}
			left = deadline - t;
			ts.tv_sec = (long long)(left / 1000000000u);
			ts.tv_nsec = (long long)(left % 1000000000u);
			tsp = &ts;
		}
		r = ring_enter(uw, pending, 1, IORING_ENTER_GETEVENTS, tsp,
			       syscalls);
		seen = cq_reap(uw, gen, &inflight, &result);
		if (result != UW_PENDING)
			break;
		if (r == -ETIME) {
			result = -ETIMEDOUT;
		} else if (r == -EINTR) {
			result = -EINTR;
		} else if (r == -EAGAIN || r == -EBUSY) {
			/* Kernel short of memory/CQ space: the SQEs stay
			 * queued; retry a few times, then report it. */
			if (++busy > 16)
				result = r;
		} else if (r < 0) {
			result = r;
		} else if (!seen) {
			/* r >= 0 with an empty CQ: when an enter also
			 * submits, the kernel returns the submitted count and
			 * drops the wait's -ETIME/-EINTR, so tell them apart by
			 * the clock. */
			result = (deadline && up__now_ns() >= deadline) ? -ETIMEDOUT
								   : -EINTR;
		}
		/* else: only stale wake CQEs arrived; sleep again. */
	}

cleanup:
	if (inflight)
		cancel_pending(uw, gen, &inflight, &result, syscalls);
	if (result == UW_PENDING)
		result = -EIO;
	/* A broken ring cannot report a hard error back to the sleeper loop
	 * usefully; the caller re-checks, and the next wait uses futex(2). */
	if (uw->broken && result < 0 && result != -ETIMEDOUT &&
	    result != -EINTR)
		result = 0;
	return result;

hard_fail:
	uw->broken = 1;
	return up__futex_wait(word, expect, timeout_ns, syscalls);
}

static int uw_wake(struct up__waker *w, _Atomic uint32_t *word, uint32_t nr,
		   uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	struct io_uring_sqe *sqe;
	unsigned none = 0;
	int dummy = UW_PENDING, err;

	if (uw->broken)
		return up__futex_wake(word, nr, syscalls);

	/* Never wait for a wake's completion; successful wakes post no CQE
	 * at all, and a failed one is picked up here (two loads when the CQ
	 * is empty) and reported by this call. */
	cq_reap(uw, 0, &none, &dummy);
	sqe = io_uring_get_sqe(&uw->ring);
	if (!sqe) {
		/* SQ full: the SQ thread is behind. A direct futex(2) wake
		 * is equivalent (shared futex, same word) and cannot block. */
		return up__futex_wake(word, nr, syscalls);
	}
	prep_futex(sqe, UP__IORING_OP_FUTEX_WAKE, word, nr,
		   UW_TAG(0, UW_WAKE));
	/* A successful wake posts nothing: no CQ traffic to reap, and with
	 * SQPOLL no late wake CQE can cut a later wait's sleep short. */
	sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
	if (uw->sqpoll) {
		sq_publish(uw);
		/* Enters only if the SQ thread sleeps. */
		if (sq_needs_wakeup(uw)) {
			int r = ring_enter(uw, 0, 0, 0, NULL, syscalls);

			if (r < 0)
				return up__futex_wake(word, nr, syscalls);
		}
	} else {
		int r = ring_enter(uw, sq_publish(uw), 0, 0, NULL, syscalls);

		if (r < 0) {
			/* The SQE stays queued and goes out with the next
			 * enter (a harmless extra wake); wake now by hand so
			 * the sleeper does not wait for that. */
			return up__futex_wake(word, nr, syscalls);
		}
		/* Without SQPOLL the wake ran inline; its CQE is usually
		 * already there, so errors surface on this very call. */
		cq_reap(uw, 0, &none, &dummy);
	}
	err = uw->wake_err;
	uw->wake_err = 0;
	return err;
}

/*
 * Let queued wakes reach the kernel before the ring goes away. With SQPOLL a
 * wake is only an SQE until the SQ thread issues it, and tearing the ring
 * down drops unconsumed SQEs: an endpoint that wakes its peer and closes at
 * once (the last write before close) would otherwise lose that wakeup and
 * leave the peer asleep until its timeout. Successful wakes post no CQE, so
 * queue a NOP behind them: SQEs are issued in order, so its CQE means every
 * wake before it has run. Bounded (about 1 s) so a wedged ring cannot hang
 * close; without SQPOLL the SQ is normally empty and this costs nothing.
 */
static void drain_wakes(struct uring_waker *uw)
{
	const struct __kernel_timespec ts = { .tv_sec = 0,
					      .tv_nsec = 100000000LL };
	struct io_uring_sqe *sqe;
	uint64_t calls = 0;
	unsigned inflight = 1;
	int dummy = UW_PENDING, round;

	if (uw->broken || sq_publish(uw) == 0)
		return;
	sqe = sqe_get(uw, &calls);
	if (!sqe)
		return;
	io_uring_prep_nop(sqe);
	/* Generation 0 belongs to no wait, so cq_reap() counts it here. */
	sqe->user_data = UW_TAG(0, UW_CANCEL);
	for (round = 0; inflight && round < 10; round++) {
		int r = ring_enter(uw, sq_publish(uw), 1,
				   IORING_ENTER_GETEVENTS, &ts, &calls);

		cq_reap(uw, 0, &inflight, &dummy);
		if (r < 0 && r != -EINTR && r != -ETIME)
			break;
	}
}

static void uw_destroy(struct up__waker *w)
{
	struct uring_waker *uw = to_uw(w);

	if (!uw)
		return;
	/* In a forked child the ring is not ours (and not mapped: DONTFORK);
	 * only the parent may push its last wakes out. Closing our fd copy
	 * and unmapping nothing is all the child may do. */
	if (getpid() == uw->owner)
		drain_wakes(uw);
	/* Tearing the rings down cancels anything still armed. */
	if (uw->pring) {
		io_uring_queue_exit(uw->pring);
		up__free(uw->pring);
		close(uw->efd);
	}
	io_uring_queue_exit(&uw->ring);
	up__free(uw);
}

/* ---- poll mode: an fd for epoll/poll/libuv ------------------------------ */

static int uw_pollfd(struct up__waker *w, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	__u32 features;
	int r;

	if (uw->pring)
		return uw->efd;
	uw->pring = up__calloc(1, sizeof(*uw->pring));
	if (!uw->pring)
		return -ENOMEM;
	*syscalls += 3;
	uw->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (uw->efd < 0) {
		r = -errno;
		goto err_free;
	}
	r = ring_init(uw->pring, 0, -1, &features);
	if (r < 0)
		goto err_close;
	r = io_uring_register_eventfd(uw->pring, uw->efd);
	if (r < 0)
		goto err_exit;
	return uw->efd;

err_exit:
	io_uring_queue_exit(uw->pring);
err_close:
	close(uw->efd);
err_free:
	up__free(uw->pring);
	uw->pring = NULL;
	return r;
}

/* Reap what the poll ring has; note whether a peer's pidfd fired. */
static void pring_reap(struct uring_waker *uw, int *peer)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(uw->pring, &cqe) == 0) {
		if ((cqe->user_data & 0xff) == UW_POLL && cqe->res > 0)
			*peer = 1;
		if ((cqe->user_data & 0xff) != UW_CANCEL && uw->pinflight)
			uw->pinflight--;
		io_uring_cqe_seen(uw->pring, cqe);
	}
}

static int uw_disarm(struct up__waker *w, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	struct io_uring_sqe *sqe;
	uint64_t junk;
	int peer = 0, rounds;

	if (!uw->parmed)
		return 0;
	uw->parmed = 0;
	pring_reap(uw, &peer);
	if (uw->pinflight) {
		/* Whatever is still armed goes; each posts -ECANCELED. */
		sqe = io_uring_get_sqe(uw->pring);
		if (sqe) {
			io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY |
						       IORING_ASYNC_CANCEL_ALL);
			sqe->user_data = UW_TAG(0, UW_CANCEL);
			io_uring_submit(uw->pring);
			*syscalls += 1;
		}
		/* Bounded: a cancel completes the requests at once. */
		for (rounds = 0; uw->pinflight && rounds < 100; rounds++) {
			struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = 10000000 };
			struct io_uring_cqe *cqe;

			*syscalls += 1;
			if (io_uring_wait_cqe_timeout(uw->pring, &cqe, &ts) == 0)
				pring_reap(uw, &peer);
		}
	}
	/* Reset the fd; its count may include the cancel's completions. */
	*syscalls += 1;
	if (read(uw->efd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
		return -errno;
	return peer;
}

static int uw_arm(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		  const int *peer_pidfds, int npeer, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	struct io_uring_sqe *sqe;
	uint64_t gen = ++uw->gen;
	int i, r;

	if (!uw->pring)
		return -EINVAL;
	if (uw->parmed)
		uw_disarm(w, syscalls);
	sqe = io_uring_get_sqe(uw->pring);
	if (!sqe)
		return -EBUSY;
	prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, word, expect, UW_TAG(gen, UW_FUTEX));
	uw->pinflight = 1;
	if (npeer > UW_SQ_ENTRIES - 2)
		npeer = UW_SQ_ENTRIES - 2; /* the slice timeout covers the rest */
	for (i = 0; i < npeer; i++) {
		sqe = io_uring_get_sqe(uw->pring);
		if (!sqe)
			break;
		io_uring_prep_poll_add(sqe, peer_pidfds[i], POLLIN);
		sqe->user_data = UW_TAG(gen, UW_POLL);
		uw->pinflight++;
	}
	*syscalls += 1;
	r = io_uring_submit(uw->pring);
	if (r < 0) {
		uw->pinflight = 0;
		return r;
	}
	uw->parmed = 1;
	return 0;
}

/* The two flavours differ only in the name they report. */
#define UW_OPS(nm)                                                             \
	{                                                                      \
		.name = (nm), .wait = uw_wait, .wake = uw_wake,                \
		.destroy = uw_destroy, .pollfd = uw_pollfd, .arm = uw_arm,     \
		.disarm = uw_disarm,                                           \
	}
static const struct up__wake_ops uw_ops = UW_OPS("io_uring");
static const struct up__wake_ops uw_ops_sqpoll = UW_OPS("io_uring-sqpoll");
#undef UW_OPS

/* ---- construction ------------------------------------------------------- */

static int probe_ok(struct io_uring *ring)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(ring);
	int ok;

	if (!p)
		return 0;
	ok = io_uring_opcode_supported(p, UP__IORING_OP_FUTEX_WAIT) &&
	     io_uring_opcode_supported(p, UP__IORING_OP_FUTEX_WAKE) &&
	     io_uring_opcode_supported(p, IORING_OP_POLL_ADD) &&
	     io_uring_opcode_supported(p, IORING_OP_ASYNC_CANCEL);
	io_uring_free_probe(p);
	return ok;
}

/*
 * The probe only says the opcodes exist. Run one FUTEX_WAIT whose value
 * differs (must give -EAGAIN) and one FUTEX_WAKE (must give >= 0), so a
 * kernel that rejects our hand-made encoding is found here, not in a sleep.
 */
static int selftest_ok(struct uring_waker *uw)
{
	_Atomic uint32_t word = 1;
	uint64_t calls = 0;
	unsigned inflight = 0;
	int got_wait = 0, got_wake = 0, tries;
	struct io_uring_sqe *sqe;

	sqe = io_uring_get_sqe(&uw->ring);
	if (!sqe)
		return 0;
	prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, &word, 0, UW_TAG(1, UW_FUTEX));
	sqe = io_uring_get_sqe(&uw->ring);
	if (!sqe)
		return 0;
	prep_futex(sqe, UP__IORING_OP_FUTEX_WAKE, &word, INT32_MAX,
		   UW_TAG(1, UW_WAKE));
	inflight = 2;
	for (tries = 0; inflight && tries < 20; tries++) {
		const struct __kernel_timespec ts = { .tv_sec = 0,
						      .tv_nsec = 50000000 };
		struct io_uring_cq *cq = &uw->ring.cq;
		unsigned head, tail;

		int r = ring_enter(uw, sq_publish(uw), inflight,
				   IORING_ENTER_GETEVENTS, &ts, &calls);

		if (r < 0 && r != -EINTR && r != -ETIME)
			return 0;
		tail = cq_peek(cq, &head);
		for (; head != tail && inflight; head++, inflight--) {
			const struct io_uring_cqe *c =
				&cq->cqes[head & cq->ring_mask];

			if ((c->user_data & 0xff) == UW_FUTEX)
				got_wait = c->res == -EAGAIN;
			else
				got_wake = c->res >= 0;
		}
		cq_advance(cq, head);
	}
	return !inflight && got_wait && got_wake;
}

/*
 * One SQ thread per process. Every SQPOLL ring attaches
 * (IORING_SETUP_ATTACH_WQ) to an anchor ring made the first time one is
 * asked for, so any number of endpoints cost one polling kernel thread.
 * With a thread per ring, each endpoint's thread spun for its idle time
 * after every wake: on two cores, with a few endpoints, a wake waited for
 * its own thread to get a core, and sleepers ran out their slice instead
 * (test_lock_handoff_sqpoll beside four busy loops failed 13 runs of 30).
 *
 * The anchor lives as long as the process: one fd and a kernel thread
 * that sleeps while idle. A forked child cannot attach to its parent's
 * ring (the kernel refuses another thread group's SQ thread), so it makes
 * its own anchor. Should attaching fail (the fd was closed behind our
 * back, and maybe reused), a ring gets a thread of its own, as before.
 *
 * The lock is a word holding the holder's pid, so a child forked while
 * another thread of its parent held it can take it over. A fork handler
 * closes the inherited fd in the child before the child runs, while the
 * number is still the ring's; a child made without fork handlers (a raw
 * clone) leaves it open instead, since by then the number may name a file
 * of the program's own.
 */
static _Atomic pid_t sq_anchor_lock;
static struct io_uring sq_anchor_ring;
static pid_t sq_anchor_pid; /* process that made the anchor; 0: none */
static pid_t sq_anchor_failed; /* process in which making it failed */
static bool sq_anchor_atfork;

static void sq_anchor_lock_take(void)
{
	const pid_t me = getpid();
	pid_t cur;

	for (;;) {
		cur = 0;
		if (atomic_compare_exchange_weak_explicit(&sq_anchor_lock, &cur, me,
							  memory_order_acquire,
							  memory_order_relaxed))
			return;
		/* Held by our parent's thread when it forked us (a child made
		 * without fork handlers): ours now. */
		if (cur != 0 && cur != me &&
		    atomic_compare_exchange_strong_explicit(&sq_anchor_lock, &cur, me,
							    memory_order_acquire,
							    memory_order_relaxed))
			return;
		sched_yield();
	}
}

static void sq_anchor_lock_drop(void)
{
	atomic_store_explicit(&sq_anchor_lock, 0, memory_order_release);
}

/* Fork handlers: no anchor is half made while the process forks, and the
 * child closes the forking process's anchor fd before it runs. An anchor
 * of an older generation (inherited over a raw clone, then forked again)
 * is forgotten, not closed: its number may name another file by now. */
static void sq_anchor_child(void)
{
	if (sq_anchor_pid != 0 && sq_anchor_pid == getppid())
		close(sq_anchor_ring.ring_fd);
	sq_anchor_pid = 0;
	sq_anchor_failed = 0;
	atomic_store_explicit(&sq_anchor_lock, 0, memory_order_relaxed);
}

static int sq_anchor_fd(void)
{
	const pid_t me = getpid();
	int fd = -1;

	sq_anchor_lock_take();
	if (!sq_anchor_atfork)
		sq_anchor_atfork = pthread_atfork(sq_anchor_lock_take, sq_anchor_lock_drop,
						  sq_anchor_child) == 0;
	if (sq_anchor_pid != me && sq_anchor_failed != me) {
		struct io_uring_params p;

		/* A parent's anchor that no fork handler closed: its mappings
		 * did not come along (DONTFORK), and its fd is left alone. */
		sq_anchor_pid = 0;
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = UW_SQ_IDLE_MS;
		if (io_uring_queue_init_params(1, &sq_anchor_ring, &p) == 0) {
			(void)io_uring_ring_dontfork(&sq_anchor_ring);
			sq_anchor_pid = me;
		} else {
			sq_anchor_failed = me;
		}
	}
	if (sq_anchor_pid == me)
		fd = sq_anchor_ring.ring_fd;
	sq_anchor_lock_drop();
	return fd;
}

struct up__waker *up__waker_uring_new(int sqpoll)
{
	struct uring_waker *uw;
	int anchor = -1, r;
	__u32 features = 0;

	uw = up__calloc(1, sizeof(*uw));
	if (!uw)
		return NULL;
	if (sqpoll)
		anchor = sq_anchor_fd();
	/* Fails with -ENOSYS, -EPERM (kernel.io_uring_disabled, seccomp),
	 * -ENOMEM (memlock) ...: the caller falls back to futex(2). */
	r = ring_init(&uw->ring, sqpoll, anchor, &features);
	if (r < 0 && anchor >= 0)
		r = ring_init(&uw->ring, sqpoll, -1, &features);
	if (r < 0)
		goto err_free;
	/* EXT_ARG carries our timeout, NODROP keeps CQEs on overflow,
	 * CQE_SKIP silences successful wakes. All predate the futex opcodes,
	 * so this only rejects odd kernels. */
	if (!(features & IORING_FEAT_EXT_ARG) || !(features & IORING_FEAT_NODROP) ||
	    !(features & IORING_FEAT_CQE_SKIP))
		goto err_exit;
	if (!probe_ok(&uw->ring))
		goto err_exit;
	uw->sqpoll = sqpoll != 0;
	uw->owner = getpid();
	if (!selftest_ok(uw))
		goto err_exit;
	/* A forked child must not drive its parent's ring through shared
	 * mappings: keep them out of the child, so misuse faults loudly
	 * instead of corrupting the parent's SQ. Best effort. */
	(void)io_uring_ring_dontfork(&uw->ring);
	uw->base.ops = sqpoll ? &uw_ops_sqpoll : &uw_ops;
	return &uw->base;

err_exit:
	io_uring_queue_exit(&uw->ring);
err_free:
	up__free(uw);
	return NULL;
}
