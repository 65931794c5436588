/* SPDX-License-Identifier: MIT */
/*
 * wake_uring.c - the io_uring sleep/wake backend (see core/wake.h): making
 * a waker (probe, self-test), wait, wake, destroy, and its ops table.
 *
 * Each waker owns a small private ring (UW_SQ_ENTRIES SQEs, UW_CQ_ENTRIES
 * CQEs). A wait arms, in one submission, an IORING_OP_FUTEX_WAIT on the
 * shared word plus one IORING_OP_POLL_ADD(POLLIN) per peer pidfd (a pidfd
 * turns readable when its process has exited), then blocks in
 * io_uring_enter(GETEVENTS) with the timeout passed through
 * IORING_ENTER_EXT_ARG, which, unlike a timeout SQE, needs no cancel and
 * posts no CQE. The first completion of this wait's generation decides the
 * result; everything still armed is then cancelled with one
 * IORING_OP_ASYNC_CANCEL(ANY|ALL) and its CQEs are reaped before returning,
 * so the ring is empty when the next wait starts. Polls are not kept armed
 * across waits: a poll pins the pidfd's file, and the caller may close the
 * fd and reuse its number for another process.
 *
 * A wake queues an IORING_OP_FUTEX_WAKE (of one waiter, or all) with
 * IOSQE_CQE_SKIP_SUCCESS and does not wait for it: without SQPOLL the one
 * io_uring_enter that submits it is the wake's only system call; with SQPOLL
 * there is none while the SQ thread is awake. Skipping the success CQE keeps
 * the CQ free of wake traffic, so with SQPOLL a late wake completion cannot
 * end a later wait's sleep early. Destroy pushes still-unissued wakes out
 * first (drain_wakes()).
 *
 * An endpoint, hence its waker, is used by one thread at a time but not
 * always the same thread: the ring is not IORING_SETUP_SINGLE_ISSUER and its
 * fd is not registered (a registration is per task).
 *
 * A waker must not be used across fork(): its ring is mapped MADV_DONTFORK,
 * so a child can only destroy it (which is safe) and must create its own.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include <liburing.h>

#include "up_int.h"

#include "uring_int.h"

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
	up__uw_cq_reap(uw, 0, &inflight, &result);
	/* [u-wait-word] acq: what core/ published before it changed *word;
	 * pairs with [u-wait-word] sc in up__wake_line_slow(), and with every
	 * seq_cst or release store by which core/ changes a wait word before
	 * it asks the backend to wake (the lock drop, the busy stores: the
	 * wake.h contract of .wait). The kernel compares again under the futex
	 * bucket lock; this load only saves the enter when the change is
	 * already visible. */
	if (atomic_load_explicit(word, memory_order_acquire) != expect)
		return 0;

	if (timeout_ns) {
		uint64_t t = up__now_ns();

		deadline = timeout_ns > UINT64_MAX - t ? UINT64_MAX
						       : t + timeout_ns;
	}
	gen = ++uw->gen;

	sqe = up__uw_sqe_get(uw, syscalls);
	if (!sqe)
		goto hard_fail;
	uw_prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, word, expect, UW_TAG(gen, UW_FUTEX));
	inflight++;
	if (npeer > UW_MAX_PEERS)
		npeer = UW_MAX_PEERS;
	for (i = 0; i < npeer; i++) {
		if (peer_pidfds[i] < 0)
			continue;
		sqe = up__uw_sqe_get(uw, syscalls);
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
		unsigned pending = up__uw_sq_publish(uw);
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
		r = up__uw_enter(uw, pending, 1, IORING_ENTER_GETEVENTS, tsp, syscalls);
		seen = up__uw_cq_reap(uw, gen, &inflight, &result);
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
		up__uw_cancel(uw, gen, &inflight, &result, syscalls);
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
	up__uw_cq_reap(uw, 0, &none, &dummy);
	sqe = io_uring_get_sqe(&uw->ring);
	if (!sqe) {
		/* SQ full: the SQ thread is behind. A direct futex(2) wake
		 * is equivalent (shared futex, same word) and cannot block. */
		return up__futex_wake(word, nr, syscalls);
	}
	uw_prep_futex(sqe, UP__IORING_OP_FUTEX_WAKE, word, nr, UW_TAG(0, UW_WAKE));
	/* A successful wake posts nothing: no CQ traffic to reap, and with
	 * SQPOLL no late wake CQE can cut a later wait's sleep short. */
	sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
	if (uw->sqpoll) {
		up__uw_sq_publish(uw);
		/* Enters only if the SQ thread sleeps. */
		if (up__uw_sq_needs_wakeup(uw)) {
			int r = up__uw_enter(uw, 0, 0, 0, NULL, syscalls);

			if (r < 0)
				return up__futex_wake(word, nr, syscalls);
		}
	} else {
		int r = up__uw_enter(uw, up__uw_sq_publish(uw), 0, 0, NULL, syscalls);

		if (r < 0) {
			/* The SQE stays queued and goes out with the next
			 * enter (a harmless extra wake); wake now by hand so
			 * the sleeper does not wait for that. */
			return up__futex_wake(word, nr, syscalls);
		}
		/* Without SQPOLL the wake ran inline; its CQE is usually
		 * already there, so errors surface on this very call. */
		up__uw_cq_reap(uw, 0, &none, &dummy);
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

	if (uw->broken || up__uw_sq_publish(uw) == 0)
		return;
	sqe = up__uw_sqe_get(uw, &calls);
	if (!sqe)
		return;
	io_uring_prep_nop(sqe);
	/* Generation 0 belongs to no wait, so up__uw_cq_reap() counts it here. */
	sqe->user_data = UW_TAG(0, UW_CANCEL);
	for (round = 0; inflight && round < 10; round++) {
		int r = up__uw_enter(uw, up__uw_sq_publish(uw), 1,
				     IORING_ENTER_GETEVENTS, &ts, &calls);

		up__uw_cq_reap(uw, 0, &inflight, &dummy);
		if (r < 0 && r != -EINTR && r != -ETIME)
			break;
	}
}

static void uw_destroy(struct up__waker *w)
{
	struct uring_waker *uw = to_uw(w);

	/* In a forked child the ring is not ours (and not mapped: DONTFORK);
	 * only the parent may push its last wakes out. Closing our fd copy
	 * and unmapping nothing is all the child may do. */
	if (getpid() == uw->owner)
		drain_wakes(uw);
	/* Tearing the rings down cancels anything still armed. */
	up__uw_pring_exit(uw);
	io_uring_queue_exit(&uw->ring);
	up__free(uw);
}

/* The two flavours differ only in the name they report. */
#define UW_OPS(nm)                                                 \
	{                                                          \
		.name = (nm), .wait = uw_wait, .wake = uw_wake,    \
		.destroy = uw_destroy, .pollfd = up__uw_pollfd,    \
		.arm = up__uw_arm, .disarm = up__uw_disarm,        \
	}
static const struct up__wake_ops uw_ops = UW_OPS("io_uring");
static const struct up__wake_ops uw_ops_sqpoll = UW_OPS("io_uring-sqpoll");
#undef UW_OPS

/* Whether this kernel knows every opcode a wait and a wake use. */
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
	unsigned inflight = 2; /* the FUTEX_WAIT and the FUTEX_WAKE below */
	int got_wait = 0, got_wake = 0, tries;
	struct io_uring_sqe *sqe;

	sqe = io_uring_get_sqe(&uw->ring);
	if (!sqe)
		return 0;
	uw_prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, &word, 0, UW_TAG(1, UW_FUTEX));
	sqe = io_uring_get_sqe(&uw->ring);
	if (!sqe)
		return 0;
	uw_prep_futex(sqe, UP__IORING_OP_FUTEX_WAKE, &word, INT32_MAX,
		      UW_TAG(1, UW_WAKE));
	for (tries = 0; inflight && tries < 20; tries++) {
		const struct __kernel_timespec ts = { .tv_sec = 0,
						      .tv_nsec = 50000000 };
		struct io_uring_cq *cq = &uw->ring.cq;
		unsigned head, tail;
		int r = up__uw_enter(uw, up__uw_sq_publish(uw), inflight,
				     IORING_ENTER_GETEVENTS, &ts, &calls);

		if (r < 0 && r != -EINTR && r != -ETIME)
			return 0;
		tail = up__uw_cq_peek(cq, &head);
		for (; head != tail && inflight; head++, inflight--) {
			const struct io_uring_cqe *c =
				&cq->cqes[head & cq->ring_mask];

			if ((c->user_data & 0xff) == UW_FUTEX)
				got_wait = c->res == -EAGAIN;
			else
				got_wake = c->res >= 0;
		}
		up__uw_cq_advance(cq, head);
	}
	return !inflight && got_wait && got_wake;
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
		anchor = up__uw_sq_anchor_fd();
	/* Fails with -ENOSYS, -EPERM (kernel.io_uring_disabled, seccomp),
	 * -ENOMEM (memlock) ...: the caller falls back to futex(2). */
	r = up__uw_ring_init(&uw->ring, sqpoll, anchor, &features);
	if (r < 0 && anchor >= 0)
		r = up__uw_ring_init(&uw->ring, sqpoll, -1, &features);
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
