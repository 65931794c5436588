/* SPDX-License-Identifier: MIT */
/*
 * wake_uring.c - the io_uring sleep/wake backend (see core/wake.h): making
 * a waker (the thread's ring, probed and self-tested by uring_io.c), wait,
 * wake, destroy, and its ops table.
 *
 * The rings that sleep and wake belong to threads, not to endpoints: each
 * thread has at most one of each flavour (plain, and SQPOLL for pipes made
 * with UP_CFG_SQPOLL), a struct uw_ring of UW_SQ_ENTRIES SQEs and
 * UW_CQ_ENTRIES CQEs, made at the thread's first wait or wake that needs it
 * (or at the process's first endpoint, whose ring is the probe) and freed
 * by a pthread key destructor when the thread exits. An endpoint's waker
 * (struct uring_waker) holds no ring of its own until up_pollfd() asks for
 * its poll ring (poll_ring.c). So a process pays one fd per pipe (the
 * memfd) plus a constant per thread, whatever the number of ends.
 *
 * What must stay true:
 *  - A ring is used by its own thread only and by one call at a time. An
 *    endpoint may move between threads (each call uses the calling thread's
 *    ring), and two ends asleep in two threads sleep in two rings. A wait
 *    or a wake marks the ring busy ([u-reenter]); a signal handler that
 *    calls into the library while its thread is inside one (asleep, say)
 *    finds it busy and waits or wakes through futex(2) instead, on the same
 *    shared word, so nothing is lost and the outer call's ring is left as
 *    it was. The same holds while the ring is being made.
 *  - A thread's ring is never used across fork(): its mappings are
 *    MADV_DONTFORK, and an atfork child handler closes the child's copies
 *    of every thread's ring fds (the process's list of rings) and forgets
 *    them before the child runs, so a child's threads make their own.
 *  - Queued wakes reach the kernel before their segment may be unmapped:
 *    with SQPOLL a wake is an SQE until the SQ thread takes it, so an end's
 *    destroy drains the calling thread's SQPOLL ring, and a thread's exit
 *    drains both (up__uw_drain_wakes()).
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
 *
 * A thread ring is only ever entered by its thread, but it is not
 * IORING_SETUP_SINGLE_ISSUER (nothing here relies on that) and its fd is
 * not registered.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <liburing.h>

#include "up_int.h"

#include "uring_int.h"

/* The calling thread's rings: [0] plain, [1] SQPOLL; zeroed by the C
 * runtime for every new thread. */
struct uw_thread {
	struct uw_ring *r[2];
	int failed[2]; /* making one failed here: futex(2) for good */
	int making;    /* inside tring_new(): see [u-reenter] */
	int forking;   /* between our atfork prepare and parent/child handlers */
};

static __thread struct uw_thread uw_tls;
static pthread_key_t uw_tls_key;
static int uw_tls_key_ok;
static pthread_once_t uw_tls_once = PTHREAD_ONCE_INIT;
/* Per flavour: 0 not probed yet in this process, 1 io_uring works, -1 it
 * is refused (up__waker_uring_new()). Reset in a forked child. */
static _Atomic int uw_probed[2];

/* Every thread's rings, for a forked child to close: the child has only
 * the forking thread, but a copy of every thread's ring fds. */
static pthread_mutex_t uw_rings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct uw_ring *uw_rings;

static struct uw_ring *tring_new(int sqpoll);
static void tring_free(struct uw_ring *tr);

static void rings_add(struct uw_ring *tr)
{
	pthread_mutex_lock(&uw_rings_mu);
	tr->prev = NULL;
	tr->next = uw_rings;
	if (uw_rings)
		uw_rings->prev = tr;
	uw_rings = tr;
	pthread_mutex_unlock(&uw_rings_mu);
}

static void rings_del(struct uw_ring *tr)
{
	pthread_mutex_lock(&uw_rings_mu);
	if (tr->prev)
		tr->prev->next = tr->next;
	else
		uw_rings = tr->next;
	if (tr->next)
		tr->next->prev = tr->prev;
	pthread_mutex_unlock(&uw_rings_mu);
}

/* Thread exit (the key's destructor): the thread's rings go, after their
 * last wakes. Only this thread ever held them. */
static void tls_exit(void *arg)
{
	struct uw_thread *t = arg;
	int i;

	for (i = 0; i < 2; i++) {
		if (t->r[i]) {
			rings_del(t->r[i]);
			tring_free(t->r[i]);
		}
		t->r[i] = NULL;
	}
}

