/* SPDX-License-Identifier: MIT */
/*
 * fork.c - ends inherited across fork(2) work in the child as pipe(2) ends
 * do: both processes hold them from the moment of the fork, and closing one
 * in one process leaves the other's.
 *
 * An end is an entry in the segment's endpoint table plus one in the reader
 * or writer count. For the child's copy to count from the fork, not from
 * its first call, the entries are made before the fork, in the parent:
 *
 *   prepare (parent)     for each open end: claim an entry (pid: the
 *                        parent's, for now) and count it; hold every lock
 *                        the child's copy of memory must find free
 *   child                take over the claimed entries: store the child's
 *                        pid in each and wake the parent; give up what the
 *                        parent's end holds (its page cache, its bias, a
 *                        peek's lock, its io_uring) and start afresh
 *   parent               wait until the child has taken each entry; an
 *                        entry nobody took (fork failed, or the child died
 *                        or stalled past UP_FORK_ACK_NS) is freed and its
 *                        count dropped, so it never holds the stream open
 *
 * A child that finds its entry freed (it ran after the parent gave up on
 * it) claims a fresh one. A child whose entry could not be made (the table
 * was full) gets an end that refuses every call with -EBADF.
 *
 * This needs the process's list of open ends: the one piece of state the
 * library keeps outside the handles, because pthread_atfork() handlers get
 * no argument. Rejected: noticing the fork lazily, at the child's first call
 * (getpid() is a system call, and the parent's close could end the stream
 * before the child's end counted); a per-entry count of holding processes
 * (the fork's failure is just as invisible to it).
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"

/* How long the parent's fork() waits for the child to take its entries. */
#define UP_FORK_ACK_NS 1000000000ull

static pthread_mutex_t procs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct up_end *procs; /* every open end of this process */
static struct up_pipe *pipes; /* every pipe handle of this process */
static pthread_once_t procs_once = PTHREAD_ONCE_INIT;

static _Atomic uint32_t *count_of(struct up_end *e)
{
	return (e->flags & UP_RD) ? &e->p->ln->state.readers : &e->p->ln->state.writers;
}

static _Atomic uint32_t *pid_word(struct up_pipe *p, uint32_t idx)
{
	return (_Atomic uint32_t *)(void *)&p->ends[idx].pid;
}

/* Every pipe handle of the process: lock (or unlock) its mutex, so the
 * child's copy of it is free. */
static void pipes_lock(bool lock)
{
	struct up_pipe *p;

	for (p = pipes; p; p = p->proc_next) {
		if (lock)
			pthread_mutex_lock(&p->mu);
		else
			pthread_mutex_unlock(&p->mu);
	}
}

static void fork_prepare(void)
{
	struct up_end *e;

	pthread_mutex_lock(&procs_mu);
	pipes_lock(true);
	for (e = procs; e; e = e->proc_next) {
		uint32_t role = (e->flags & UP_RD) ? UP_END_READER : UP_END_WRITER;

		e->fork_idx = UINT32_MAX;
		if (!(e->flags & (UP_RD | UP_WR)) || up__is_broken(e->p))
			continue;
		/* Held by the parent's liveness byte for handing over
		 * (live.c), and counted as the parent's own until the child
		 * holds it, so that nobody reaps it in between. */
		if (up__end_claim(e->p, role, UP_PID_HANDOVER, UP_LIVE_HANDOVER, e->pidns,
				  &e->fork_idx, &e->fork_state) < 0) {
			e->fork_idx = UINT32_MAX;
			continue;
		}
		up__end_count(e->p, e->fork_idx, e->fork_state, count_of(e));
	}
}

/* The entry claimed for the child is still as the parent left it. */
static bool entry_untaken(struct up_end *e)
{
	struct up_shm_end *se = &e->p->ends[e->fork_idx];

	/* [end-state] acq: pairs with [end-state] rel in up__end_free(). */
	if (atomic_load_explicit(&se->state, memory_order_acquire) != e->fork_state)
		return false;
	/* [fork-ack] acq: the child's taking of the entry; pairs with
	 * [fork-ack] rel in child_adopt(). */
	return atomic_load_explicit(&se->pid, memory_order_acquire) == UP_PID_HANDOVER;
}

