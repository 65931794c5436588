/* SPDX-License-Identifier: MIT */
/*
 * wake_uring.c - the io_uring sleep/wake backend (see core/wake.h): making
 * a waker, wait, wake, destroy, and its ops table.
 *
 * Waits and wakes use the calling thread's ring (tring.c says what must
 * stay true of those). An endpoint's waker (struct uring_waker) holds no
 * ring of its own until up_pollfd() asks for its poll ring (poll_ring.c).
 *
 * A wait arms, in one submission, an IORING_OP_FUTEX_WAIT on the
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
 * first (up__uw_drain_wakes()).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <liburing.h>

#include "up_int.h"

#include "uring_int.h"

static int ring_wait(struct uw_ring *uw, _Atomic uint32_t *word, uint32_t expect,
		     uint64_t timeout_ns, const int *peer_pidfds, int npeer,
		     uint64_t *syscalls)
{
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
		/* No room (the kernel took none of the SQEs to make some):
		 * watch the peers armed so far; the caller's slice covers the
		 * rest, as for peers beyond UW_MAX_PEERS. */
		if (!sqe)
			break;
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

	if (inflight)
		up__uw_cancel(uw, gen, &inflight, &result, syscalls);
	if (result == UW_PENDING)
		result = -EIO;
	if (result >= 0 || result == -ETIMEDOUT || result == -EINTR)
		return result;
	/* A broken ring cannot report a hard error back to the sleeper loop
	 * usefully; the caller re-checks, and the ring is retired
	 * (up__tring_put()). */
	if (uw->broken)
		return 0;
	/* The kernel refused this wait (short of memory, say): it is a sleep
	 * all the same, through futex(2), which watches no peer; the
	 * caller's slice bounds it. A sleeper never sees the ring's error. */
	if (deadline) {
		uint64_t t = up__now_ns();

		if (t >= deadline)
			return -ETIMEDOUT;
		timeout_ns = deadline - t;
	}
	return up__futex_wait(word, expect, timeout_ns, syscalls);

hard_fail:
	uw->broken = 1;
	return up__futex_wait(word, expect, timeout_ns, syscalls);
}

static int ring_wake(struct uw_ring *uw, _Atomic uint32_t *word, uint32_t nr,
		     const struct up_shm_wait *line, uint64_t *syscalls)
{
	struct io_uring_sqe *sqe = NULL;
	unsigned none = 0;
	int dummy = UW_PENDING, err;
	uint32_t bits = UP_FUTEX_BITS_ANY;
	/* The futex(2) fallbacks wake every bit, so for every sleeper of a
	 * line (wake.h, up__wake_nr()). */
	uint32_t nr_any = line ? UP_WAKE_ALL : nr;
	bool poked;

	if (uw->broken)
		return up__futex_wake(word, nr_any, syscalls);

	/* Never wait for a wake's completion; successful wakes post no CQE
	 * at all, and a failed one is picked up here (two loads when the CQ
	 * is empty) and reported by this call. */
	up__uw_cq_reap(uw, 0, &none, &dummy);
	/* Pokes first (poll_ring.c): their CQEs make the poked poll rings
	 * readable before this FUTEX_WAKE's task work reaches their threads.
	 * Not with SQPOLL: its thread would look the fds up after the pokes'
	 * lock is dropped. They leave room for the FUTEX_WAKE, and say what
	 * it must wake (bits), 0 when the pokes reach every sleeper. */
	if (uw->sqpoll)
		bits = line ? up__wake_bits(line, 0) : UP_FUTEX_BITS_ANY;
	poked = !uw->sqpoll && up__uw_poke_begin(&uw->ring, word, nr, line, &bits) > 0;
	if (bits == 0 && !poked)
		return 0; /* earlier pokes of this arm reach every sleeper */
	if (line)
		nr = up__wake_nr(nr, bits);
	if (bits != 0) {
		sqe = io_uring_get_sqe(&uw->ring);
		if (!sqe) {
			/* SQ full: the SQ thread is behind. A direct futex(2)
			 * wake is equivalent (shared futex, same word) and
			 * cannot block. (Pokes leave room for the FUTEX_WAKE;
			 * should they not, they are undone before the lock
			 * goes.) */
			if (poked)
				up__uw_poke_end(&uw->ring);
			return up__futex_wake(word, nr_any, syscalls);
		}
		uw_prep_futex(sqe, UP__IORING_OP_FUTEX_WAKE, word, nr, UW_TAG(0, UW_WAKE));
		sqe->addr3 = bits;
		/* A successful wake posts nothing: no CQ traffic to reap, and
		 * with SQPOLL no late wake CQE can cut a later wait's sleep
		 * short. */
		sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
	}
	if (uw->sqpoll) {
		up__uw_sq_publish(uw);
		/* Enters only if the SQ thread sleeps. */
		if (up__uw_sq_needs_wakeup(uw)) {
			int r = up__uw_enter(uw, 0, 0, 0, NULL, syscalls);

			if (r < 0)
				return up__futex_wake(word, nr_any, syscalls);
		}
	} else {
		int r = up__uw_enter(uw, up__uw_sq_publish(uw), 0, 0, NULL, syscalls);

		/* An enter that took only part of the SQEs (it stops at one it
		 * cannot allocate) returns the count taken: the FUTEX_WAKE,
		 * behind the pokes, or pokes that stand for it, are then still
		 * queued, as on an error. */
		if (poked && up__uw_poke_end(&uw->ring) != 0 && r >= 0)
			r = -EAGAIN;
		if (r < 0) {
			/* An SQE left queued goes out with the next enter (a
			 * harmless extra wake); wake now by hand, every bit, so
			 * the sleeper does not wait for that. */
			return up__futex_wake(word, nr_any, syscalls);
		}
		/* Without SQPOLL the wake and the pokes ran inline; a failed
		 * one's CQE is already there, so errors surface on this very
		 * call. A poked ring whose poke failed waits with
		 * UP_FUTEX_BIT_POLL, which a wake of bits 0 or
		 * UP_FUTEX_BIT_SLEEP did not reach: wake every bit. */
		up__uw_cq_reap(uw, 0, &none, &dummy);
		if (uw->poke_err) {
			uw->poke_err = 0;
			if (bits != UP_FUTEX_BITS_ANY)
				return up__futex_wake(word, nr_any, syscalls);
		}
	}
	err = uw->wake_err;
	uw->wake_err = 0;
	return err;
}

