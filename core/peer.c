/* SPDX-License-Identifier: MIT */
/*
 * peer.c - noticing peers that died without closing.
 *
 * Every endpoint has an entry in the segment's endpoint table: its role, a
 * generation, and the pid of its process. A process killed with SIGKILL
 * never runs up_close(), so its readers/writers counts would stay up forever
 * and the other side would sleep forever. Two things prevent that:
 *
 *  - while a side sleeps, its io_uring also polls the pidfds of the peer
 *    processes it depends on (writers for a reader, readers for a writer),
 *    so it wakes the moment one of them exits; the futex(2) fallback cannot
 *    watch pidfds and instead sleeps in bounded slices;
 *  - on waking for either reason it reaps: every entry whose process is
 *    gone is freed (one CAS, so one reaper wins) and the count of its role
 *    dropped, which turns into end of stream or -EPIPE through the ordinary
 *    sleep handshake.
 *
 * A lock whose holder died is taken over by the next taker (lock.c): the
 * ring is published by single stores (head, a slot's len, the readers'
 * position word), so a holder that died mid-way left nothing half-visible.
 *
 * Pid reuse: liveness is asked of pidfds opened while the peer was alive
 * when we have them, else of kill(pid, 0); a reused pid can only delay the
 * reaping of one entry until that pid exits too, never reap a live peer.
 * Entries of this process are never reaped by it (it is alive by
 * definition).
 */
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ring.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/*
 * Has the process exited? kill(pid, 0) is not enough: it succeeds on a
 * zombie (killed, not yet waited for by its parent), and a killed peer stays
 * a zombie for as long as its parent is busy. A pidfd polls readable as
 * soon as the process has exited, zombie or not.
 */
static bool pid_alive(pid_t pid, uint64_t *syscalls)
{
	struct pollfd pfd;
	int fd, r;

	*syscalls += 1;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0) {
		if (errno == ESRCH)
			return false;
		/* No pidfds here (old kernel, seccomp): fall back. EPERM:
		 * it exists, we just may not signal it. */
		*syscalls += 1;
		return kill(pid, 0) == 0 || errno == EPERM;
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	*syscalls += 2;
	r = poll(&pfd, 1, 0);
	close(fd);
	return !(r > 0 && (pfd.revents & (POLLIN | POLLHUP)));
}

/* Claim an entry of the segment's endpoint table for an end of @role in
 * process @pid. 0, or -EMFILE when the table is full. */
int up__end_claim(struct up_pipe *p, uint32_t role, pid_t pid, uint32_t *idx, uint32_t *state)
{
	uint32_t i;

	for (i = 0; i < p->g.max_ends; i++) {
		struct up_shm_end *se = &p->ends[i];
		/* relaxed: a first look; the CAS below decides. */
		uint32_t cur = atomic_load_explicit(&se->state, memory_order_relaxed);

		if ((cur & UP_END_ROLE_MASK) != UP_END_FREE)
			continue;
		/* The generation in the upper bits changes with every claim, so a
		 * stale lock owner id can be told from a new holder (issue 6). */
		uint32_t next = (((cur >> 8) + 1) << 8) | role;

		/* [end-state] acq_rel: the entry is ours, after its last owner's
		 * uses; pairs with [end-state] rel in up__end_free() and with
		 * [end-state] acq in up__peers_reap(). */
		if (atomic_compare_exchange_strong_explicit(&se->state, &cur, next,
							    memory_order_acq_rel,
							    memory_order_relaxed)) {
			*state = next;
			/* relaxed: published by the [end-pid] release below. */
			atomic_store_explicit(&se->busy, UP_BUSY_OUT, memory_order_relaxed);
			atomic_store_explicit(&se->armed, UP_ARMED_LINE_NONE, memory_order_relaxed);
			/* [ends-gen] rel: the entry's words before its pid; the
			 * generation bump below publishes it too; pairs with
			 * [ends-gen] acq in up__peers_watch(). */
			atomic_store_explicit(&se->pid, (int32_t)pid, memory_order_release);
			/* [ends-gen] rel: the claimed entry before the new
			 * generation; pairs with [ends-gen] acq in
			 * up__sweep_orphans(). */
			atomic_fetch_add_explicit(&p->ln->state.ends_gen, 1,
						  memory_order_release);
			*idx = i;
			return 0;
		}
	}
	return -EMFILE;
}

