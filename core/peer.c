/* SPDX-License-Identifier: MIT */
/*
 * peer.c - the endpoint table, and noticing peers that died without closing.
 *
 * Every endpoint has an entry in the segment's endpoint table: its role, a
 * generation, and an OFD lock on the memfd that the kernel drops when its
 * process goes (live.c). A process killed with SIGKILL never runs
 * up_close(), so its readers/writers counts would stay up forever and the
 * other side would wait forever. Reaping prevents that: every entry whose
 * lock is gone is freed (one CAS, so one reaper wins) and the count of its
 * role dropped, which turns into end of stream or -EPIPE through the
 * ordinary sleep handshake. Reaping runs where an end has time for a system
 * call per peer: when a sleep slice ends or a pidfd fires, when a call
 * would return -EAGAIN, and on a bounded interval while an end streams
 * (up__live_tick(), ring.h).
 *
 * What wakes a sleeper when a peer dies: where the peer's pid means the
 * same process to us (its entry names our pid namespace), the sleeper's
 * io_uring polls a pidfd of it and wakes at once; elsewhere (another pid
 * namespace, the futex(2) backend) the sleep's slice (UP_WAIT_SLICE_NS)
 * bounds how late the death is seen. A pid and a namespace read from the
 * segment are only hints for that wake: whether the peer is alive is always
 * asked of its lock.
 *
 * Counts are hints too: a side with no entry left in the table has no open
 * end whatever its count says, and a side that came cannot un-come
 * (counts_repair()).
 *
 * A lock whose holder died is taken over by the next taker (take.c): the
 * ring is published by single stores (head, a slot's len, the readers'
 * position word), so a holder that died mid-way left nothing half-visible.
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
 * Claim an entry of the segment's endpoint table for an end of @role in
 * process @pid (UP_PID_HANDOVER: a child's, in fork()), holding its
 * liveness byte @which. 0, or -EMFILE when the table is full.
 *
 * Even entries first: two 32-byte entries share a line, and an end stores
 * to its own entry twice per call (held around the readers' lock, busy
 * around the writers' bias). The first 32 ends each get a line to
 * themselves, so that a reader and a writer do not trade one line on every
 * call, two cross-core misses per message.
 */
static inline uint32_t claim_order(const struct up_pipe *p, uint32_t k)
{
	uint32_t half = p->g.max_ends / 2;

	return k < half ? 2 * k : 2 * (k - half) + 1;
}

int up__end_claim(struct up_pipe *p, uint32_t role, pid_t pid, uint32_t which, uint64_t pidns,
		  uint32_t *idx, uint32_t *state)
{
	uint32_t k, i;

	for (k = 0; k < p->g.max_ends; k++) {
		i = claim_order(p, k);
		struct up_shm_end *se = &p->ends[i];
		/* relaxed: a first look; the CAS below decides. */
		uint32_t cur = atomic_load_explicit(&se->state, memory_order_relaxed);

		if ((cur & UP_END_ROLE_MASK) != UP_END_FREE)
			continue;
		/* The lock before the claim: a reaper never sees the entry
		 * claimed and unlocked. Held by another description: somebody
		 * is claiming it right now, or a peer holds it for no reason. */
		if (up__live_hold(p, i, which) < 0)
			continue;
		/* The generation in the upper bits changes with every claim, so a
		 * stale lock owner id can be told from a new holder (issue 6). */
		uint32_t next = (((cur >> 8) + 1) << 8) | role;

		/* Ours before it is claimed: another thread of this process that
		 * reaps must never ask the lock, which our own description's
		 * GETLK cannot see, of an entry claimed here and not yet marked.
		 * relaxed: our own mask (up__live_own()); a free entry's bit is
		 * never looked at. */
		atomic_fetch_or_explicit(&p->own, (uint64_t)1 << i, memory_order_relaxed);

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
			/* [held] rel: after the new state, so that a taker
			 * that reads this held word and then finds the end it
			 * looked for alive read that end's own; pairs with
			 * [held] sc in up__take_back(). */
			atomic_store_explicit(&se->held, 0, memory_order_release);
			/* relaxed: as busy and armed. */
			atomic_store_explicit(&se->counted, 0, memory_order_relaxed);
			atomic_store_explicit(&se->pidns, pidns, memory_order_relaxed);
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
		/* relaxed: as above. */
		atomic_fetch_and_explicit(&p->own, ~((uint64_t)1 << i), memory_order_relaxed);
		up__live_drop(p, i);
	}
	return -EMFILE;
}

void up__end_free(struct up_pipe *p, uint32_t idx, bool drop)
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
	/* relaxed: our own mask (up__live_own()). */
	atomic_fetch_and_explicit(&p->own, ~((uint64_t)1 << idx), memory_order_relaxed);
	/* After the free: until then a reaper must find the lock held. */
	if (drop)
		up__live_drop(p, idx);
}

