/* SPDX-License-Identifier: MIT */
/*
 * closewatch.c - a wake for the death of a peer no pidfd can watch.
 *
 * A peer in another pid namespace has no pid that means anything to us, so
 * no pidfd of it can be had. What every peer has, in any namespace, is its
 * own open file description of the memfd (live.c): the kernel closes it
 * when the process goes, and inotify reports the close of any description
 * of a watched inode (IN_CLOSE_WRITE, IN_CLOSE_NOWRITE). One inotify
 * instance per process watches the memfd of each pipe with such a peer; an
 * end that sleeps polls it beside its pidfds, and a close wakes it to ask
 * the peers' locks (peer.c). An event says only "some description of some
 * watched memfd closed": most are benign (an attach's own reopen, a name
 * lookup), and what is dead is always asked of the locks.
 *
 * What must stay true:
 *  - One instance per process, not per pipe: inotify instances are few per
 *    user (128 by default) and shared with every other program of that
 *    user; watches are many.
 *  - A watch pins its inode, and so the segment's pages, in memory: it is
 *    removed when the last handle of the pipe in this process goes
 *    (up__closewatch_drop()), and the instance closed with its last watch.
 *    The same inode watched twice is one watch: counted per wd.
 *  - The instance is drained by whichever end wakes first; the others learn
 *    of the event through seq, bumped under the lock with the drain, so
 *    that an end that finds it empty still knows one came since its last
 *    look.
 *  - The kernel reports the close before it drops the description's locks
 *    (fsnotify comes first in the final fput), so a woken end can find the
 *    peer's lock still held. A look after an event that found no one dead
 *    is followed by another a short while later (peer.c).
 *  - A fork child shares the instance with its parent: fork.c's child
 *    handler calls up__closewatch_forked() first, which closes its copy
 *    and forgets the parent's watches and thread, and the child makes its
 *    own instance when it needs one. A handle's watch names the
 *    instance it was made in (gen, bumped at each one made), so a handle
 *    of the parent's never takes or drops a watch of the child's, whose
 *    watch numbers start again at 1.
 *  - A sleeper that cannot poll an fd (the futex(2) backend) is served by a
 *    thread of the process, started by its first such sleep
 *    (up__closewatch_serve()): it drains the events and, for each watched
 *    memfd that saw a close, bumps both wait lines of the segment and wakes
 *    every sleeper on them. A bump is what a wake for all is anyway; the
 *    sleepers of other processes take it as a spurious wake. While the
 *    thread runs, it alone drains and it alone may close the instance (a
 *    thread blocked in poll(2) is not woken by a close of the fd it polls,
 *    and a number closed under it could be reused by the application).
 *    Removing the last watch queues IN_IGNORED, which wakes it; the remover
 *    asks it to stop and waits until it has closed the fd and gone, or
 *    until a new watch cancelled the request (the instance is in use
 *    again). Where the removal failed, nothing wakes the thread: the
 *    remover does not wait, and the instance stays open with its thread.
 *  - Where inotify cannot be had (no /proc, EMFILE, a seccomp filter), the
 *    sleep's slice still bounds how late a death is seen.
 */
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "thread.h"
#include "up_int.h"

struct cw_watch {
	int wd;
	uint32_t refs;
	struct up_pipe *pipes; /* this process's handles of the memfd (cw_next) */
};

static struct {
	pthread_mutex_t mu;
	int fd;                  /* the instance; -1 when none */
	uint32_t gen;            /* bumped at every instance made, never reused */
	struct cw_watch *w;
	uint32_t n, cap;
	_Atomic uint32_t seq;    /* bumped by every drain that found events */
	_Atomic bool thread;     /* the serving thread runs; it owns fd */
	uint64_t spawn_ns;       /* when pthread_create() last refused (0: never) */
	bool stop;               /* asked of the thread: close fd and return */
	pthread_cond_t gone;     /* stop was met (thread gone) or cancelled */
} cw = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .gone = PTHREAD_COND_INITIALIZER };

/* After a refused pthread_create(), the next try (meanwhile, slices). */
#define CW_SPAWN_RETRY_NS 1000000000ull

/*
 * In the child of fork() (fork.c calls it first thing): one thread, no
 * serving thread, and the lock and registry as some parent thread may have
 * left them mid-change. The copy of the instance is closed here, before
 * the application can reuse its number; the handles' watches are stale by
 * their gen.
 */
void up__closewatch_forked(void)
{
	pthread_mutex_init(&cw.mu, NULL);
	pthread_cond_init(&cw.gone, NULL);
	if (cw.fd >= 0)
		close(cw.fd);
	cw.fd = -1;
	cw.w = NULL; /* the parent's, maybe freed mid-growth: leaked */
	cw.n = cw.cap = 0;
	cw.stop = false;
	cw.spawn_ns = 0;
	/* relaxed: the child has one thread. */
	atomic_store_explicit(&cw.thread, false, memory_order_relaxed);
}