void up__end_free(struct up_pipe *p, uint32_t idx)
{
	struct up_shm_end *se = &p->ends[idx];
	/* relaxed: our own entry; nobody else writes it while it is ours. */
	uint32_t cur = atomic_load_explicit(&se->state, memory_order_relaxed);

	/* relaxed: published by the [end-state] release below. */
	atomic_store_explicit(&se->pid, 0, memory_order_relaxed);
	/* [end-state] rel: our last uses of the pipe before the entry is free;
	 * pairs with [end-state] acq_rel in up__end_claim(). */
	atomic_store_explicit(&se->state, cur & ~UP_END_ROLE_MASK, memory_order_release);
	/* [ends-gen] rel: the freed entry before the new generation; pairs
	 * with [ends-gen] acq in up__sweep_orphans(). */
	atomic_fetch_add_explicit(&p->ln->state.ends_gen, 1, memory_order_release);
}

/* seq_cst decrement that never goes below zero, whatever a peer wrote. */
static void dec_floor0(_Atomic uint32_t *count)
{
	/* relaxed: a guess; the CAS below checks it. */
	uint32_t old = atomic_load_explicit(count, memory_order_relaxed);

	/* [wait] sc: on a wait line's nwait or npoll, a dead sleeper or armed
	 * end leaving it, as up__wait_ready() and up__ring_disarm() do; pairs
	 * with [wait] sc in up__wake_line(). On the writers' lock's
	 * npoll, [lock-poll] sc: a dead poller leaving; pairs with [lock-poll]
	 * sc in up__lock_wake(). */
	while (old != 0 &&
	       !atomic_compare_exchange_weak_explicit(count, &old, old - 1,
						      memory_order_seq_cst,
						      memory_order_relaxed))
		;
}

/* Free a dead endpoint's entry and drop its role's count. Returns true if
 * this call did it. */
static bool reap_entry(struct up_pipe *p, uint32_t idx, uint32_t seen)
{
	struct up_shm_end *se = &p->ends[idx];
	uint32_t role = seen & UP_END_ROLE_MASK;
	_Atomic uint32_t *count;
	uint32_t armed;

	/* [end-state] acq_rel: one reaper wins, and the loser sees the entry
	 * freed; the acquire half orders what follows after the claim being
	 * reaped, the release half gives the next claimer the free. Pairs
	 * with [end-state] acq_rel in up__end_claim() and [end-state] acq in
	 * up__peers_reap(). */
	if (!atomic_compare_exchange_strong_explicit(&se->state, &seen,
						     seen & ~UP_END_ROLE_MASK,
						     memory_order_acq_rel,
						     memory_order_relaxed))
		return false;
	/* relaxed: a free entry's pid is ignored; it publishes nothing. */
	atomic_store_explicit(&se->pid, 0, memory_order_relaxed);
	/* It died asleep, or armed in poll mode: take it off that wait line.
	 * Left there, it made every waker believe in a sleeper, and an armed
	 * one turned every data wake into a wake for all.
	 * relaxed: the exchange reads the latest value whatever the order, and
	 * the counts it names are changed by their own seq_cst RMWs below. */
	armed = atomic_exchange_explicit(&se->armed, UP_ARMED_LINE_NONE, memory_order_relaxed);
	if ((armed & UP_ARMED_LINE_MASK) == UP_ARMED_LINE_RD ||
	    (armed & UP_ARMED_LINE_MASK) == UP_ARMED_LINE_WR) {
		struct up_shm_wait *wl = (armed & UP_ARMED_LINE_MASK) == UP_ARMED_LINE_RD
						 ? &p->ln->rd_wait
						 : &p->ln->wr_wait;

		dec_floor0(&wl->nwait);
		if (armed & UP_ARMED_LINE_POLL)
			dec_floor0(&wl->npoll);
	} else if ((armed & UP_ARMED_LINE_MASK) == UP_ARMED_LINE_WLOCK) {
		dec_floor0(&p->ln->wlock.npoll);
	}
	count = role == UP_END_READER ? &p->ln->state.readers : &p->ln->state.writers;
	up__side_leave(count);
	/* [ends-gen] rel: the freed entry and the dropped counts before the
	 * new generation; pairs with [ends-gen] acq in up__sweep_orphans() and
	 * up__peers_watch(). */
	atomic_fetch_add_explicit(&p->ln->state.ends_gen, 1, memory_order_release);
	return true;
}