/*
 * fork(): the list is held across it, so the child's copy is whole. The
 * forking thread makes no ring meanwhile (forking): other handlers (fork.c's)
 * wake and destroy wakers while we hold the lock, and a ring made then would
 * take it again.
 */
static void tls_atfork_prepare(void)
{
	pthread_mutex_lock(&uw_rings_mu);
	uw_tls.forking = 1;
}

static void tls_atfork_parent(void)
{
	uw_tls.forking = 0;
	pthread_mutex_unlock(&uw_rings_mu);
}

/* In a forked child, before it runs: every ring is the parent's (their
 * mappings did not come along: DONTFORK), the forking thread's and those of
 * threads the child does not have. Close the child's copies of their fds
 * and forget them; the child's threads make their own. */
static void tls_atfork_child(void)
{
	struct uw_ring *tr, *next;
	int i;

	for (tr = uw_rings; tr; tr = next) {
		next = tr->next;
		close(tr->ring.ring_fd);
		up__free(tr);
	}
	uw_rings = NULL;
	uw_tls.forking = 0;
	for (i = 0; i < 2; i++) {
		uw_tls.r[i] = NULL;
		uw_tls.failed[i] = 0;
		/* relaxed: the child is single-threaded here. */
		atomic_store_explicit(&uw_probed[i], 0, memory_order_relaxed);
	}
	pthread_mutex_unlock(&uw_rings_mu);
}

static void tls_init(void)
{
	uw_tls_key_ok = pthread_key_create(&uw_tls_key, tls_exit) == 0;
	if (uw_tls_key_ok)
		pthread_atfork(tls_atfork_prepare, tls_atfork_parent, tls_atfork_child);
}

/*
 * [u-reenter]: the flags that keep a signal handler out of a ring its
 * thread is inside (busy) or is making (making). Only the same thread ever
 * reads them, so a compiler barrier is all the ordering they need: the flag
 * set before the first access to the ring, cleared after the last.
 */
