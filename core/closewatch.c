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
 *  - A fork child shares the instance with its parent: it makes its own on
 *    first use (up__live_gen() moved) and forgets the parent's watches.
 *  - A sleeper that cannot poll an fd (the futex(2) backend) is served by a
 *    thread of the process, started by its first such sleep
 *    (up__closewatch_serve()): it drains the events and, for each watched
 *    memfd that saw a close, bumps both wait lines of the segment and wakes
 *    every sleeper on them. A bump is what a wake for all is anyway; the
 *    sleepers of other processes take it as a spurious wake. While the
 *    thread runs, only it drains. A thread blocked in poll(2) is not woken
 *    by a close of the fd it polls, so the instance is closed by the thread
 *    itself: removing the last watch queues IN_IGNORED, which wakes it, and
 *    the remover waits until it has closed the fd and gone (no descriptor
 *    outlives the last pipe that needed it).
 *  - Where inotify cannot be had (no /proc, EMFILE, a seccomp filter), the
 *    sleep's slice still bounds how late a death is seen.
 */
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "up_int.h"

struct cw_watch {
	int wd;
	uint32_t refs;
	struct up_pipe *pipes; /* this process's handles of the memfd (cw_next) */
};

static struct {
	pthread_mutex_t mu;
	int fd;                  /* the instance; -1 when none */
	uint32_t gen;            /* up__live_gen() when fd was made */
	struct cw_watch *w;
	uint32_t n, cap;
	_Atomic uint32_t seq;    /* bumped by a drain that found events */
	_Atomic bool thread;     /* the serving thread runs (for fd, this gen) */
	bool stop;               /* the last watch went: the thread closes fd */
	pthread_cond_t gone;     /* the thread has closed fd and returns */
} cw = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .gone = PTHREAD_COND_INITIALIZER };

static pthread_once_t cw_once = PTHREAD_ONCE_INIT;

/* fork() while another thread holds cw.mu would leave it held for good in
 * the child; the child has no serving thread. */
static void cw_prepare(void)
{
	pthread_mutex_lock(&cw.mu);
}

static void cw_parent(void)
{
	pthread_mutex_unlock(&cw.mu);
}

static void cw_child(void)
{
	/* relaxed: the child has one thread. */
	atomic_store_explicit(&cw.thread, false, memory_order_relaxed);
	cw.stop = false;
	pthread_mutex_unlock(&cw.mu);
}

static void cw_atfork(void)
{
	pthread_atfork(cw_prepare, cw_parent, cw_child);
}

/* Under cw.mu: the instance this process made, or none. */
static void cw_own(void)
{
	if (cw.fd >= 0 && cw.gen != up__live_gen()) {
		/* Inherited through fork(): the parent's, with its watches. */
		close(cw.fd);
		cw.fd = -1;
		cw.n = 0;
	}
}

static struct cw_watch *cw_find(int wd)
{
	uint32_t i;

	for (i = 0; i < cw.n; i++)
		if (cw.w[i].wd == wd)
			return &cw.w[i];
	return NULL;
}

int up__closewatch_fd(struct up_pipe *p, uint64_t *syscalls)
{
	char path[40];
	struct cw_watch *w;
	int wd, r;

	pthread_once(&cw_once, cw_atfork);
	pthread_mutex_lock(&cw.mu);
	cw_own();
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
		cw.gen = up__live_gen();
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->fd);
	*syscalls += 1;
	wd = inotify_add_watch(cw.fd, path, IN_CLOSE_WRITE | IN_CLOSE_NOWRITE);
	if (wd < 0) {
		r = -errno;
		if (cw.n == 0) {
			close(cw.fd);
			cw.fd = -1;
		}
		goto out;
	}
	w = cw_find(wd);
	if (!w) {
		w = &cw.w[cw.n++];
		*w = (struct cw_watch){ .wd = wd };
	}
	w->refs++;
	cw.stop = false; /* a watch again: the thread, if any, serves on */
	p->cw_next = w->pipes;
	w->pipes = p;
	p->cw_wd = wd;
	p->cw_gen = cw.gen;
	r = cw.fd;
out:
	pthread_mutex_unlock(&cw.mu);
	return r;
}