static void fork_parent(void)
{
	uint64_t deadline = up__now_ns() + UP_FORK_ACK_NS, sc = 0;
	struct up_end *e;

	for (e = procs; e; e = e->proc_next) {
		if (e->fork_idx == UINT32_MAX)
			continue;
		for (;;) {
			uint64_t now = up__now_ns();

			if (!entry_untaken(e) || now >= deadline)
				break;
			up__futex_wait(pid_word(e->p, e->fork_idx), (uint32_t)UP_PID_HANDOVER,
				       deadline - now, &sc);
		}
		if (entry_untaken(e)) {
			/* No child took it: it must not hold the stream open. */
			up__end_uncount(e->p, e->fork_idx, e->fork_state, count_of(e));
			up__end_free(e->p, e->fork_idx, true);
			up__wake_all(e, (e->flags & UP_RD) ? &e->p->ln->wr_wait : &e->p->ln->rd_wait);
		} else {
			/* The child holds the entry's own byte now. */
			up__end_handed(e->p, e->fork_idx);
		}
		e->fork_idx = UINT32_MAX;
	}
	pipes_lock(false);
	pthread_mutex_unlock(&procs_mu);
}

/* The child's copy of @e becomes an end of its own at entry @idx. */
static void child_adopt(struct up_end *e, uint32_t idx, uint32_t state, pid_t self,
			uint64_t pidns)
{
	struct up_pipe *p = e->p;
	struct up__waker *old = e->waker;
	uint64_t sc = 0;

	e->idx = idx;
	e->busy = &p->ends[idx].busy;
	e->lock_id = up__lock_id(state, idx);
	e->tag = up__owner_tag(state, idx);
	e->pid = self;
	e->pidns = pidns;
	e->live_calls = 0;
	e->live_ns = 0;
	e->peers_blind = 0;
	/* What the parent's end holds stays the parent's: its page cache and
	 * reservation, its bias, a peek's hold on the readers' lock, its
	 * announcement as a sleeper or poller. */
	e->ncache = 0;
	e->resv_pages = 0;
	e->resv_bytes = 0;
	e->resv_merge = false;
	e->biased = false;
	e->held = 0; /* the parent's locks and bias; the claim zeroed the entry's word */
	e->pool_lost_ns = 0;
	e->last_ok = false;
	e->peek_locked = false;
	e->peek_shown = 0;
	/* A window the parent's writer began is not the child's to time. */
	e->stores.t0 = 0;
	e->stores.bytes = 0;
	e->armed = UP_ARMED_NONE;
	e->parked = false;
	e->armed_on = UP_ARMED_ON_LINE;
	e->streak = 0;
	e->coalesce_backoff = 0;
	e->err = 0;
	e->tail_cache = 0;
	e->sweep_gen = 0;
	atomic_store_explicit(&e->sleep_on, 0, memory_order_relaxed); /* relaxed: not shared yet */
	up__peers_forget(e);
	e->peers_gen = 0;
	memset(&e->c, 0, sizeof(e->c));
	/* The parent's io_uring is not the child's to use; the child gets
	 * its own when it first sleeps or wakes. */
	old->ops->destroy(old);
	e->waker = up__waker_lazy(&e->waker, (p->g.flags & UP_CFG_SQPOLL) != 0);
	/* relaxed: published by the [fork-ack] release below. */
	atomic_store_explicit(&p->ends[idx].pidns, pidns, memory_order_relaxed);
	/* [fork-ack] rel: the entry is the child's; pairs with [fork-ack] acq
	 * in entry_untaken(). */
	atomic_store_explicit(&p->ends[idx].pid, (int32_t)self, memory_order_release);
	up__futex_wake(pid_word(p, idx), UP_WAKE_ALL, &sc);
}

/* The child holds entry @idx's own liveness byte. A claimer of the entry
 * in another process may hold it for an instant (it locks before it finds
 * the entry taken): retry a little. */
static bool child_hold(struct up_pipe *p, uint32_t idx)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (up__live_hold(p, idx, UP_LIVE_OWNER) == 0) {
			up__end_mine(p, idx);
			return true;
		}
		sched_yield();
	}
	return false;
}

