/* SPDX-License-Identifier: MIT */
/*
 * sq_anchor.c - one SQ thread per process. Every SQPOLL ring attaches
 * (IORING_SETUP_ATTACH_WQ) to an anchor ring made the first time one is
 * asked for, so any number of endpoints cost one polling kernel thread,
 * not one each competing for the cores with the program's own threads.
 *
 * The anchor lives as long as the process: one fd and a kernel thread
 * that sleeps while idle. A forked child cannot attach to its parent's
 * ring (the kernel refuses another thread group's SQ thread), so it makes
 * its own anchor. Should attaching fail (the fd was closed behind our
 * back, and maybe reused), a ring gets a thread of its own.
 *
 * The lock is a word holding the holder's pid, so a child forked while
 * another thread of its parent held it can take it over. A fork handler
 * closes the inherited fd in the child before the child runs, while the
 * number is still the ring's; a child made without fork handlers (a raw
 * clone) leaves it open instead, since by then the number may name a file
 * of the program's own.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <liburing.h>

#include "uring_int.h"

/* The variables after the lock are only touched with it held (or in the
 * fork child handler, while the child is single-threaded). */
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
		/* [u-anchor-lock] acq: the anchor state the last holder left;
		 * pairs with [u-anchor-lock] rel in sq_anchor_lock_drop().
		 * relaxed on failure: nothing taken, we only learn the holder. */
		if (atomic_compare_exchange_weak_explicit(&sq_anchor_lock, &cur, me,
							  memory_order_acquire,
							  memory_order_relaxed))
			return;
		/* Held by our parent's thread when it forked us (a child made
		 * without fork handlers): ours now.
		 * [u-anchor-lock] acq: as above; pairs with [u-anchor-lock] rel
		 * in sq_anchor_lock_drop(). relaxed on failure: as above. */
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
	/* [u-anchor-lock] rel: the anchor state written under the lock; pairs
	 * with [u-anchor-lock] acq in sq_anchor_lock_take(). */
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
	/* relaxed: the child has a single thread here; nothing to publish. */
	atomic_store_explicit(&sq_anchor_lock, 0, memory_order_relaxed);
}

/* The anchor's ring fd, made on first use in this process; -1 if it could
 * not be made here (the caller's ring then gets a thread of its own). */
int up__uw_sq_anchor_fd(void)
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