void up__closewatch_drop(struct up_pipe *p)
{
	struct cw_watch *w;

	if (p->cw_wd < 0)
		return;
	pthread_mutex_lock(&cw.mu);
	cw_own();
	if (cw.fd >= 0 && p->cw_gen == cw.gen && (w = cw_find(p->cw_wd))) {
		struct up_pipe **pp = &w->pipes;

		while (*pp && *pp != p)
			pp = &(*pp)->cw_next;
		if (*pp)
			*pp = p->cw_next;
		if (--w->refs == 0) {
			bool ignored = inotify_rm_watch(cw.fd, w->wd) == 0;

			*w = cw.w[--cw.n];
			/* relaxed: written under cw.mu, held here. */
			if (cw.n == 0 && atomic_load_explicit(&cw.thread, memory_order_relaxed)) {
				/* The removal queued IN_IGNORED, which wakes
				 * the thread: it closes fd and says so. A
				 * removal that failed wakes no one: the
				 * thread closes fd at its next event. */
				cw.stop = true;
				/* relaxed: written under cw.mu, which the wait
				 * takes back before each look. */
				while (ignored && atomic_load_explicit(&cw.thread, memory_order_relaxed))
					pthread_cond_wait(&cw.gone, &cw.mu);
			} else if (cw.n == 0) {
				close(cw.fd);
				cw.fd = -1;
			}
		}
	}
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
	/* Only the instance this process made: a number closed since (a
	 * fork child's first use) may be another file now; and not under
	 * the thread, which must see every event to wake its sleepers.
	 * relaxed: cw.thread is written under cw.mu, held here. */
	if (fd == cw.fd && cw.gen == up__live_gen() &&
	    !atomic_load_explicit(&cw.thread, memory_order_relaxed)) {
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

/* Under cw.mu: both wait lines of the memfd watched as @wd, bumped and
 * woken for all, as a wake for all does (wake.c). */
static void cw_wake(int wd)
{
	struct cw_watch *w = cw_find(wd);
	struct up_pipe *p = w ? w->pipes : NULL;

	if (!p)
		return; /* IN_IGNORED of a watch removed since, or the queue's overflow */
	/* [wait] sc: the bump ends every futex wait on the old value; pairs
	 * with [wait] sc in up__wait_ready(), which loads seq first. */
	atomic_fetch_add_explicit(&p->ln->rd_wait.seq, 1, memory_order_seq_cst);
	syscall(SYS_futex, (uint32_t *)&p->ln->rd_wait.seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	/* [wait] sc: as above; pairs with [wait] sc in up__wait_ready(). */
	atomic_fetch_add_explicit(&p->ln->wr_wait.seq, 1, memory_order_seq_cst);
	syscall(SYS_futex, (uint32_t *)&p->ln->wr_wait.seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void *cw_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[64 * sizeof(struct inotify_event)]
		__attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
		pthread_mutex_lock(&cw.mu);
		while ((n = read(fd, buf, sizeof(buf))) > 0) {
			ssize_t off = 0;

			/* [cw-seq] sc: bumped before the wakes below, so that a
			 * sleeper they end sees it and asks the locks; pairs
			 * with [cw-seq] acq in up__closewatch_seq(). */
			atomic_fetch_add_explicit(&cw.seq, 1, memory_order_seq_cst);
			while (off + (ssize_t)sizeof(struct inotify_event) <= n) {
				const struct inotify_event *ev =
					(const struct inotify_event *)(void *)(buf + off);

				cw_wake(ev->wd);
				off += (ssize_t)(sizeof(*ev) + ev->len);
			}
		}
		if (cw.stop) {
			close(fd);
			cw.fd = -1;
			cw.stop = false;
			/* relaxed: under cw.mu. */
			atomic_store_explicit(&cw.thread, false, memory_order_relaxed);
			pthread_cond_broadcast(&cw.gone);
			pthread_mutex_unlock(&cw.mu);
			return NULL;
		}
		pthread_mutex_unlock(&cw.mu);
	}
	return NULL;
}

void up__closewatch_serve(int fd)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;

	/* relaxed: a hint; the decision is made again under cw.mu. */
	if (atomic_load_explicit(&cw.thread, memory_order_relaxed))
		return;
	pthread_mutex_lock(&cw.mu);
	/* relaxed: written under cw.mu, held here. */
	if (fd == cw.fd && cw.gen == up__live_gen() &&
	    !atomic_load_explicit(&cw.thread, memory_order_relaxed)) {
		/* Every signal blocked: none of the host's lands on it. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, cw_main, (void *)(intptr_t)fd) == 0) {
			pthread_setname_np(t, "uringpipe-close");
			/* relaxed: under cw.mu. */
			atomic_store_explicit(&cw.thread, true, memory_order_relaxed);
		}
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&cw.mu);
}
