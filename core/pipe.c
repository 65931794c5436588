/* SPDX-License-Identifier: MIT */
/*
 * pipe.c - the public API: handles, endpoints, statistics (the data calls
 * are io.c's).
 *
 * Lifetime: a struct up_pipe is reference counted; the handle returned by
 * create/attach holds one reference and every open endpoint holds one, so
 * up_pipe_release() before closing the ends is fine (as close(2) on a pipe's
 * other fd is). The mapping goes away with the last reference.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writer.h"


void up_config_init(struct up_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->capacity = UP_DEFAULT_CAPACITY;
	cfg->page_size = 0; /* from the capacity, at creation (shm.c) */
	cfg->numa_node = -1;
	cfg->pool_keep = 0;
	cfg->trim_ms = 0;
}

int up_pipe_create(const struct up_config *cfg, struct up_pipe **out)
{
	struct up_config c;
	int r;

	if (!out)
		return -EINVAL;
	up_config_init(&c);
	if (cfg) {
		/* A caller built against an older, shorter struct is fine;
		 * one that claims a size we cannot read is not. */
		if (cfg->size < offsetof(struct up_config, numa_node) + sizeof(int) ||
		    cfg->size > 4096)
			return -EINVAL;
		memcpy(&c, cfg, cfg->size < sizeof(c) ? cfg->size : sizeof(c));
		c.size = sizeof(c);
	}
	if (c.flags & ~UP_CFG_ALL)
		return -EINVAL;
	r = up__shm_create(&c, out);
	if (r == 0)
		up__fork_track_pipe(*out);
	return r;
}

int up_pipe_attach(int fd, struct up_pipe **out)
{
	int r;

	if (!out)
		return -EINVAL;
	r = up__shm_attach(fd, out);
	if (r == 0)
		up__fork_track_pipe(*out);
	return r;
}

/*
 * Not p->fd: an OFD lock belongs to the open file description, so a process
 * that kept a descriptor of ours (received by SCM_RIGHTS and never closed,
 * or still queued in a socket) would keep our ends' liveness locks, and our
 * ends alive to their peers, after we died. What is handed out is another
 * description of the same memfd, which holds no lock; made once, at the
 * first call, so that a pipe never shared costs no descriptor more.
 */
int up_pipe_fd(const struct up_pipe *p)
{
	_Atomic int *share;
	int fd, none = -1;

	if (!p)
		return -EINVAL;
	/* A cache beside the handle, not the pipe's state: filled once. */
	share = &((struct up_pipe *)p)->share_fd;
	/* [share] acq: a description another thread made is complete; pairs
	 * with [share] acq_rel in up_pipe_fd(), that thread's. */
	fd = atomic_load_explicit(share, memory_order_acquire);
	if (fd >= 0)
		return fd;
	fd = up__live_reopen(p->fd);
	/* No /proc here (a chroot): the handle's own descriptor, as before;
	 * a receiver that keeps it then keeps our ends alive after us. */
	if (fd == -ENOENT || fd == -EACCES || fd == -EPERM)
		return p->fd;
	if (fd < 0)
		return fd;
	/* [share] acq_rel: ours, or the one another thread made first; pairs
	 * with [share] acq_rel and [share] acq in up_pipe_fd(), another
	 * thread's. */
	if (!atomic_compare_exchange_strong_explicit(share, &none, fd, memory_order_acq_rel,
						     memory_order_acquire)) {
		close(fd);
		return none;
	}
	return fd;
}

void up__pipe_put(struct up_pipe *p)
{
	/* [refs] acq_rel: the last dropper sees every other user's writes to
	 * p (the counters folded into p->closed) before unmapping; pairs with
	 * itself, run by every dropper. */
	if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
		up__fork_untrack_pipe(p);
		up__closewatch_drop(p);
		up__shm_unmap(p);
	}
}

void up_pipe_release(struct up_pipe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->released) {
		/* Double release is a caller bug; do not drop a reference an
		 * endpoint owns. */
		pthread_mutex_unlock(&p->mu);
		return;
	}
	p->released = true;
	pthread_mutex_unlock(&p->mu);
	up__pipe_put(p);
}

/* An endpoint is closing: give back what it holds (a peek's lock, a
 * reservation, the bias, pages taken but never published). Never blocks. */