/*
 * An end in its side's count (@count), and out of it. The count changes
 * and the entry's mark (counted) cannot be one store, and a process can be
 * killed between any two, so they go in the order that leaves a count too
 * high, never too low: in, the count first and then the mark; out, the
 * mark cleared first and then the count. A reaper takes the end out of the
 * count only if it clears a mark the dead end left (reap_entry()). So an
 * end killed between the two steps stays counted with no entry behind it,
 * which counts_repair() puts right once its side has no entry left; never
 * is a live end's share taken out with it, which would give its peers end
 * of stream or -EPIPE while it is open.
 */
void up__end_count(struct up_pipe *p, uint32_t idx, uint32_t state, _Atomic uint32_t *count)
{
	up__side_join(count);
	/* [counted] sc: the mark after the count it stands for; pairs with
	 * [counted] sc in reap_entry(). */
	atomic_store_explicit(&p->ends[idx].counted, state, memory_order_seq_cst);
}

/* @state: the one the end was counted under, not the entry's state now,
 * which may be a later owner's (a forked child that ran after its parent
 * gave its entry up, fork.c): only our own mark is ever cleared. */
void up__end_uncount(struct up_pipe *p, uint32_t idx, uint32_t state, _Atomic uint32_t *count)
{
	struct up_shm_end *se = &p->ends[idx];
	uint32_t st = state;

	/* [counted] sc: the mark cleared before the count it stands for;
	 * pairs with [counted] sc in reap_entry(). Failure: a peer stored
	 * something else there; the count stays, for counts_repair(). */
	if (atomic_compare_exchange_strong_explicit(&se->counted, &st, 0, memory_order_seq_cst,
						    memory_order_relaxed))
		up__side_leave(count);
}

/* fork.c: entry @idx, claimed by this process for its child, is the
 * child's now (it holds the owner's byte): no longer ours to skip, and the
 * handover byte goes. */
void up__end_handed(struct up_pipe *p, uint32_t idx)
{
	/* relaxed: our own mask (up__live_own()). */
	atomic_fetch_and_explicit(&p->own, ~((uint64_t)1 << idx), memory_order_relaxed);
	up__live_drop(p, idx);
}

/* fork.c: entry @idx, claimed by the parent, is this child's. */
void up__end_mine(struct up_pipe *p, uint32_t idx)
{
	/* relaxed: our own mask (up__live_own()). */
	atomic_fetch_or_explicit(&p->own, (uint64_t)1 << idx, memory_order_relaxed);
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
	/* Where it died announced, asleep or armed in poll mode; read before
	 * the entry is freed, since a new owner may rewrite it right after.
	 * relaxed: the dead owner wrote it last (its lock is gone), and the
	 * counts it names are changed by their own seq_cst RMWs below. */
	uint32_t armed = atomic_load_explicit(&se->armed, memory_order_relaxed);
	uint32_t mark = seen;
	/* The dead end's share of its side's count, if it left its mark: its
	 * clear is ours alone, before the entry can be freed and claimed again
	 * (a new owner's mark has another generation). [counted] sc: pairs with
	 * [counted] sc in up__end_count() and up__end_uncount(). */
	bool counted = atomic_compare_exchange_strong_explicit(&se->counted, &mark, 0,
								memory_order_seq_cst,
								memory_order_relaxed);
	_Atomic uint32_t *count = role == UP_END_READER ? &p->ln->state.readers
			       : role == UP_END_WRITER ? &p->ln->state.writers
						       : NULL;

	/* [end-state] acq_rel: one reaper wins, and the loser sees the entry
	 * freed; the acquire half orders what follows after the claim being
	 * reaped, the release half gives the next claimer the free. Pairs
	 * with [end-state] acq_rel in up__end_claim() and [end-state] acq in
	 * up__peers_reap(). */
	if (!atomic_compare_exchange_strong_explicit(&se->state, &seen,
						     seen & ~UP_END_ROLE_MASK,
						     memory_order_acq_rel,
						     memory_order_relaxed)) {
		if (counted && count)
			up__side_leave(count);
		return false;
	}
	/* Take it off that wait line. Left there, it made every waker believe
	 * in a sleeper, and an armed one turned every data wake into a wake
	 * for all. The entry itself is not written again: it may be claimed
	 * already. */
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
	if (counted && count)
		up__side_leave(count);
	/* [ends-gen] rel: the freed entry and the dropped counts before the
	 * new generation; pairs with [ends-gen] acq in up__sweep_orphans() and
	 * up__peers_watch(). */
	atomic_fetch_add_explicit(&p->ln->state.ends_gen, 1, memory_order_release);
	return true;
}

