/* SPDX-License-Identifier: MIT */
/*
 * tring.c - the calling thread's rings for the io_uring sleep/wake backend
 * (wake_uring.c): made, probed and self-tested (uring_io.c) at a thread's
 * first wait or wake that needs one, found again, kept out of signal
 * handlers' way, and freed at the thread's exit or forgotten in a forked
 * child.
 *
 * The rings that sleep and wake belong to threads, not to endpoints: each
 * thread has at most one of each flavour (plain, and SQPOLL for pipes made
 * with UP_CFG_SQPOLL), a struct uw_ring of UW_SQ_ENTRIES SQEs and
 * UW_CQ_ENTRIES CQEs, made at the thread's first wait or wake that needs it
 * (or at the process's first endpoint, whose ring is the probe) and freed
 * by a pthread key destructor when the thread exits, or when it breaks
 * (then made again later: tring_retire()). So a process pays one
 * fd per pipe (the memfd) plus a constant per thread, whatever the number
 * of ends.
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
 *  - A ring is freed only by its own thread's outermost call into the
 *    rings (depth 1; tring_retire()) or at the thread's exit: a call that
 *    holds a ring's pointer is never left with a freed one by a signal
 *    handler's call nested in it.
 *  - Queued wakes reach the kernel before their segment may be unmapped:
 *    with SQPOLL a wake is an SQE until the SQ thread takes it, so an end's
 *    destroy drains the calling thread's SQPOLL ring
 *    (up__tring_drain_sqpoll()), and a thread's exit drains both
 *    (up__uw_drain_wakes()).
 *
 * A thread ring is only ever entered by its thread, but it is not
 * IORING_SETUP_SINGLE_ISSUER (nothing here relies on that) and its fd is
 * not registered.
 */
#include <errno.h>
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
	/* Rings of a flavour retired broken in this thread, and the time
	 * before which none is made again (tring_retire()). */
	unsigned breaks[2];
	uint64_t retry_ns[2];
	/* Calls of this thread between up__tring_take() and up__tring_put(),
	 * or inside up__tring_usable() or up__tring_drain_sqpoll(): more than
	 * one when a signal handler's call interrupted another. */
	unsigned depth;
	int making;    /* inside tring_new() or a retire: see [u-reenter] */
	int forking;   /* between our atfork prepare and parent/child handlers */
};

/* The first wait of a thread whose ring broke before making another, then
 * twice that for each further break, up to 1024 times. */
#define UW_RETRY_NS	  10000000ull
#define UW_RETRY_MAX_SHIFT 10

static __thread struct uw_thread uw_tls;
static pthread_key_t uw_tls_key;
static int uw_tls_key_ok;
static pthread_once_t uw_tls_once = PTHREAD_ONCE_INIT;
/* Per flavour: 0 not probed yet in this process, 1 io_uring works, -1 it
 * is refused (up__tring_usable()). Reset in a forked child. */
static _Atomic int uw_probed[2];

/* Every thread's rings, for a forked child to close: the child has only
 * the forking thread, but a copy of every thread's ring fds. */
static pthread_mutex_t uw_rings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct uw_ring *uw_rings;

static struct uw_ring *tring_new(int sqpoll);
static void tring_free(struct uw_ring *tr);
static void ring_close(struct uw_ring *tr);

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

/* Under uw_rings_mu. */
static void rings_unlink(struct uw_ring *tr)
{
	if (tr->prev)
		tr->prev->next = tr->next;
	else
		uw_rings = tr->next;
	if (tr->next)
		tr->next->prev = tr->prev;
}

/* A thread's ring @tr, forgotten by its thread: its last wakes out, then
 * out of the list and closed under the list's lock, so that a fork
 * meanwhile neither copies its fd into the child unlisted nor finds it
 * listed and closed. */
static void rings_del_free(struct uw_ring *tr)
{
	up__uw_drain_wakes(tr);
	pthread_mutex_lock(&uw_rings_mu);
	rings_unlink(tr);
	ring_close(tr);
	pthread_mutex_unlock(&uw_rings_mu);
	up__free(tr);
}

