/* SPDX-License-Identifier: MIT */
/*
 * poll.c - poll mode: the sleep handshake with the sleeping left to the
 * caller's event loop (up_pollfd(), up_poll_arm(), uringpipe/uring.h).
 *
 * An armed end is announced on its line exactly as a sleeper in
 * up__wait_ready() is, and counted in the line's npoll too, so that wakers
 * wake every sleeper while it is armed (wake.c says why). It stays announced
 * until up__ring_disarm(), which every data call runs first.
 */
#include "bias.h"

/* Poll mode: a reader's arm is let go (a data call, or the next arm), or an
 * arm found data. If data is here, its wait ended now: learn, and settle
 * the plan. A catch is data found in the window by a look while not
 * announced (@quiet): data found on letting an announced arm go may have
 * cost its writer a wake. */
static void early_disarmed(struct up_end *e, bool quiet)
{
	uint64_t now;

	if (!e->early_polling || up__rd_ready(e) <= 0)
		return;
	e->early_polling = false;
	now = up__now_ns();
	if (e->early_until != 0 && now >= e->early_wake) {
		/* The timed end had not reached the loop before the data
		 * did (a first look in the window clears early_timed). */
		if (e->early_timed) {
			up__early_late_bound(e, now - e->early_wake, false);
			e->early_timed = false;
		}
		if (quiet)
			up__count(&e->c.early, 1);
		up__count(&e->c.early_spin_ns, now - e->early_wake);
		e->early_misses = 0;
		up__early_note(e, now, !quiet);
	} else {
		up__early_note(e, now, true);
	}
	e->early_until = 0;
}

/*
 * Announce @e as a sleeper on its line, but return instead of sleeping. With
 * @locks, a writer held up by another writer's lock waits for it
 * (up__wlock_poll_arm()); the caller must then watch every peer process and
 * cancel its wait before disarming. Returns 1 when progress is possible now
 * (nothing armed), 0 with *word and *expect to wait on, or -EPROTO.
 */
int up__ring_arm(struct up_end *e, bool locks, _Atomic uint32_t **word, uint32_t *expect)
{
	int (*ready)(struct up_end *) = (e->flags & UP_RD) ? up__rd_ready : up__wr_ready;
	struct up_shm_wait *wl = up__end_line(e);
	uint32_t s;
	int r;

	up__ring_disarm(e);
	r = ready(e);
	/* Pages to write into, but maybe another writer's lock in the way:
	 * wait for that instead of going round. Not when no reader is left
	 * (the retry gives -EPIPE); a reader leaving while we wait does not end
	 * the wait, as it does not wake a writer blocked on the lock either
	 * (nor the kernel's, on pipe->mutex): the holder's commit does.
	 * [wait] sc: the reader count as the handshake orders it; pairs with
	 * [wait] sc in up__side_leave(). */
	if (r > 0 && locks && (e->flags & UP_WR) &&
	    !up__side_gone(atomic_load_explicit(&e->p->ln->state.readers, memory_order_seq_cst)))
		return up__wlock_poll_arm(e, word, expect);
	if (r != 0)
		return r < 0 ? r : 1;
	/* [wait] sc: as in up__wait_ready(): seq, clear pending, count
	 * ourselves (npoll before nwait: a waker that counts us sees both),
	 * re-check; pairs with [wait] sc in up__wake_line_slow(). */
	s = atomic_load_explicit(&wl->seq, memory_order_seq_cst);
	atomic_store_explicit(&wl->pending, 0, memory_order_seq_cst);
	atomic_fetch_add_explicit(&wl->npoll, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&wl->nwait, 1, memory_order_seq_cst);
	/* A reader that cannot fence the lone writer's last len store
	 * (wait.c, up__wait_fence()) may not wait unbounded yet: nothing is
	 * armed, and the caller tries again (for at most UP_FENCE_GRACE_NS
	 * after it found that out). */
	r = up__wait_fence(e, wl) == UINT64_MAX ? ready(e) : 1;
	if (r != 0) {
		/* [wait] sc: undo the announcement; pairs with [wait] sc in
		 * up__wake_line(). */
		atomic_fetch_sub_explicit(&wl->nwait, 1, memory_order_seq_cst);
		atomic_fetch_sub_explicit(&wl->npoll, 1, memory_order_seq_cst);
		return r < 0 ? r : 1;
	}
	up__announce_mark(e, up__line_id(e, wl) | UP_ARMED_LINE_POLL);
	e->armed = UP_ARMED_EXTERNAL;
	*word = &wl->seq;
	*expect = s;
	up__count(&e->c.waits, 1);
	return 0;
}