static void tring_enter(struct uw_ring *tr)
{
	tr->busy = 1;
	/* [u-reenter] mb: orders busy = 1 before our ring accesses, for a
	 * handler on this thread; pairs with [u-reenter] mb in tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
}

static void tring_leave(struct uw_ring *tr)
{
	/* [u-reenter] mb: orders our ring accesses before busy = 0; pairs
	 * with [u-reenter] mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	tr->busy = 0;
}

/* This thread's ring of a flavour, made if need be; NULL when it cannot be
 * made here, or is in use by the call this one interrupted. */
static struct uw_ring *tring_get(int sqpoll)
{
	struct uw_thread *t = &uw_tls;
	struct uw_ring *tr = t->r[sqpoll];

	if (tr)
		return tr->busy || tr->broken ? NULL : tr;
	if (t->failed[sqpoll] || t->making || t->forking)
		return NULL;
	pthread_once(&uw_tls_once, tls_init);
	t->making = 1;
	/* [u-reenter] mb: making = 1 before tring_new(); pairs with
	 * [u-reenter] mb in tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
	/* A thread whose exit would not free it (no key) gets none. */
	tr = uw_tls_key_ok ? tring_new(sqpoll) : NULL;
	if (tr && pthread_setspecific(uw_tls_key, t) != 0) {
		tring_free(tr);
		tr = NULL;
	}
	if (tr) {
		rings_add(tr);
		t->r[sqpoll] = tr;
	} else {
		t->failed[sqpoll] = 1;
	}
	/* [u-reenter] mb: the ring stored before making = 0; pairs with
	 * [u-reenter] mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	t->making = 0;
	return tr;
}

/* The ring an end's wait or wake uses in this thread: its flavour's, or
 * the plain one where an SQPOLL ring cannot be made in this thread. */
static struct uw_ring *tring_pick(const struct uring_waker *uw)
{
	struct uw_ring *tr = tring_get(uw->sqpoll);

	if (!tr && uw->sqpoll && uw_tls.failed[1])
		tr = tring_get(0);
	return tr;
}

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
	tr = tring_pick(to_uw(w));
	if (!tr)
		return up__futex_wait(word, expect, timeout_ns, syscalls);
	tring_enter(tr);
	r = ring_wait(tr, word, expect, timeout_ns, peer_pidfds, npeer, syscalls);
	tring_leave(tr);
	return r;
}

static int uw_wake(struct up__waker *w, _Atomic uint32_t *word, uint32_t nr,
		   const struct up_shm_wait *line, uint64_t *syscalls)
{
	struct uw_ring *tr = tring_pick(to_uw(w));
	int r;

	if (!tr)
		return up__futex_wake(word, line ? UP_WAKE_ALL : nr, syscalls);
	tring_enter(tr);
	r = ring_wake(tr, word, nr, line, syscalls);
	tring_leave(tr);
	return r;
}


static void uw_destroy(struct up__waker *w)
{
	struct uring_waker *uw = to_uw(w);
	struct uw_ring *tr;

	/* Wakes this thread queued on its SQPOLL ring go out before the
	 * caller may unmap their segment. In a forked child, fork.c's handler
	 * destroys the parent's wakers before tls_atfork_child() has run
	 * (handlers run in the order they were installed, fork.c's first), so
	 * the ring may still be the parent's, unmapped here: the pid tells. */
	if (uw->sqpoll) {
		tr = uw_tls.r[1];
		if (tr && !tr->busy && !tr->broken && tr->owner == getpid()) {
			tring_enter(tr);
			up__uw_drain_wakes(tr);
			tring_leave(tr);
		}
	}
	/* Tearing the poll ring down cancels anything still armed. */
	up__uw_pring_exit(uw);
	up__free(uw);
}

static void tring_free(struct uw_ring *tr)
{
	up__uw_drain_wakes(tr);
	io_uring_queue_exit(&tr->ring);
	up__free(tr);
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


/* A thread's ring, tested; NULL when io_uring or its futex opcodes are
 * refused here. */
static struct uw_ring *tring_new(int sqpoll)
{
	struct uw_ring *uw;
	int anchor = -1, r;
	__u32 features = 0;
	bool known;

	uw = up__calloc(1, sizeof(*uw));
	if (!uw)
		return NULL;
	if (sqpoll)
		anchor = up__uw_sq_anchor_fd();
	/* Fails with -ENOSYS, -EPERM (kernel.io_uring_disabled, seccomp),
	 * -ENOMEM (memlock), -EMFILE ...: the caller falls back to futex(2). */
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
	uw->sqpoll = sqpoll != 0;
	uw->owner = getpid();
	/* The process's first ring of a flavour is its probe. Later ones skip
	 * what the kernel answered already; an SQPOLL ring also skips the
	 * self-test, whose enter sleeps until the SQ thread has run it: a
	 * thread's first wait would spend that enter asleep before its real
	 * one, and a peer that saw it asleep would act too soon. A plain
	 * ring's self-test completes inline and still runs (a seccomp filter
	 * can be a thread's own). relaxed: the cache of up__waker_uring_new(). */
	known = atomic_load_explicit(&uw_probed[uw->sqpoll], memory_order_relaxed) == 1;
	if (!known && !up__uw_probe_ok(&uw->ring))
		goto err_exit;
	if (!(known && sqpoll) && !up__uw_selftest_ok(uw))
		goto err_exit;
	/* A forked child must not drive its parent's ring through shared
	 * mappings: keep them out of the child, so misuse faults loudly
	 * instead of corrupting the parent's SQ. Best effort. */
	(void)io_uring_ring_dontfork(&uw->ring);
	return uw;

err_exit:
	io_uring_queue_exit(&uw->ring);
err_free:
	up__free(uw);
	return NULL;
}

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
	/* relaxed: a cache of the probe; two threads that both see 0 both
	 * probe, each making its own thread's ring, and agree. */
	int was = atomic_load_explicit(&uw_probed[fl], memory_order_relaxed);
	int ok = was;

	if (ok >= 0 && (tring_get(fl) || uw_tls.r[fl])) {
		ok = 1; /* made now or before (and maybe in use: re-entered) */
	} else if (ok == 0) {
		if (!uw_tls.failed[fl])
			return NULL; /* re-entered while its ring is made: futex */
		ok = -1;
	}
	if (ok != was) /* relaxed: as above. */
		atomic_store_explicit(&uw_probed[fl], ok, memory_order_relaxed);
	if (ok < 0)
		return NULL;
	uw = up__calloc(1, sizeof(*uw));
	if (!uw)
		return NULL;
	uw->sqpoll = fl;
	uw->poke_slot = -1;
	uw->base.ops = fl ? &uw_ops_sqpoll : &uw_ops;
	return &uw->base;
}