static void fork_child(void)
{
	const pid_t self = getpid();
	uint64_t pidns, sc = 0;
	struct up_pipe *p;
	struct up_end *e;

	/* First an open file description of its own for every pipe handle,
	 * with ends or not (live.c): until then the child's locks would be
	 * the parent's, and the parent's would outlive the parent for as long
	 * as the child held its copy of the descriptor. */
	/* Before anything here can take its lock (a parent thread may have
	 * held it at the fork). */
	up__closewatch_forked();
	up__live_forked();
	pidns = up__live_pidns();
	for (p = pipes; p; p = p->proc_next)
		p->unmapped = up__live_private(p, &sc) == -EFAULT;
	for (e = procs; e; e = e->proc_next) {
		uint32_t role = (e->flags & UP_RD) ? UP_END_READER : UP_END_WRITER;
		uint32_t idx = e->fork_idx, state = e->fork_state;
		bool own = e->p->live_gen == up__live_gen();

		if (e->p->unmapped) {
			/* Nothing of the segment to touch: the parent frees
			 * the entry when no ack comes. */
			e->fork_idx = UINT32_MAX;
			e->flags &= ~(UP_RD | UP_WR);
			continue;
		}

		if (idx != UINT32_MAX &&
		    /* [end-state] acq: still the claim the parent made; pairs
		     * with [end-state] rel in up__end_free(). */
		    atomic_load_explicit(&e->p->ends[idx].state, memory_order_acquire) != state)
			idx = UINT32_MAX; /* the parent gave up on us: claim anew */
		if (idx != UINT32_MAX && (!own || !child_hold(e->p, idx))) {
			/* Without a lock of its own the entry would die with
			 * the parent's: give it back now. */
			up__end_uncount(e->p, idx, state, count_of(e));
			up__end_free(e->p, idx, own);
			idx = UINT32_MAX;
			own = false;
		}
		if (idx == UINT32_MAX && own && (e->flags & (UP_RD | UP_WR)) &&
		    up__end_claim(e->p, role, self, UP_LIVE_OWNER, pidns, &idx, &state) == 0)
			up__end_count(e->p, idx, state, count_of(e));
		e->fork_idx = UINT32_MAX;
		if (idx == UINT32_MAX) {
			/* No entry for the child's copy: it refuses every call
			 * (-EBADF), and its close touches nothing shared. */
			e->flags &= ~(UP_RD | UP_WR);
			continue;
		}
		child_adopt(e, idx, state, self, pidns);
	}
	pipes_lock(false);
	pthread_mutex_unlock(&procs_mu);
}

static void procs_install(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void up__fork_track(struct up_end *e)
{
	pthread_once(&procs_once, procs_install);
	pthread_mutex_lock(&procs_mu);
	e->fork_idx = UINT32_MAX;
	e->proc_prev = NULL;
	e->proc_next = procs;
	if (procs)
		procs->proc_prev = e;
	procs = e;
	pthread_mutex_unlock(&procs_mu);
}

int up__ends_with(struct up_end *e, void (*fn)(struct up_end *))
{
	struct up_end *f;

	pthread_once(&procs_once, procs_install);
	pthread_mutex_lock(&procs_mu);
	for (f = procs; f && f != e; f = f->proc_next)
		;
	if (f)
		fn(e);
	pthread_mutex_unlock(&procs_mu);
	return f ? 0 : -EBADF;
}

void up__fork_track_pipe(struct up_pipe *p)
{
	pthread_once(&procs_once, procs_install);
	pthread_mutex_lock(&procs_mu);
	p->proc_prev = NULL;
	p->proc_next = pipes;
	if (pipes)
		pipes->proc_prev = p;
	pipes = p;
	pthread_mutex_unlock(&procs_mu);
}

void up__fork_untrack_pipe(struct up_pipe *p)
{
	pthread_mutex_lock(&procs_mu);
	if (p->proc_prev)
		p->proc_prev->proc_next = p->proc_next;
	else
		pipes = p->proc_next;
	if (p->proc_next)
		p->proc_next->proc_prev = p->proc_prev;
	pthread_mutex_unlock(&procs_mu);
}

void up__fork_untrack(struct up_end *e)
{
	pthread_mutex_lock(&procs_mu);
	if (e->proc_prev)
		e->proc_prev->proc_next = e->proc_next;
	else
		procs = e->proc_next;
	if (e->proc_next)
		e->proc_next->proc_prev = e->proc_prev;
	pthread_mutex_unlock(&procs_mu);
}