/* up_poll_arm(): arm on this end's own poll ring, watching the peers. */
int up__ring_poll_arm(struct up_end *e)
{
	_Atomic uint32_t *word;
	uint64_t sc = 0;
	uint32_t s, role;
	int r, nfds;

	if (!e->waker->ops->arm)
		return -EOPNOTSUPP;
	/* Whatever this returns, a parked wait that completed is let go here,
	 * so that the fd does not stay readable (an arm that goes on may then
	 * take an intact one up). */
	if (e->parked)
		up__ring_parked_look(e);
	/* A reader of regular messages, unless it opted out (UP_NO_EARLY;
	 * up_open() sets UP_EARLY_POLL otherwise; early.c, the early wake): in
	 * its window the fd turns readable at once, with nothing announced,
	 * so that the writer makes no wake and the loop looks again; before
	 * it, the armed wait ends at the window. */
	e->waker->early_ns = 0;
	if ((e->flags & UP_EARLY_POLL) && up__early_arm(e, &e->waker->early_ns) == 1) {
		up__ring_disarm(e);
		r = up__rd_ready(e);
		if (r != 0) {
			if (r > 0)
				early_disarmed(e, true);
			return r < 0 ? r : 1;
		}
		e->parked = false; /* arm_now lets it go */
		r = e->waker->ops->arm_now(e->waker, &sc);
		up__count(&e->c.syscalls, sc);
		if (r < 0)
			return r;
		e->early_polling = true;
		e->armed = UP_ARMED_POLL;
		e->armed_on = UP_ARMED_ON_NONE;
		return 0;
	}
	/* Outside the handshake: may enter the kernel (pidfd_open). A writer
	 * may wait for readers (pages) or for another writer (its lock), so it
	 * watches every peer. */
	role = (e->flags & UP_RD) ? UP_END_WRITER : UP_PEERS_ANY;
	if (up__peers_watch(e, role))
		up__peers_reap(e);
	/* Both backends poll the pidfds in poll mode (the futex one in its
	 * helper's epoll), so only peers no pidfd covers need the close. */
	if (e->peers_blind)
		up__peers_closewatch(e);
	r = up__ring_arm(e, true, &word, &s);
	/* Data found by the arm's own look, outside any window (the window
	 * returned above): learnt from, never a catch. */
	if (r > 0 && (e->flags & UP_EARLY_POLL))
		early_disarmed(e, false);
	if (r != 0)
		return r;
	/* A peer that came (and so may be the lock's holder) since the list
	 * was made, or one already gone: look again. */
	if (up__peers_watch(e, role)) {
		up__ring_disarm(e);
		up__peers_reap(e);
		return 1;
	}
	/* Ticks also while a trim waits for a later look (reclaim.c). */
	e->waker->blind = up__peers_blind(e) || e->trim_due;
	/* Peers no pidfd covers are watched through the close of their
	 * descriptions: io_uring's poll ring polls the inotify instance as
	 * one more fd; on the futex backend closewatch.c's thread serves it
	 * and wakes the line this arm waits on (the helper's epoll holds
	 * pidfds only, one entry per fd number in the process). */
	nfds = up__peers_nfds(e);
	if (e->peer_ino && !e->waker->ops->polls_fds) {
		up__closewatch_serve(e->peer_pidfds[e->npeer]);
		nfds = e->npeer;
	}
	e->waker->on_line = e->armed_on == UP_ARMED_ON_LINE;
	e->waker->may_park = e->waker->on_line && (e->flags & UP_RD);
	e->parked = false; /* the arm takes it up or lets it go */
	r = e->waker->ops->arm(e->waker, word, s, e->peer_pidfds, nfds, &sc);
	e->waker->early_ns = 0;
	up__count(&e->c.syscalls, sc);
	if (r < 0) {
		up__ring_disarm(e);
		return r;
	}
	e->armed = UP_ARMED_POLL;
	/* A reader that waits in its event loop: as a sleep, its next read
	 * hands a freed page off (pagepool.c), and the wait's end is timed
	 * (early.c, the early wake). */
	if (e->flags & UP_RD) {
		e->hand_off = true;
		e->early_polling = (e->flags & UP_EARLY_POLL) != 0;
	}
	return 0;
}

/*
 * Let an arm go: no longer announced. Our poll ring's backend may keep the
 * wait in the kernel, parked (its disarm returns 2): the end is then not
 * armed but parked, and a call about to return -EAGAIN asks the backend
 * again (up__ring_parked_look()), which lets the parked wait go once
 * something of it completed, so that the fd does not stay readable for a
 * loop that reads until -EAGAIN; so does every up_poll_arm(), which may
 * also take it up (no submission). Only readers park (waker.may_park).
 */
void up__ring_parked_look(struct up_end *e)
{
	uint64_t sc = 0;
	int peer;

	peer = e->waker->ops->disarm(e->waker, &sc);
	up__count(&e->c.syscalls, sc);
	if (peer == 2)
		return;
	e->parked = false;
	if (peer == 1)
		up__peers_reap(e);
}

void up__ring_disarm(struct up_end *e)
{
	uint64_t sc = 0;
	int peer = 0, arm_on;

	if (!e->armed)
		return;
	if (e->armed == UP_ARMED_POLL) {
		peer = e->waker->ops->disarm(e->waker, &sc);
		e->parked = peer == 2;
	}
	e->armed = UP_ARMED_NONE;
	up__announce_mark(e, UP_ARMED_LINE_NONE);
	arm_on = e->armed_on;
	e->armed_on = UP_ARMED_ON_LINE;
	if (arm_on == UP_ARMED_ON_WORD) {
		/* [lock-poll] sc: no longer a poller; pairs with [lock-poll] sc
		 * in up__lock_wake(). */
		atomic_fetch_sub_explicit(&e->p->ln->wlock.npoll, 1, memory_order_seq_cst);
	} else if (arm_on == UP_ARMED_ON_LINE) {
		/* [wait] sc: no longer announced; pairs with [wait] sc in
		 * up__wake_line(). */
		atomic_fetch_sub_explicit(&up__end_line(e)->nwait, 1, memory_order_seq_cst);
		atomic_fetch_sub_explicit(&up__end_line(e)->npoll, 1, memory_order_seq_cst);
	}
	up__count(&e->c.syscalls, sc);
	if (peer == 1)
		up__peers_reap(e);
	if (e->flags & UP_EARLY_POLL)
		early_disarmed(e, arm_on == UP_ARMED_ON_NONE);
}