static struct cw_watch *cw_find(int wd)
{
	uint32_t i;

	for (i = 0; i < cw.n; i++)
		if (cw.w[i].wd == wd)
			return &cw.w[i];
	return NULL;
}

/* Under cw.mu. */
static bool cw_served(void)
{
	/* relaxed: cw.thread is written under cw.mu only. */
	return atomic_load_explicit(&cw.thread, memory_order_relaxed);
}

/* Under cw.mu: close the instance if nothing needs it (no watch, no
 * thread, which would own it). */
static void cw_close_idle(void)
{
	if (cw.fd >= 0 && cw.n == 0 && !cw_served()) {
		close(cw.fd);
		cw.fd = -1;
	}
}

int up__closewatch_fd(struct up_pipe *p, uint64_t *syscalls)
{
	char path[40];
	struct cw_watch *w;
	int wd, r;

	pthread_mutex_lock(&cw.mu);
	if (cw.fd >= 0 && p->cw_wd >= 0 && p->cw_gen == cw.gen) {
		r = cw.fd;
		goto out;
	}
	if (cw.n == cw.cap) {
		uint32_t cap = cw.cap ? 2 * cw.cap : 8;
		struct cw_watch *nw = up__calloc(cap, sizeof(*nw));

		if (!nw) {
			r = -ENOMEM;
			goto out;
		}
		if (cw.n)
			memcpy(nw, cw.w, cw.n * sizeof(*nw));
		up__free(cw.w);
		cw.w = nw;
		cw.cap = cap;
	}
	if (cw.fd < 0) {
		*syscalls += 1;
		cw.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (cw.fd < 0) {
			r = -errno;
			goto out;
		}
		cw.gen++;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->fd);
	*syscalls += 1;
	wd = inotify_add_watch(cw.fd, path, IN_CLOSE_WRITE | IN_CLOSE_NOWRITE);
	if (wd < 0) {
		r = -errno;
		cw_close_idle();
		goto out;
	}
	w = cw_find(wd);
	if (!w) {
		w = &cw.w[cw.n++];
		*w = (struct cw_watch){ .wd = wd };
	}
	w->refs++;
	p->cw_next = w->pipes;
	w->pipes = p;
	p->cw_wd = wd;
	p->cw_gen = cw.gen;
	if (cw.stop) {
		/* A remover waits for the thread to close fd: it has a watch
		 * again, so the thread stays and the remover returns. (On a
		 * failure above, stop stays, and the thread closes fd.) */
		cw.stop = false;
		pthread_cond_broadcast(&cw.gone);
	}
	r = cw.fd;
out:
	pthread_mutex_unlock(&cw.mu);
	return r;
}

void up__closewatch_drop(struct up_pipe *p)
{
	struct cw_watch *w;
	struct up_pipe **pp;
	bool ignored;

	if (p->cw_wd < 0)
		return;
	pthread_mutex_lock(&cw.mu);
	/* A watch of another generation is the parent's (fork): gone. */
	if (cw.fd < 0 || p->cw_gen != cw.gen || !(w = cw_find(p->cw_wd)))
		goto out;
	for (pp = &w->pipes; *pp && *pp != p; pp = &(*pp)->cw_next)
		;
	if (*pp)
		*pp = p->cw_next;
	if (--w->refs != 0)
		goto out;
	ignored = inotify_rm_watch(cw.fd, w->wd) == 0;
	*w = cw.w[--cw.n];
	if (cw.n == 0 && cw_served() && ignored) {
		/* IN_IGNORED wakes the thread: it sees stop and closes fd. */
		cw.stop = true;
		while (cw.stop && cw_served())
			pthread_cond_wait(&cw.gone, &cw.mu);
	}
	cw_close_idle();
out:
	p->cw_wd = -1;
	pthread_mutex_unlock(&cw.mu);
}

uint32_t up__closewatch_drain(int fd, uint64_t *syscalls)
{
	/* Events of the watched inodes themselves carry no name. */
	char buf[64 * sizeof(struct inotify_event)]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	bool got = false;
	uint32_t seq;

	pthread_mutex_lock(&cw.mu);
	/* Not under the thread, which must see every event to wake its
	 * sleepers. */
	if (fd == cw.fd && !cw_served()) {
		*syscalls += 1;
		while (read(fd, buf, sizeof(buf)) > 0) {
			got = true;
			*syscalls += 1;
		}
	}
	/* relaxed: cw.mu orders the bump with the drain for the drainers,
	 * and the caller asks the locks itself. */
	seq = atomic_load_explicit(&cw.seq, memory_order_relaxed) + got;
	atomic_store_explicit(&cw.seq, seq, memory_order_relaxed);
	pthread_mutex_unlock(&cw.mu);
	return seq;
}