/*
 * A count that the table contradicts, put right: a side with an open count
 * but no entry of its role left has no open end (a peer stored the count,
 * or died between a count change and its mark, up__end_count()), and a
 * side this end saw come has come, whatever was stored since. Safe against
 * honest ends in flight: an end is claimed before it is counted and
 * uncounted before it is freed, so a count above the table's entries can
 * only be stale, and the CAS fails if any end joined or left since the
 * load.
 */
static bool counts_repair(struct up_end *e, _Atomic uint32_t *count, uint32_t entries,
			  uint32_t bit, uint32_t gen)
{
	/* [wait] sc: as the counts are read by the sleep handshake; pairs
	 * with [wait] sc in up__side_leave(). */
	uint32_t x = atomic_load_explicit(count, memory_order_seq_cst), want = x;

	/* An end claimed after the scan passed its entry, and counted before
	 * the load above, bumped the generation in between: then @entries is
	 * stale, and the next check decides.
	 * [ends-gen] acq: pairs with [ends-gen] rel in up__end_claim(). */
	if (atomic_load_explicit(&e->p->ln->state.ends_gen, memory_order_acquire) != gen)
		entries = UINT32_MAX;

	/* A reader that has read a byte has seen a writer come. relaxed: our
	 * own counter. */
	if (bit == UP_CAME_WRITERS && atomic_load_explicit(&e->c.bytes_read, memory_order_relaxed))
		e->came |= bit;
	if (x & UP_COUNT_EVER)
		e->came |= bit;
	else if (e->came & bit)
		want = x | UP_COUNT_EVER;
	if (entries == 0 && up__side_open(want) != 0)
		want = UP_COUNT_EVER;
	if (want == x)
		return false;
	/* [wait] sc: the progress store for sleepers waiting for end of stream
	 * or EPIPE, as up__side_leave(); pairs with [wait] sc in up__rd_ready()
	 * and up__wr_ready(). */
	return atomic_compare_exchange_strong_explicit(count, &x, want, memory_order_seq_cst,
						       memory_order_relaxed);
}

/* Returns the entries reaped, plus one if a count was put right. */
int up__peers_reap(struct up_end *e)
{
	struct up_pipe *p = e->p;
	uint32_t i, nrd = 0, nwr = 0;
	uint64_t sc = 0;
	int reaped = 0;
	bool fixed;
	/* [ends-gen] acq: the table as of this generation; pairs with
	 * [ends-gen] rel in up__end_claim(). */
	uint32_t gen = atomic_load_explicit(&p->ln->state.ends_gen, memory_order_acquire);
	bool closed = false;

	/* Drained before the locks are asked: a close after this look fires
	 * the next poll. */
	if (e->peer_ino) {
		uint32_t seq = up__closewatch_drain(e->peer_pidfds[e->npeer], &sc);

		closed = seq != e->cw_seen;
		e->cw_seen = seq;
	}
	for (i = 0; i < p->g.max_ends; i++) {
		/* [end-state] acq: the entry as its claim or free left it;
		 * pairs with [end-state] acq_rel in up__end_claim() and
		 * reap_entry() and [end-state] rel in up__end_free(). */
		uint32_t st = atomic_load_explicit(&p->ends[i].state, memory_order_acquire);
		uint32_t role = st & UP_END_ROLE_MASK;

		if (role == UP_END_FREE)
			continue;
		if (!up__live_own(p, i) && !up__live_check(p, i, &sc)) {
			if (reap_entry(p, i, st))
				reaped++;
			continue;
		}
		nrd += role == UP_END_READER;
		nwr += role == UP_END_WRITER;
	}
	up__count(&e->c.syscalls, sc);
	fixed = counts_repair(e, &p->ln->state.readers, nrd, UP_CAME_READERS, gen);
	fixed |= counts_repair(e, &p->ln->state.writers, nwr, UP_CAME_WRITERS, gen);
	if (reaped || fixed) {
		/* Both sides may be asleep on a condition the counts decide. */
		up__wake_all(e, &p->ln->rd_wait);
		up__wake_all(e, &p->ln->wr_wait);
	}
	e->live_ns = up__coarse_ns();
	/* A description closed and every lock is still held: the kernel
	 * reports the close before it drops the locks (closewatch.c). Look
	 * again one short slice from now, not a whole one. */
	if (closed && !reaped && !fixed)
		e->live_ns -= UP_WAIT_SLICE_NS - UP_CLOSE_RECHECK_NS;
	return reaped + fixed;
}