static int uw_wait(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
		   uint64_t timeout_ns, const int *peer_pidfds, int npeer,
		   uint64_t *syscalls)
{
	struct uw_ring *tr;
	int r;

	/* [u-wait-word] acq: what core/ published before it changed *word;
	 * pairs with [u-wait-word] sc in up__wake_line_slow(), and with every
	 * seq_cst or release store by which core/ changes a wait word before
	 * it asks the backend to wake (the lock drop, the busy stores: the
	 * wake.h contract of .wait). The kernel compares again under the futex
	 * bucket lock; this load only saves the enter when the change is
	 * already visible. */
	if (atomic_load_explicit(word, memory_order_acquire) != expect)
		return 0;
	tr = up__tring_take(to_uw(w));
	if (!tr)
		return up__futex_wait(word, expect, timeout_ns, syscalls);
	r = ring_wait(tr, word, expect, timeout_ns, peer_pidfds, npeer, syscalls);
	up__tring_put(tr);
	return r;
}

static int uw_wake(struct up__waker *w, _Atomic uint32_t *word, uint32_t nr,
		   const struct up_shm_wait *line, uint64_t *syscalls)
{
	struct uw_ring *tr = up__tring_take(to_uw(w));
	int r;

	if (!tr)
		return up__futex_wake(word, line ? UP_WAKE_ALL : nr, syscalls);
	r = ring_wake(tr, word, nr, line, syscalls);
	up__tring_put(tr);
	return r;
}

static void uw_destroy(struct up__waker *w)
{
	struct uring_waker *uw = to_uw(w);

	if (uw->sqpoll)
		up__tring_drain_sqpoll();
	/* Tearing the poll ring down cancels anything still armed. */
	up__uw_pring_exit(uw);
	up__free(uw);
}

/* The two flavours differ only in the name they report. */
#define UW_OPS(nm)                                                 \
	{                                                          \
		.name = (nm), .polls_fds = true, .wait = uw_wait,  \
		.wake = uw_wake,                                   \
		.destroy = uw_destroy, .pollfd = up__uw_pollfd,    \
		.arm = up__uw_arm, .disarm = up__uw_disarm,        \
		.arm_now = up__uw_arm_now,                         \
	}
static const struct up__wake_ops uw_ops = UW_OPS("io_uring");
static const struct up__wake_ops uw_ops_sqpoll = UW_OPS("io_uring-sqpoll");
#undef UW_OPS

/*
 * An endpoint's waker, made with the calling thread's ring (made now if
 * the thread has none: a thread that opens an end is one that will likely
 * sleep or wake on it, and a sleeper that is seen asleep is then asleep in
 * its wait, not in the self-test of its ring). The first thread's ring is
 * the process's probe: if io_uring is refused, every endpoint of the
 * process gets NULL here and so the futex waker. A thread that cannot make
 * a ring later (out of fds, say) waits and wakes through futex(2).
 */
struct up__waker *up__waker_uring_new(int sqpoll)
{
	struct uring_waker *uw;
	int fl = sqpoll != 0;

	if (!up__tring_usable(fl))
		return NULL;
	uw = up__calloc(1, sizeof(*uw));
	if (!uw)
		return NULL;
	uw->sqpoll = fl;
	uw->poke_slot = -1;
	uw->base.ops = fl ? &uw_ops_sqpoll : &uw_ops;
	return &uw->base;
}