uint32_t up__closewatch_seq(void)
{
	/* [cw-seq] acq: a sleeper the thread woke sees the bump made before
	 * the wake; pairs with [cw-seq] sc in cw_main(). */
	return atomic_load_explicit(&cw.seq, memory_order_acquire);
}

bool up__closewatch_served(void)
{
	/* relaxed: a hint for whether to poll the instance as well; a sleeper
	 * that polls it while the thread drains it wakes once for nothing. */
	return atomic_load_explicit(&cw.thread, memory_order_relaxed);
}

/* Under cw.mu: both wait lines of the memfd watched as @wd (every watched
 * memfd for -1: the queue overflowed and events were lost), bumped and
 * woken for all, as a wake for all does (wake.c). The wake is a raw
 * futex(2), not up__futex_wake(): wake_futex.c calls into this file
 * (up__closewatch_serve()), and the call back would make a cycle. */
static void cw_wake(int wd)
{
	uint32_t i;

	for (i = 0; i < cw.n; i++) {
		struct up_pipe *p = cw.w[i].pipes;

		if ((wd >= 0 && cw.w[i].wd != wd) || !p)
			continue;
		/* [wait] sc: the bump ends every futex wait on the old value;
		 * pairs with [wait] sc in up__wait_ready(), which loads seq
		 * first. */
		atomic_fetch_add_explicit(&p->ln->rd_wait.seq, 1, memory_order_seq_cst);
		syscall(SYS_futex, (uint32_t *)&p->ln->rd_wait.seq, FUTEX_WAKE, INT_MAX, NULL, NULL,
			0);
		/* [wait] sc: as above; pairs with [wait] sc in up__wait_ready(). */
		atomic_fetch_add_explicit(&p->ln->wr_wait.seq, 1, memory_order_seq_cst);
		syscall(SYS_futex, (uint32_t *)&p->ln->wr_wait.seq, FUTEX_WAKE, INT_MAX, NULL, NULL,
			0);
	}
}

/* Under cw.mu, which it lets go: the serving thread leaves, the instance
 * closed (or gone), and a release waiting for that returns. */
static void *cw_thread_exit(void)
{
	cw.fd = -1;
	cw.stop = false;
	/* relaxed: under cw.mu. */
	atomic_store_explicit(&cw.thread, false, memory_order_relaxed);
	pthread_cond_broadcast(&cw.gone);
	pthread_mutex_unlock(&cw.mu);
	return NULL;
}

/*
 * The serving thread. The watched handles cannot be unmapped under it:
 * a handle leaves its watch under cw.mu before its pages go (pipe.c), and
 * the thread touches them under cw.mu only.
 */
static void *cw_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[64 * sizeof(struct inotify_event)]
		__attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		/* Only this thread closes fd while it runs, so the only
		 * failures are transient (EINTR, ENOMEM): poll again. */
		(void)poll(&pfd, 1, -1);
		pthread_mutex_lock(&cw.mu);
		if (pfd.revents & POLLNVAL) {
			/* The application closed our descriptor: the watches
			 * went with it. Forget them (each handle watches
			 * again in the next instance) and go. */
			cw.n = 0;
			return cw_thread_exit();
		}
		while ((n = read(fd, buf, sizeof(buf))) > 0) {
			ssize_t off = 0;

			/* [cw-seq] sc: bumped before the wakes below, so that a
			 * sleeper they end sees it and asks the locks; pairs
			 * with [cw-seq] acq in up__closewatch_seq(). */
			atomic_fetch_add_explicit(&cw.seq, 1, memory_order_seq_cst);
			while (off + (ssize_t)sizeof(struct inotify_event) <= n) {
				const struct inotify_event *ev =
					(const struct inotify_event *)(void *)(buf + off);

				cw_wake((ev->mask & IN_Q_OVERFLOW) ? -1 : ev->wd);
				off += (ssize_t)(sizeof(*ev) + ev->len);
			}
		}
		if (cw.stop && cw.n == 0) {
			close(fd);
			return cw_thread_exit();
		}
		pthread_mutex_unlock(&cw.mu);
	}
}

void up__closewatch_serve(int fd)
{
	/* relaxed: a hint; the decision is made again under cw.mu. */
	if (atomic_load_explicit(&cw.thread, memory_order_relaxed))
		return;
	pthread_mutex_lock(&cw.mu);
	if (fd == cw.fd && !cw_served() &&
	    (!cw.spawn_ns || up__coarse_ns() - cw.spawn_ns >= CW_SPAWN_RETRY_NS)) {
		if (up__thread_start(NULL, 0, cw_main, (void *)(intptr_t)fd, "uringpipe-close") == 0)
			/* relaxed: under cw.mu. */
			atomic_store_explicit(&cw.thread, true, memory_order_relaxed);
		else
			cw.spawn_ns = up__coarse_ns(); /* meanwhile the slices */
	}
	pthread_mutex_unlock(&cw.mu);
}