static void end_release(struct up_end *e)
{
	struct up_pipe *p = e->p;

	up__ring_disarm(e);
	if (e->flags & UP_RD) {
		up__peek_let_go(e);
	} else {
		up__resv_cancel(e);
	}
	up__bias_give_up(e);
	/* A writer's cache, or pages a reader's trim could not give back yet.
	 * If the readers' lock stays busy (a live peer sitting on it, or a
	 * forged holder), the pages stay tagged and a later sweep returns
	 * them once this end is gone. */
	if (e->ncache && !up__is_broken(p))
		up__pages_return(e, e->cache, e->ncache, true);
	e->ncache = 0;
	e->resv_pages = 0;
	e->resv_bytes = 0;
}

/*
 * The handle's descriptor must be this process's own open file description
 * before an end takes a liveness lock through it (live.c). A handle that
 * came across fork() with no end open shares the parent's: it gets its own
 * here, at its first open in the child.
 */
static int own_description(struct up_pipe *p)
{
	uint64_t sc = 0;
	int r = 0;

	pthread_mutex_lock(&p->mu);
	if (p->live_gen != up__live_gen())
		r = up__live_private(p, &sc);
	pthread_mutex_unlock(&p->mu);
	return r;
}

int up_open(struct up_pipe *p, int flags, struct up_end **out)
{
	struct up_end *e;
	uint64_t sc = 0;
	uint32_t st = 0;
	int dir, r;

	if (!p || !out)
		return -EINVAL;
	if (flags & ~(UP_RD | UP_WR | UP_NONBLOCK | UP_EARLY_POLL | UP_NO_EARLY))
		return -EINVAL;
	dir = flags & (UP_RD | UP_WR);
	if (dir != UP_RD && dir != UP_WR)
		return -EINVAL;
	if ((flags & (UP_EARLY_POLL | UP_NO_EARLY)) && dir != UP_RD)
		return -EINVAL;
	if ((flags & UP_EARLY_POLL) && (flags & UP_NO_EARLY))
		return -EINVAL;
	if (p->unmapped)
		return -EIO; /* a fork child that could not map it again (live.c) */
	if (up__is_broken(p))
		return -EPROTO;

	e = up__calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->p = p;
	/* A reader's poll mode reads ahead of regular data unless it opted
	 * out (UP_NO_EARLY), as its blocking mode does: poll.c keys on
	 * UP_EARLY_POLL alone. */
	e->flags = dir == UP_RD && !(flags & UP_NO_EARLY) ? flags | UP_EARLY_POLL : flags;
	e->spin_ns = UP_SPIN_INIT_NS;
	e->timeout_ns = UP_NO_TIMEOUT;
	/* The trim counts the traffic from here (reclaim.c). relaxed: a
	 * measure, not an ordering. */
	e->trim_get = atomic_load_explicit(&p->ln->pget.get, memory_order_relaxed);
	/* relaxed: as above. */
	e->trim_put = atomic_load_explicit(&p->ln->pput.put, memory_order_relaxed);
	e->take_batch = (p->g.page_count - p->g.spare_pages) / 16;
	if (e->take_batch > 16)
		e->take_batch = 16;
	if (e->take_batch == 0)
		e->take_batch = 1;
	e->waker = up__waker_new((p->g.flags & UP_CFG_SQPOLL) != 0);
	if (!e->waker) {
		r = -ENOMEM;
		goto err_free;
	}
	e->pid = getpid();
	/* An end's process registers for membarrier(2) here, once, rather
	 * than in its first call: the registration waits for an RCU grace
	 * period, milliseconds, which the first write paid holding the
	 * writers' lock, on the first message's latency. A refusal is
	 * remembered; the end then never biases its lock (fence.c), and a
	 * reader says so to the writers at once, so that they fence their
	 * stores for it (wait.c, up__wait_fence()). */
	if (!up__membarrier_registered(e->pid, &sc) && dir == UP_RD)
		up__nofence_mark(e);
	up__count(&e->c.syscalls, sc);
	e->pidns = up__live_pidns();
	e->live_ns = up__coarse_ns(); /* the first check is a slice away */
	r = own_description(p);
	if (r < 0)
		goto err_waker;
	/* Claims and frees of one handle under its mutex: two threads of a
	 * process share its open file description, so one's lock on an entry
	 * does not stop the other's, and a claim that lost its CAS must not
	 * drop the lock or the own bit of the thread that won it. */
	pthread_mutex_lock(&p->mu);
	r = up__end_claim(p, dir == UP_RD ? UP_END_READER : UP_END_WRITER, e->pid, UP_LIVE_OWNER,
			  e->pidns, &e->idx, &st);
	pthread_mutex_unlock(&p->mu);
	if (r == -EMFILE && up__peers_reap(e) > 0) {
		/* Entries of processes that died without closing are reaped
		 * by sleepers; a table full of them is reaped here. */
		pthread_mutex_lock(&p->mu);
		r = up__end_claim(p, dir == UP_RD ? UP_END_READER : UP_END_WRITER, e->pid,
				  UP_LIVE_OWNER, e->pidns, &e->idx, &st);
		pthread_mutex_unlock(&p->mu);
	}
	if (r < 0)
		goto err_waker;
	e->lock_id = up__lock_id(st, e->idx);
	e->tag = up__owner_tag(st, e->idx);
	e->busy = &p->ends[e->idx].busy;

	/* relaxed: we hold a reference already (the caller's handle). */
	atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	up__end_count(p, e->idx, st, dir == UP_RD ? &p->ln->state.readers : &p->ln->state.writers);
	/* The sides that came already (peer.c, counts_repair()); our own has.
	 * [wait] sc: as the sleep handshake reads the counts; pairs with
	 * [wait] sc in up__side_join(). */
	if (atomic_load_explicit(dir == UP_RD ? &p->ln->state.writers : &p->ln->state.readers,
				 memory_order_seq_cst) & UP_COUNT_EVER)
		e->came |= dir == UP_RD ? UP_CAME_WRITERS : UP_CAME_READERS;
	e->came |= dir == UP_RD ? UP_CAME_READERS : UP_CAME_WRITERS;
	pthread_mutex_lock(&p->mu);
	e->next = p->ends_list;
	if (p->ends_list)
		p->ends_list->prev = e;
	p->ends_list = e;
	pthread_mutex_unlock(&p->mu);
	up__fork_track(e);
	*out = e;
	return 0;

err_waker:
	e->waker->ops->destroy(e->waker);
err_free:
	up__free(e);
	return r;
}