/* Thread exit (the key's destructor): the thread's rings go, after their
 * last wakes. Only this thread ever held them. */
static void tls_exit(void *arg)
{
	struct uw_thread *t = arg;
	struct uw_ring *tr;
	int i;

	/* A signal handler's call from here on finds no ring and makes none
	 * (making), so it neither uses one being freed nor takes
	 * uw_rings_mu, which rings_del_free() holds. */
	t->making = 1;
	for (i = 0; i < 2; i++) {
		tr = t->r[i];
		t->r[i] = NULL;
		/* [u-reenter] mb: forgotten before it is freed; pairs with
		 * [u-reenter] mb in tring_enter(). */
		atomic_signal_fence(memory_order_seq_cst);
		if (tr)
			rings_del_free(tr);
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
	/* Before the lock, cleared after it: a signal handler's call inside
	 * never makes or retires a ring, which takes the lock again. */
	uw_tls.forking = 1;
	/* [u-reenter] mb: forking before the lock; pairs with [u-reenter]
	 * mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	pthread_mutex_lock(&uw_rings_mu);
}

static void tls_atfork_parent(void)
{
	pthread_mutex_unlock(&uw_rings_mu);
	/* [u-reenter] mb: the unlock before forking clears; pairs with
	 * [u-reenter] mb in tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
	uw_tls.forking = 0;
}

/* In a forked child, before it runs: every ring is the parent's (their
 * mappings did not come along: DONTFORK), the forking thread's and those of
 * threads the child does not have. Close the child's copies of their fds
 * and forget them; the child's threads make their own. */
static void tls_atfork_child(void)
{
	struct uw_ring *tr, *next;
	int i;

	for (i = 0; i < 2; i++)
		uw_tls.r[i] = NULL;
	/* [u-reenter] mb: forgotten before they are freed; pairs with
	 * [u-reenter] mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	for (tr = uw_rings; tr; tr = next) {
		next = tr->next;
		/* A number lost to the parent's ring is not its to close. */
		if (!tr->fd_lost)
			close(tr->ring.ring_fd);
		up__free(tr);
	}
	uw_rings = NULL;
	for (i = 0; i < 2; i++) {
		uw_tls.failed[i] = 0;
		uw_tls.breaks[i] = 0;
		uw_tls.retry_ns[i] = 0;
		/* relaxed: the child is single-threaded here. */
		atomic_store_explicit(&uw_probed[i], 0, memory_order_relaxed);
	}
	pthread_mutex_unlock(&uw_rings_mu);
	/* [u-reenter] mb: as in tls_atfork_parent(); pairs with [u-reenter]
	 * mb in tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
	uw_tls.forking = 0;
}

static void tls_init(void)
{
	uw_tls_key_ok = pthread_key_create(&uw_tls_key, tls_exit) == 0;
	if (uw_tls_key_ok)
		pthread_atfork(tls_atfork_prepare, tls_atfork_parent, tls_atfork_child);
}

/*
 * [u-reenter]: the flags that keep a signal handler out of a ring its
 * thread is inside (busy) or is making or retiring (making), and the depth
 * of the thread's calls. Only the same thread ever reads them, so a
 * compiler barrier is all the ordering they need: the flag set before the
 * first access to the ring, cleared after the last.
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

static void depth_up(struct uw_thread *t)
{
	t->depth++;
	/* [u-reenter] mb: the depth before any look at the rings; pairs with
	 * [u-reenter] mb in tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
}

static void depth_down(struct uw_thread *t)
{
	/* [u-reenter] mb: the last look at a ring before the depth drops;
	 * pairs with [u-reenter] mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	t->depth--;
}

/* No ring of flavour @fl is made in this thread before a while, longer
 * after each break. */
static void retry_later(struct uw_thread *t, int fl)
{
	unsigned k = t->breaks[fl] - 1;

	t->retry_ns[fl] = up__now_ns() + (UW_RETRY_NS << (k < UW_RETRY_MAX_SHIFT ? k
										 : UW_RETRY_MAX_SHIFT));
}

/*
 * This thread's ring @tr of flavour @fl, found broken and not in use: it
 * goes, and another is made at a later call (tring_get()), so that a
 * kernel short of memory for a while, or a ring fd closed under us, does
 * not leave the thread on futex(2) for good. Closing the ring also ends
 * what it still had armed: a cancel that found no SQE leaves its
 * FUTEX_WAIT queued on the shared word, where a wake for one would reach it
 * instead of a sleeper.
 *
 * Only from the thread's outermost call (depth 1): a signal handler's call
 * nested in one that holds the ring's pointer must not free it. Not while
 * a ring is being made or retired, nor between fork's handlers: each holds
 * uw_rings_mu, which a retire takes. An SQPOLL ring whose SQ thread has not
 * taken every queued SQE yet waits too: its queued wakes would be dropped.
 * Whatever waits is retired by a later call of the thread (tring_get()).
 */
static void tring_retire(struct uw_thread *t, struct uw_ring *tr, int fl)
{
	if (t->depth != 1 || tr->busy || t->making || t->forking)
		return;
	if (tr->sqpoll && !tr->fd_lost && io_uring_sq_ready(&tr->ring) != 0)
		return;
	t->making = 1;
	t->breaks[fl]++;
	retry_later(t, fl);
	t->r[fl] = NULL;
	/* [u-reenter] mb: the ring forgotten before it is freed, and the
	 * retry time before either; pairs with [u-reenter] mb in
	 * tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
	rings_del_free(tr);
	/* [u-reenter] mb: freed before making = 0; pairs with [u-reenter]
	 * mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	t->making = 0;
}

/* @tr unless the call this one interrupted is inside it, or it broke. */
static struct uw_ring *ring_if_free(struct uw_ring *tr)
{
	return tr->busy || tr->broken ? NULL : tr;
}

/* This thread's ring of a flavour, made if need be; NULL when it cannot be
 * made here, or is in use by the call this one interrupted. Inside a
 * depth_up(). */
static struct uw_ring *tring_get(int sqpoll)
{
	struct uw_thread *t = &uw_tls;
	struct uw_ring *tr = t->r[sqpoll];

	if (tr && tr->broken)
		tring_retire(t, tr, sqpoll);
	tr = t->r[sqpoll];
	if (tr)
		return ring_if_free(tr);
	if (t->failed[sqpoll] || t->making || t->forking)
		return NULL;
	if (t->retry_ns[sqpoll] != 0 && up__now_ns() < t->retry_ns[sqpoll])
		return NULL;
	pthread_once(&uw_tls_once, tls_init);
	t->making = 1;
	/* [u-reenter] mb: making = 1 before tring_new(); pairs with
	 * [u-reenter] mb in tring_leave(). */
	atomic_signal_fence(memory_order_seq_cst);
	/* A signal handler's call that came before making = 1 may have made
	 * one: kept, rather than left in the list behind a second. */
	tr = t->r[sqpoll];
	if (tr) {
		t->making = 0;
		return ring_if_free(tr);
	}
	/* A thread whose exit would not free it (no key) gets none. */
	tr = uw_tls_key_ok ? tring_new(sqpoll) : NULL;
	if (tr && pthread_setspecific(uw_tls_key, t) != 0) {
		tring_free(tr);
		tr = NULL;
	}
	if (tr) {
		rings_add(tr);
		t->r[sqpoll] = tr;
	} else if (t->breaks[sqpoll] != 0) {
		/* This thread had one: the kernel may be short of what a ring
		 * needs for now (memory, fds). Tried again later. */
		retry_later(t, sqpoll);
	} else {
		t->failed[sqpoll] = 1;
	}
	/* [u-reenter] mb: the ring stored before making = 0; pairs with
	 * [u-reenter] mb in tring_enter(). */
	atomic_signal_fence(memory_order_seq_cst);
	t->making = 0;
	return tr;
}

/*
 * The ring an end's wait or wake uses in this thread, marked busy: its
 * flavour's, or the plain one where an SQPOLL ring cannot be made in this
 * thread. NULL when there is none to use: the caller goes through
 * futex(2). Each ring taken is given back with up__tring_put().
 */
struct uw_ring *up__tring_take(const struct uring_waker *uw)
{
	struct uw_thread *t = &uw_tls;
	struct uw_ring *tr;

	depth_up(t);
	tr = tring_get(uw->sqpoll);
	if (!tr && uw->sqpoll && t->failed[1])
		tr = tring_get(0);
	if (tr)
		tring_enter(tr);
	else
		depth_down(t);
	return tr;
}

/* After a wait or a wake on @tr: a ring that broke in it is retired now,
 * if this is the thread's outermost call, or by a later one. */
void up__tring_put(struct uw_ring *tr)
{
	struct uw_thread *t = &uw_tls;

	tring_leave(tr);
	/* Still ours to read: a handler's call nested here frees nothing. */
	if (up__unlikely(tr->broken))
		tring_retire(t, tr, tr->sqpoll);
	depth_down(t);
}

/* Unmaps and closes @tr's ring. A number an enter found no longer our
 * ring's (closed under us, maybe reused) is not ours to close: only the
 * mappings go, and with them the kernel's last reference to the ring. */
static void ring_close(struct uw_ring *tr)
{
	if (tr->fd_lost)
		tr->ring.ring_fd = -1;
	io_uring_queue_exit(&tr->ring);
}

static void tring_free(struct uw_ring *tr)
{
	up__uw_drain_wakes(tr);
	ring_close(tr);
	up__free(tr);
}

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
	 * can be a thread's own). relaxed: the cache of up__tring_usable(). */
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
	ring_close(uw);
err_free:
	up__free(uw);
	return NULL;
}

/*
 * Whether the calling thread has, or can now make, its ring of a flavour,
 * for a new endpoint's waker (wake_uring.c). The first thread's ring is the
 * process's probe, cached in uw_probed: if io_uring is refused, every
 * endpoint of the process gets the futex waker. False too when re-entered
 * while this thread's ring is being made.
 */
bool up__tring_usable(int sqpoll)
{
	int fl = sqpoll != 0;
	/* relaxed: a cache of the probe; two threads that both see 0 both
	 * probe, each making its own thread's ring, and agree. */
	int was = atomic_load_explicit(&uw_probed[fl], memory_order_relaxed);
	int ok = was;
	bool have = false;

	if (ok >= 0) {
		depth_up(&uw_tls);
		have = tring_get(fl) || uw_tls.r[fl];
		depth_down(&uw_tls);
	}
	if (have) {
		ok = 1; /* made now or before (and maybe in use: re-entered) */
	} else if (ok == 0) {
		if (!uw_tls.failed[fl])
			return false; /* re-entered while its ring is made: futex */
		ok = -1;
	}
	if (ok != was) /* relaxed: as above. */
		atomic_store_explicit(&uw_probed[fl], ok, memory_order_relaxed);
	return ok > 0;
}

/* Wakes this thread queued on its SQPOLL ring go out, before an end's
 * destroy lets its segment be unmapped. In a forked child, fork.c's handler
 * destroys the parent's wakers before tls_atfork_child() has run (handlers
 * run in the order they were installed, fork.c's first), so the ring may
 * still be the parent's, unmapped here: the pid tells. */
void up__tring_drain_sqpoll(void)
{
	struct uw_ring *tr;

	depth_up(&uw_tls);
	tr = uw_tls.r[1];
	if (tr && !tr->busy && !tr->broken && tr->owner == getpid()) {
		tring_enter(tr);
		up__uw_drain_wakes(tr);
		tring_leave(tr);
	}
	depth_down(&uw_tls);
}
