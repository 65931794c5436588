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
 *  - Where inotify cannot be had (no /proc, EMFILE, a seccomp filter), the
 *    sleep's slice still bounds how late a death is seen.
 */
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "up_int.h"

struct cw_watch {
	int wd;
	uint32_t refs;
};

static struct {
	pthread_mutex_t mu;
	int fd;                  /* the instance; -1 when none */
	uint32_t gen;            /* up__live_gen() when fd was made */
	struct cw_watch *w;
	uint32_t n, cap;
	_Atomic uint32_t seq;    /* bumped by a drain that found events */
} cw = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

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
	if (cw.fd >= 0 && p->cw_gen == cw.gen && (w = cw_find(p->cw_wd)) && --w->refs == 0) {
		inotify_rm_watch(cw.fd, w->wd);
		*w = cw.w[--cw.n];
		if (cw.n == 0) {
			close(cw.fd);
			cw.fd = -1;
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
	 * fork child's first use) may be another file now. */
	if (fd == cw.fd && cw.gen == up__live_gen()) {
		*syscalls += 1;
		while (read(fd, buf, sizeof(buf)) > 0) {
			got = true;
			*syscalls += 1;
		}
	}
	/* relaxed: a hint (see up__closewatch_seq()); cw.mu orders the
	 * bump with the drain for the drainers. */
	seq = atomic_load_explicit(&cw.seq, memory_order_relaxed) + got;
	atomic_store_explicit(&cw.seq, seq, memory_order_relaxed);
	pthread_mutex_unlock(&cw.mu);
	return seq;
}

uint32_t up__closewatch_seq(void)
{
	/* relaxed: a hint that makes an end look at the locks once more; a
	 * bump seen late costs at most the slice, which still runs. */
	return atomic_load_explicit(&cw.seq, memory_order_relaxed);
}