static void counters_add(struct up__counters *dst, const struct up__counters *src)
{
	up__count(&dst->bytes_written, atomic_load_explicit(&src->bytes_written, memory_order_relaxed));
	up__count(&dst->bytes_read, atomic_load_explicit(&src->bytes_read, memory_order_relaxed));
	up__count(&dst->writes, atomic_load_explicit(&src->writes, memory_order_relaxed));
	up__count(&dst->reads, atomic_load_explicit(&src->reads, memory_order_relaxed));
	up__count(&dst->waits, atomic_load_explicit(&src->waits, memory_order_relaxed));
	up__count(&dst->wakes, atomic_load_explicit(&src->wakes, memory_order_relaxed));
	up__count(&dst->syscalls, atomic_load_explicit(&src->syscalls, memory_order_relaxed));
	up__count(&dst->revokes, atomic_load_explicit(&src->revokes, memory_order_relaxed));
	up__count(&dst->timeouts, atomic_load_explicit(&src->timeouts, memory_order_relaxed));
	up__count(&dst->trims, atomic_load_explicit(&src->trims, memory_order_relaxed));
	up__count(&dst->early, atomic_load_explicit(&src->early, memory_order_relaxed));
	up__count(&dst->early_misses, atomic_load_explicit(&src->early_misses, memory_order_relaxed));
	up__count(&dst->early_spin_ns, atomic_load_explicit(&src->early_spin_ns, memory_order_relaxed));
}

int up_close(struct up_end *e)
{
	struct up_pipe *p;
	_Atomic uint32_t *count;

	if (!e)
		return 0;
	p = e->p;
	up__fork_untrack(e);
	/* A forked child's copy that got no entry of its own (fork.c) has
	 * nothing in the segment to give back. */
	if (e->flags & (UP_RD | UP_WR)) {
		end_release(e);
		count = (e->flags & UP_RD) ? &p->ln->state.readers : &p->ln->state.writers;
		up__end_uncount(p, e->idx,
				up__end_state(e->tag, (e->flags & UP_RD) ? UP_END_READER
									 : UP_END_WRITER),
				count);
		/* The other side sleeps on its own line: the last writer wakes
		 * the readers (end of stream), the last reader the writers. */
		up__wake_all(e, (e->flags & UP_RD) ? &p->ln->wr_wait : &p->ln->rd_wait);
		pthread_mutex_lock(&p->mu); /* against claims, as in up_open() */
		up__end_free(p, e->idx, true);
		pthread_mutex_unlock(&p->mu);
	}

	pthread_mutex_lock(&p->mu);
	if (e->prev)
		e->prev->next = e->next;
	else
		p->ends_list = e->next;
	if (e->next)
		e->next->prev = e->prev;
	counters_add(&p->closed, &e->c);
	pthread_mutex_unlock(&p->mu);

	up__peers_forget(e);
	e->waker->ops->destroy(e->waker);
	up__free(e);
	up__pipe_put(p);
	return 0;
}