int up__peers_reap(struct up_end *e)
{
	struct up_pipe *p = e->p;
	const pid_t self = e->pid;
	uint64_t sc = 0;
	uint32_t i;
	int reaped = 0;

	for (i = 0; i < p->g.max_ends; i++) {
		/* [end-state] acq: the entry as its claim or free left it;
		 * pairs with [end-state] acq_rel in up__end_claim() and
		 * reap_entry() and [end-state] rel in up__end_free(). */
		uint32_t st = atomic_load_explicit(&p->ends[i].state, memory_order_acquire);
		pid_t pid;

		if ((st & UP_END_ROLE_MASK) == UP_END_FREE)
			continue;
		/* relaxed: a liveness hint, asked of the kernel before use; 0
		 * (a claim not finished) skips the entry. */
		pid = atomic_load_explicit(&p->ends[i].pid, memory_order_relaxed);
		if (pid <= 0 || pid == self)
			continue;
		if (pid_alive(pid, &sc))
			continue;
		if (reap_entry(p, i, st))
			reaped++;
	}
	up__count(&e->c.syscalls, sc);
	if (reaped) {
		/* Both sides may be asleep on a condition the counts decide. */
		up__wake_all(e, &p->ln->rd_wait);
		up__wake_all(e, &p->ln->wr_wait);
	}
	return reaped;
}

/*
 * Is the endpoint named by a lock word (see up__lock_id()) gone? Yes when
 * its entry is free, or holds a newer generation (the entry was reaped and
 * claimed again: the same index, another endpoint), or its process died.
 */
bool up__lock_owner_gone(struct up_end *e, uint32_t owner)
{
	struct up_pipe *p = e->p;
	uint32_t idx = (owner & UP_END_ROLE_MASK) - 1;
	/* [end-state] acq: the entry as its claim or free left it, as in
	 * up__peers_reap(); pairs with [end-state] acq_rel in up__end_claim()
	 * and reap_entry() and [end-state] rel in up__end_free(). */
	uint32_t st = atomic_load_explicit(&p->ends[idx].state, memory_order_acquire);
	pid_t pid;
	uint64_t sc = 0;
	bool dead;

	if ((st & UP_END_ROLE_MASK) == UP_END_FREE)
		return true;
	if (up__lock_id(st, idx) != owner)
		return true;
	/* relaxed: a liveness hint, as in up__peers_reap(). */
	pid = atomic_load_explicit(&p->ends[idx].pid, memory_order_relaxed);
	if (pid <= 0 || pid == e->pid)
		return false;
	dead = !pid_alive(pid, &sc);
	up__count(&e->c.syscalls, sc);
	if (dead)
		reap_entry(p, idx, st);
	return dead;
}

static void close_pidfds(struct up_end *e)
{
	int i;

	for (i = 0; i < e->npeer; i++)
		close(e->peer_pidfds[i]);
	e->npeer = 0;
}

void up__peers_forget(struct up_end *e)
{
	close_pidfds(e);
}

/*
 * Before sleeping: make sure e->peer_pidfds holds pidfds of the processes
 * whose death should wake us (entries of @role). Rebuilt only when the
 * endpoint table changed since the last time, so a steady pipe pays nothing.
 */
int up__peers_watch(struct up_end *e, uint32_t role)
{
	struct up_pipe *p = e->p;
	const pid_t self = e->pid;
	/* [ends-gen] acq: the table as of this generation; pairs with
	 * [ends-gen] rel in up__end_claim(), up__end_free() and
	 * reap_entry(). */
	uint32_t gen = atomic_load_explicit(&p->ln->state.ends_gen, memory_order_acquire);
	pid_t seen[UP_MAX_PEER_FDS];
	uint64_t sc = 0;
	uint32_t i;
	int n = 0, j, gone = 0;

	if (e->peers_gen == gen + 1 && e->peers_role == role)
		return 0;
	close_pidfds(e);
	for (i = 0; i < p->g.max_ends && e->npeer < UP_MAX_PEER_FDS; i++) {
		/* [end-state] acq: as in up__peers_reap(); pairs with
		 * [end-state] acq_rel in up__end_claim() and reap_entry() and
		 * [end-state] rel in up__end_free(). */
		uint32_t st = atomic_load_explicit(&p->ends[i].state, memory_order_acquire);
		pid_t pid;
		int fd;

		if (role == UP_PEERS_ANY ? (st & UP_END_ROLE_MASK) == UP_END_FREE
					 : (st & UP_END_ROLE_MASK) != role)
			continue;
		/* relaxed: a liveness hint, as in up__peers_reap(). */
		pid = atomic_load_explicit(&p->ends[i].pid, memory_order_relaxed);
		if (pid <= 0 || pid == self)
			continue;
		for (j = 0; j < n && seen[j] != pid; j++)
			;
		if (j < n)
			continue; /* one pidfd per process */
		seen[n++] = pid;
		sc++;
		fd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (fd >= 0)
			e->peer_pidfds[e->npeer++] = fd;
		else if (errno == ESRCH)
			gone = 1; /* already gone: no pidfd will ever fire for it */
	}
	up__count(&e->c.syscalls, sc);
	/* +1 so that 0 means "never built". */
	e->peers_gen = gen + 1;
	e->peers_role = role;
	return gone;
}
