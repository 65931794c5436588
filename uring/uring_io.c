/* SPDX-License-Identifier: MIT */
/*
 * uring_io.c - a thread's ring (struct uw_ring): setup, the opcode probe and
 * the futex self-test, publishing SQEs, io_uring_enter, reaping CQEs,
 * cancelling what a wait left armed, draining queued wakes.
 *
 * We publish SQEs and enter the kernel ourselves (up__uw_sq_publish(),
 * up__uw_enter()) instead of calling io_uring_submit*(): the system-call
 * budget (tests/test_syscalls.c) counts every io_uring_enter, and liburing
 * decides internally whether to enter (SQPOLL wake-up flag, CQ overflow
 * flush, timeout loops), so only a call we make ourselves can be counted
 * exactly. liburing is still used for setup, io_uring_get_sqe(), the probe
 * and the plain prep helpers.
 *
 * The ring indices are shared with the kernel, which is the partner of every
 * acquire and release here (the u-sq-* and u-cq-* tags).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liburing.h>

#include "uring_int.h"

/* We treat the kernel's ring indices as atomics (as liburing's barrier.h
 * does); that needs lock-free 32-bit atomics of the same size. */
_Static_assert(sizeof(_Atomic unsigned) == sizeof(unsigned), "atomic size");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "atomic unsigned must be lock-free");

/*
 * Set up @ring as every ring of ours is: UW_SQ_ENTRIES SQEs, UW_CQ_ENTRIES
 * CQEs; with @sqpoll an SQ thread, shared with @attach_fd's when that is a
 * ring (>= 0). Returns io_uring_queue_init_params()'s result; *features gets
 * the kernel's IORING_FEAT_* bits.
 */
int up__uw_ring_init(struct io_uring *ring, int sqpoll, int attach_fd, __u32 *features)
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
unsigned up__uw_sq_publish(struct uw_ring *uw)
{
	struct io_uring_sq *sq = &uw->ring.sq;
	unsigned tail = sq->sqe_tail;
	/* relaxed: our own last store; we are the only writer of the SQ tail. */
	unsigned kt = atomic_load_explicit((_Atomic unsigned *)sq->ktail,
					   memory_order_relaxed);

	/* io_uring_get_sqe() hands out sqes[n & mask] for the n-th SQE; map
	 * the SQ array slots 1:1 to that, whatever liburing set up. */
	for (; kt != tail; kt++)
		sq->array[kt & sq->ring_mask] = kt & sq->ring_mask;
	sq->sqe_head = tail;
	/* [u-sq-tail] rel: the SQEs and SQ array slots below tail; pairs with
	 * the kernel's smp_load_acquire of the SQ tail (io_sqring_entries()). */
	atomic_store_explicit((_Atomic unsigned *)sq->ktail, tail,
			      memory_order_release);
	/* [u-sq-head] acq: the kernel's reads of the SQEs below head are done,
	 * so a slot refilled after this load is not read half-written; pairs
	 * with the kernel's smp_store_release of the SQ head
	 * (io_commit_sqring()). */
	return tail - atomic_load_explicit((_Atomic unsigned *)sq->khead,
					   memory_order_acquire);
}

/*
 * With SQPOLL, after up__uw_sq_publish(): whether the SQ thread has gone to
 * sleep, so that what was published needs an enter with
 * IORING_ENTER_SQ_WAKEUP to be seen. Either the thread sees our new tail
 * before it sleeps, or we see its NEED_WAKEUP flag; never neither.
 */
bool up__uw_sq_needs_wakeup(struct uw_ring *uw)
{
	/* [u-sq-wakeup] mb: orders our store of the SQ tail (in
	 * up__uw_sq_publish()) before the load of the SQ flags; pairs with the
	 * kernel's smp_mb__after_atomic() in io_sq_thread() between setting
	 * IORING_SQ_NEED_WAKEUP and re-reading the SQ tail (liburing's
	 * sq_ring_needs_enter() does the same). */
	atomic_thread_fence(memory_order_seq_cst);
	/* relaxed: only read; the [u-sq-wakeup] fence above orders it. */
	return atomic_load_explicit((_Atomic unsigned *)uw->ring.sq.kflags,
				    memory_order_relaxed) &
	       IORING_SQ_NEED_WAKEUP;
}

/*
 * One io_uring_enter, counted. With SQPOLL the SQ thread does the submitting
 * (to_submit is ignored by the kernel except as the return value, so we pass
 * 0 and keep wait errors visible) and we only add SQ_WAKEUP when it sleeps.
 */