bool up__live_poll(struct up_end *e)
{
	if (up__coarse_ns() - e->live_ns < UP_LIVE_CHECK_NS)
		return false;
	return up__peers_reap(e) > 0;
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
	uint64_t sc = 0;
	bool dead;

	if ((st & UP_END_ROLE_MASK) == UP_END_FREE)
		return true;
	if (up__lock_id(st, idx) != owner)
		return true;
	if (up__live_own(p, idx))
		return false;
	dead = !up__live_check(p, idx, &sc);
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
	e->peer_ino = false;
}

void up__peers_forget(struct up_end *e)
{
	close_pidfds(e);
}

/*
 * Before sleeping: make sure e->peer_pidfds holds pidfds of the processes
 * whose death should wake us (entries of @role), and e->peers_blind counts
 * the peers no pidfd watches (another pid namespace, or no pidfds): only
 * the slice notices those. Rebuilt only when the endpoint table changed
 * since the last time, so a steady pipe pays nothing. Returns 1 when a peer
 * may be gone already (the caller reaps).
 */
int up__peers_watch(struct up_end *e, uint32_t role)
{
	struct up_pipe *p = e->p;
	/* [ends-gen] acq: the table as of this generation; pairs with
	 * [ends-gen] rel in up__end_claim(), up__end_free() and
	 * reap_entry(). */
	uint32_t gen = atomic_load_explicit(&p->ln->state.ends_gen, memory_order_acquire);
	pid_t seen[UP_MAX_PEER_FDS];
	uint64_t sc = 0;
	uint32_t i;
	int n = 0, j, gone = 0;

	if (e->peers_gen == gen + 1 && e->peers_role == role)
		/* A close another end drained since our last look. */
		return e->peer_ino && up__closewatch_seq() != e->cw_seen;
	close_pidfds(e);
	e->peers_blind = 0;
	for (i = 0; i < p->g.max_ends; i++) {
		/* [end-state] acq: as in up__peers_reap(); pairs with
		 * [end-state] acq_rel in up__end_claim() and reap_entry() and
		 * [end-state] rel in up__end_free(). */
		uint32_t st = atomic_load_explicit(&p->ends[i].state, memory_order_acquire);
		pid_t pid;
		int fd;

		if (role == UP_PEERS_ANY ? (st & UP_END_ROLE_MASK) == UP_END_FREE
					 : (st & UP_END_ROLE_MASK) != role)
			continue;
		if (up__live_own(p, i))
			continue;
		/* relaxed: hints for the wake only, as the header says. */
		pid = atomic_load_explicit(&p->ends[i].pid, memory_order_relaxed);
		if (pid <= 0 || e->pidns == 0 ||
		    atomic_load_explicit(&p->ends[i].pidns, memory_order_relaxed) != e->pidns ||
		    n == UP_MAX_PEER_FDS) {
			/* n bounds seen[] and, through it, the pidfds: pids
			 * whose pidfd_open failed count towards it too. */
			e->peers_blind++;
			continue;
		}
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
		else
			e->peers_blind++;
	}
	up__count(&e->c.syscalls, sc);
	/* +1 so that 0 means "never built". */
	e->peers_gen = gen + 1;
	e->peers_role = role;
	/* The pids were hints: the table changed, so ask every lock once. */
	return 1 | gone;
}

/*
 * Before a blocking sleep or a poll-mode arm, after up__peers_watch():
 * peers no pidfd watches, or pidfds this end's sleep cannot poll (the
 * futex backend; a fork child's end before its first sleep), are watched
 * through the close of their description of the memfd (closewatch.c), at
 * e->peer_pidfds[e->npeer]. Tried once per build of the list.
 */
void up__peers_closewatch(struct up_end *e)
{
	uint64_t sc = 0;
	int fd;

	if (e->peer_ino || e->cw_tried == e->peers_gen)
		return;
	e->cw_tried = e->peers_gen;
	if (!e->peers_blind && (e->npeer == 0 || e->waker->ops->polls_fds))
		return;
	fd = up__closewatch_fd(e->p, &sc);
	up__count(&e->c.syscalls, sc);
	if (fd < 0)
		return; /* the slice still bounds how late a death is seen */
	e->peer_pidfds[e->npeer] = fd;
	e->peer_ino = true;
	e->cw_seen = up__closewatch_seq();
	/* A peer that died before the watch existed closed unseen, and the
	 * list was built (and its locks asked) before: ask them once more
	 * now that every later close is seen. */
	up__peers_reap(e);
}

/*
 * How many of e->peer_pidfds a sleep passes to its backend: the pidfds,
 * then the process's inotify instance when there is one and closewatch.c's
 * thread does not serve it already (a backend that cannot poll fds gets it
 * last, to have the thread serve it).
 */
int up__peers_nfds(const struct up_end *e)
{
	return e->npeer + (e->peer_ino && (!e->waker->ops->polls_fds || !up__closewatch_served()));
}