int up_pipe2(struct up_end *ends[2], const struct up_config *cfg)
{
	struct up_pipe *p;
	int r;

	if (!ends)
		return -EINVAL;
	r = up_pipe_create(cfg, &p);
	if (r < 0)
		return r;
	r = up_open(p, UP_RD, &ends[0]);
	if (r < 0)
		goto out;
	r = up_open(p, UP_WR, &ends[1]);
	if (r < 0) {
		up_close(ends[0]);
		ends[0] = NULL;
	}
out:
	up_pipe_release(p);
	return r;
}

int up_stats(const struct up_pipe *cp, struct up_stats *st)
{
	struct up_pipe *p = (struct up_pipe *)(uintptr_t)cp;
	struct up__counters sum;
	const struct up_end *e;
	const char *backend = NULL;

	if (!p || !st)
		return -EINVAL;
	memset(&sum, 0, sizeof(sum));
	pthread_mutex_lock(&p->mu);
	counters_add(&sum, &p->closed);
	for (e = p->ends_list; e; e = e->next) {
		counters_add(&sum, &e->c);
		if (e->waker->ops->name) /* NULL: lazy, not chosen yet */
			backend = e->waker->ops->name;
	}
	pthread_mutex_unlock(&p->mu);
	/* With no end open, say what a new one would get. */
	if (!backend)
		backend = up__waker_probe_name((p->g.flags & UP_CFG_SQPOLL) != 0);

	memset(st, 0, sizeof(*st));
	/* relaxed: statistics, a snapshot for reporting. */
	st->bytes_written = atomic_load_explicit(&sum.bytes_written, memory_order_relaxed);
	st->bytes_read = atomic_load_explicit(&sum.bytes_read, memory_order_relaxed);
	st->writes = atomic_load_explicit(&sum.writes, memory_order_relaxed);
	st->reads = atomic_load_explicit(&sum.reads, memory_order_relaxed);
	st->waits = atomic_load_explicit(&sum.waits, memory_order_relaxed);
	st->wakes = atomic_load_explicit(&sum.wakes, memory_order_relaxed);
	st->syscalls = atomic_load_explicit(&sum.syscalls, memory_order_relaxed);
	/* Relaxed: a snapshot for reporting. */
	st->readers = up__side_open(atomic_load_explicit(&p->ln->state.readers,
							 memory_order_relaxed));
	st->writers = up__side_open(atomic_load_explicit(&p->ln->state.writers,
							 memory_order_relaxed));
	st->numa_node = p->numa_node;
	strncpy(st->backend, backend, sizeof(st->backend) - 1);
	return 0;
}

int up_pollfd(struct up_end *e)
{
	uint64_t sc = 0;
	int fd;

	if (!e)
		return -EINVAL;
	if (!e->waker->ops->pollfd)
		return -EOPNOTSUPP;
	fd = e->waker->ops->pollfd(e->waker, &sc);
	up__count(&e->c.syscalls, sc);
	return fd;
}

int up_poll_arm(struct up_end *e)
{
	if (!e)
		return -EINVAL;
	return up__ring_poll_arm(e);
}

int up_set_timeout(struct up_end *e, int timeout_ms)
{
	if (!e || timeout_ms < -1)
		return -EINVAL;
	e->timeout_ns = timeout_ms < 0 ? UP_NO_TIMEOUT : (uint64_t)timeout_ms * 1000000u;
	return 0;
}

int up_wakeup(struct up_end *e)
{
	if (!e)
		return -EINVAL;
	return up__ends_with(e, up__kick);
}

struct up_pipe *up_end_pipe(const struct up_end *e)
{
	return e ? e->p : NULL;
}

size_t up_capacity(const struct up_pipe *p)
{
	return p ? (size_t)(p->g.page_count - p->g.spare_pages) * p->g.page_size : 0;
}

size_t up_page_size(const struct up_pipe *p)
{
	return p ? p->g.page_size : 0;
}

const char *up_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument";
	case -EBADF:
		return "wrong endpoint direction for this call";
	case -EAGAIN:
		return "operation would block";
	case -EPIPE:
		return "no reader left on the pipe";
	case -EPROTO:
		return "shared segment foreign, incompatible or corrupted";
	case -ENOMEM:
		return "out of memory";
	case -EMFILE:
		return "too many endpoints or file descriptors";
	case -ETIMEDOUT:
		return "timed out (up_set_timeout)";
	case -ECANCELED:
		return "woken by up_wakeup";
	default:
		return err < 0 ? strerror(-err) : "not an error code";
	}
}