int up__uw_enter(struct uw_ring *uw, unsigned to_submit, unsigned min_complete,
		 unsigned flags, const struct __kernel_timespec *ts, uint64_t *syscalls)
{
	struct io_uring_getevents_arg arg;
	long r;

	if (uw->sqpoll) {
		to_submit = 0;
		if (up__uw_sq_needs_wakeup(uw))
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
	if (r >= 0)
		return (int)r;
	r = -errno;
	/* The number is no longer our ring's: nothing it says can be
	 * trusted again, and it is not ours to close (tring.c). */
	if (r == -EBADF || r == -EOPNOTSUPP) {
		uw->fd_lost = 1;
		uw->broken = 1;
	}
	return (int)r;
}

/* An SQE, making room if the SQ is full (only possible with SQPOLL, or after
 * a failed enter). NULL if the kernel will not take any. */
struct io_uring_sqe *up__uw_sqe_get(struct uw_ring *uw, uint64_t *syscalls)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&uw->ring);
	unsigned pending;

	if (sqe)
		return sqe;
	pending = up__uw_sq_publish(uw);
	if (up__uw_enter(uw, pending, 0, uw->sqpoll ? IORING_ENTER_SQ_WAIT : 0u,
			 NULL, syscalls) < 0)
		return NULL;
	return io_uring_get_sqe(&uw->ring);
}

/* The CQEs the kernel has posted: [*head, returned tail). */
unsigned up__uw_cq_peek(struct io_uring_cq *cq, unsigned *head)
{
	/* relaxed: our own last store; we are the only writer of the CQ head. */
	*head = atomic_load_explicit((_Atomic unsigned *)cq->khead,
				     memory_order_relaxed);
	/* [u-cq-tail] acq: the CQEs below tail, written before it moved; pairs
	 * with the kernel's smp_store_release of the CQ tail
	 * (io_commit_cqring()). */
	return atomic_load_explicit((_Atomic unsigned *)cq->ktail,
				    memory_order_acquire);
}

/* Hand the CQ slots below @head back to the kernel. */
void up__uw_cq_advance(struct io_uring_cq *cq, unsigned head)
{
	/* [u-cq-head] rel: our reads of the CQEs below head are done before
	 * the kernel may overwrite their slots; pairs with the kernel's load
	 * of the CQ head when it looks for a free CQE slot (the kernel orders
	 * its CQE stores after that load by a control dependency). */
	atomic_store_explicit((_Atomic unsigned *)cq->khead, head,
			      memory_order_release);
}

/*
 * Consume every visible CQE. CQEs of generation @gen lower *inflight and,
 * for the first meaningful one, set *result. Wake CQEs only record an error.
 * Anything else is stale by construction (each wait reaps its own before
 * returning) and dropped. Returns how many CQEs were consumed.
 */
unsigned up__uw_cq_reap(struct uw_ring *uw, uint64_t gen, unsigned *inflight,
			int *result)
{
	struct io_uring_cq *cq = &uw->ring.cq;
	unsigned head, tail = up__uw_cq_peek(cq, &head);
	unsigned n = 0;

	for (; head != tail; head++, n++) {
		const struct io_uring_cqe *cqe = &cq->cqes[head & cq->ring_mask];
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		unsigned kind = (unsigned)(ud & 0xff);

		if (kind == UW_POKE) {
			/* Only failed pokes post a CQE (CQE_SKIP_SUCCESS); the
			 * wake that sent it then wakes every bit, unless its
			 * FUTEX_WAKE already did (ring_wake()). */
			uw->poke_err = 1;
			continue;
		}
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
		up__uw_cq_advance(cq, tail);
	return n;
}

/*
 * Cancel whatever of generation @gen is still armed and wait for all of its
 * CQEs, so no completion outlives the wait that armed it. Every armed request
 * posts exactly one CQE (completed or -ECANCELED) and the cancel posts one.
 */
void up__uw_cancel(struct uw_ring *uw, uint64_t gen, unsigned *inflight,
		   int *result, uint64_t *syscalls)
{
	/* 100 ms per round and a bounded number of fruitless rounds: a cancel
	 * of a futex wait or a poll completes at once, so hitting the bound
	 * means the ring is broken, not slow. */
	const struct __kernel_timespec ts = { .tv_sec = 0,
					      .tv_nsec = 100000000LL };
	struct io_uring_sqe *sqe = up__uw_sqe_get(uw, syscalls);
	int idle = 0;

	if (!sqe) {
		uw->broken = 1;
		return;
	}
	/* ANY|ALL: the ring is private to this thread, used by one call at a
	 * time (uw_ring.busy), and the only other requests ever in it are
	 * FUTEX_WAKEs, which are never pending. */
	io_uring_prep_cancel64(sqe, 0,
			       IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	sqe->user_data = UW_TAG(gen, UW_CANCEL);
	(*inflight)++;
	while (*inflight) {
		unsigned pending = up__uw_sq_publish(uw);
		int r = up__uw_enter(uw, pending, *inflight, IORING_ENTER_GETEVENTS,
				     &ts, syscalls);

		if (up__uw_cq_reap(uw, gen, inflight, result))
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
void up__uw_drain_wakes(struct uw_ring *uw)
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

/* Whether this kernel knows every opcode a wait and a wake use. */
int up__uw_probe_ok(struct io_uring *ring)
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
int up__uw_selftest_ok(struct uw_ring *uw)
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
