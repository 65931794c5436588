/* SPDX-License-Identifier: MIT */
/*
 * poll_ring.c - poll mode (up_pollfd/up_poll_arm): an fd for epoll, poll or
 * libuv that turns readable when an armed wait would have ended.
 *
 * The fd is the ring fd of a ring of the end's own (pring), made at the
 * end's first up_pollfd(), which only ever carries the armed FUTEX_WAIT,
 * its pidfd polls, the blind tick and their cancel. A ring fd polls
 * readable (POLLIN) while its CQ holds a completion, so no eventfd is
 * needed: one fd per end in poll mode, none before. What must stay true:
 * the CQ is empty whenever the end is neither armed nor parked (disarm
 * reaps everything, its cancel included, and arm drops any leftover
 * first), or the fd would stay readable and the event loop spin; what a
 * parked wait (a reader's only) posts is reaped by the end's next call that
 * finds nothing or its next up_poll_arm() (up__uw_disarm() again). It also
 * polls writable (POLLOUT) whenever its SQ has room, which means nothing
 * here: loops wait for POLLIN.
 * Kept apart from the thread's ring, no completion of one mode is mistaken
 * for the other's, and an event loop thread's sleeps do not touch it.
 * Arming does not sleep; the caller has announced itself on the wait line
 * as for a wait (wake.h). This ring is driven through liburing
 * (io_uring_submit(), io_uring_peek_cqe(), io_uring_cqe_seen()), whose
 * barriers pair with the kernel's; there are no atomics of ours here.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <liburing.h>

#include "up_int.h"

#include "uring_int.h"

/*
 * Pokes. A FUTEX_WAKE completes an armed FUTEX_WAIT as task work of the
 * thread that armed it. When that thread sleeps in epoll_wait() on the
 * ring fd, the task work interrupts the sleep (-EINTR), runs on the way
 * out, and only the loop's next epoll_wait() finds the fd readable. A
 * waker in this process can do better: an IORING_OP_MSG_RING into the poll
 * ring posts a CQE there from the waker's own call, which makes the fd
 * readable at once, so the loop's first epoll_wait() returns it.
 *
 * So an armed poll ring registers (word, ring fd) in this table, and a wake
 * of that word from a thread ring of this process queues one MSG_RING per
 * registered ring before its FUTEX_WAKE, in the same submission. The
 * FUTEX_WAKE goes out unless the pokes reached every announced sleeper of
 * the line (up__wake_covered()): it is what every other waiter (another
 * process, a blocking sleeper) needs; without it, the poked ring's wait
 * stays queued and its disarm parks it (up__uw_disarm()). What must stay
 * true:
 *  - the waker holds poke_mu from reading an entry until the submission
 *    that names its fd has returned, and the poll ring leaves the table
 *    under poke_mu before its last reap and before its fd is closed: the
 *    kernel resolves the fd during the submission (MSG_RING into a ring
 *    that is neither IOPOLL nor DEFER_TASKRUN posts inline), so a poke
 *    never reaches a reused fd number or a disarmed ring's CQ;
 *  - an entry is poked once per arm (poked), so a writer that keeps
 *    waking a reader that does not run cannot fill its CQ;
 *  - the waker only tries the lock: a wake never waits for a registration,
 *    and a signal handler's wake on a thread that holds it cannot deadlock.
 *    A wake that finds the lock busy is a FUTEX_WAKE alone, of every bit
 *    when an end is in poll mode (wake.h, up__wake_bits()).
 * Only ends on the same mapping of the segment share a word's address;
 * others (another attach of the memfd, another process) are not found and
 * keep the FUTEX_WAKE alone. The table is this process's: a forked child
 * empties it (poke_atfork_child()).
 */
#define UW_POKE_MAX 32

struct uw_poke {
	_Atomic uint32_t *word; /* NULL: a free entry */
	int fd;
	bool poked;
	/* Until when its wait would be parked by a disarm and taken up by the
	 * next arm (CLOCK_MONOTONIC ns; 0: never). Only such an entry counts
	 * as found (up__uw_poke_begin()): for another, the FUTEX_WAKE still
	 * goes out and ends its wait, which its disarm would otherwise have
	 * to cancel. */
	uint64_t park_until;
};

static pthread_mutex_t poke_mu = PTHREAD_MUTEX_INITIALIZER;
static struct uw_poke pokes[UW_POKE_MAX];
/* Entries in use: lets a wake skip the lock when there are none. Written
 * under poke_mu only. */
static _Atomic unsigned poke_used;

static pthread_once_t poke_once = PTHREAD_ONCE_INIT;

/*
 * A forked child starts with a copy of the table and of poke_mu, which a
 * thread of the parent may have held: it makes both afresh before any
 * thread of its own can look. Nothing takes poke_mu across the fork, so a
 * fork never stalls an arm, a disarm or a wake. fork.c's child handler runs
 * before this one and destroys the parent's wakers; their rings were
 * registered under an earlier up__live_gen() (bumped first thing in that
 * handler), so poke_del() leaves the table alone for them.
 */
static void poke_atfork_child(void)
{
	pthread_mutex_init(&poke_mu, NULL);
	memset(pokes, 0, sizeof(pokes));
	/* relaxed: the child is single-threaded here. */
	atomic_store_explicit(&poke_used, 0, memory_order_relaxed);
}

static void poke_install(void)
{
	pthread_atfork(NULL, NULL, poke_atfork_child);
}

static void poke_add(struct uring_waker *uw, _Atomic uint32_t *word)
{
	int i;

	pthread_once(&poke_once, poke_install);
	pthread_mutex_lock(&poke_mu);
	for (i = 0; i < UW_POKE_MAX && pokes[i].word; i++)
		;
	if (i < UW_POKE_MAX) {
		pokes[i].word = word;
		pokes[i].fd = uw->pring->ring_fd;
		pokes[i].poked = false;
		pokes[i].park_until = uw->pparkable ? uw->parm_ns + UW_PARK_NS : 0;
		uw->poke_slot = i;
		uw->poke_gen = up__live_gen();
		/* relaxed: a hint; the entry itself is read under poke_mu. */
		atomic_fetch_add_explicit(&poke_used, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&poke_mu);
}

static void poke_del(struct uring_waker *uw)
{
	if (uw->poke_slot < 0)
		return;
	if (uw->poke_gen != up__live_gen()) {
		/* Registered in the parent: this child's table never had it. */
		uw->poke_slot = -1;
		return;
	}
	pthread_mutex_lock(&poke_mu);
	pokes[uw->poke_slot].word = NULL;
	/* relaxed: a hint, as in poke_add(). */
	atomic_fetch_sub_explicit(&poke_used, 1, memory_order_relaxed);
	pthread_mutex_unlock(&poke_mu);
	uw->poke_slot = -1;
}

int up__uw_poke_begin(struct io_uring *ring, _Atomic uint32_t *word, uint32_t nr,
		      const struct up_shm_wait *line, uint32_t *bits)
{
	unsigned room;
	uint32_t found = 0;
	uint64_t now = 0;
	int i, n = 0;

	/* relaxed: a hint; a registration it misses was made after this
	 * wake's progress store, and that arm's FUTEX_WAIT compares the word
	 * (or the FUTEX_WAKE finds it: its end is not among those found, so
	 * the wake is for every bit). */
	if (atomic_load_explicit(&poke_used, memory_order_relaxed) == 0 ||
	    pthread_mutex_trylock(&poke_mu) != 0) {
		*bits = line ? up__wake_bits(line, 0) : UP_FUTEX_BITS_ANY;
		return 0;
	}
	room = io_uring_sq_space_left(ring);
	for (i = 0; i < UW_POKE_MAX; i++) {
		struct io_uring_sqe *sqe;
		bool counts;

		if (pokes[i].word != word)
			continue;
		if (pokes[i].park_until != 0 && now == 0)
			now = up__now_ns();
		counts = pokes[i].park_until > now;
		if (pokes[i].poked) {
			found += counts; /* its CQE is there since an earlier wake */
			continue;
		}
		if ((uint32_t)n >= nr || (unsigned)n + 1 >= room)
			continue;
		sqe = io_uring_get_sqe(ring);
		if (!sqe)
			continue;
		io_uring_prep_msg_ring(sqe, pokes[i].fd, 0, UW_TAG(0, UW_POKE), 0);
		/* Its CQE in our ring only if it failed; up__uw_cq_reap()
		 * notes it (poke_err) and the waker wakes every bit.
		 * The entry's index, for up__uw_poke_end(). */
		sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
		sqe->user_data = UW_TAG(i, UW_POKE);
		pokes[i].poked = true;
		found += counts;
		n++;
	}
	/* Under the lock: no end found can leave its line meanwhile (its
	 * disarm takes the lock first), so found <= npoll <= nwait. */
	if (!line)
		*bits = UP_FUTEX_BITS_ANY;
	else if (up__wake_covered(line, found))
		*bits = 0;
	else
		*bits = up__wake_bits(line, found);
	if (n == 0)
		pthread_mutex_unlock(&poke_mu);
	return n;
}

/*
 * After the enter that carried the pokes (or instead of it): SQEs the
 * kernel has not consumed must not go out with a later enter, after the
 * lock. Pokes among them become NOPs that post nothing, and their entries
 * may be poked again. Drops the lock. Returns how many SQEs of @ring are
 * still unconsumed: the FUTEX_WAKE behind the pokes is one of them then.
 */
unsigned up__uw_poke_end(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;
	/* [u-sq-head] acq: the kernel is done reading the SQEs below head;
	 * pairs with the kernel's smp_store_release of the SQ head
	 * (io_commit_sqring()). */
	unsigned head = atomic_load_explicit((_Atomic unsigned *)sq->khead, memory_order_acquire);
	unsigned left = sq->sqe_tail - head;

	for (; head != sq->sqe_tail; head++) {
		struct io_uring_sqe *sqe = &sq->sqes[head & sq->ring_mask];
		uint64_t ud = sqe->user_data;

		if ((ud & 0xff) != UW_POKE)
			continue;
		if ((ud >> 8) < UW_POKE_MAX)
			pokes[ud >> 8].poked = false;
		io_uring_prep_nop(sqe);
		sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
		sqe->user_data = UW_TAG(0, UW_POKE);
	}
	pthread_mutex_unlock(&poke_mu);
	return left;
}

/* The ops' pollfd: make the poll ring once; returns its fd. */
int up__uw_pollfd(struct up__waker *w, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	__u32 features;
	int r;

	if (uw->pring)
		return uw->pring->ring_fd;
	uw->pring = up__calloc(1, sizeof(*uw->pring));
	if (!uw->pring)
		return -ENOMEM;
	*syscalls += 1;
	r = up__uw_ring_init(uw->pring, 0, -1, &features);
	if (r < 0) {
		up__free(uw->pring);
		uw->pring = NULL;
		return r;
	}
	return uw->pring->ring_fd;
}

/* Reap what the poll ring has; note whether a peer's pidfd fired. */
static void pring_reap(struct uring_waker *uw, int *peer)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(uw->pring, &cqe) == 0) {
		if ((cqe->user_data & 0xff) == UW_POLL && cqe->res > 0)
			*peer = 1;
		/* A tick: some peer may have died unseen; the caller looks.
		 * A linked timeout that fires reports what its cancel of the
		 * wait returned (-ETIME, or a count on some kernels); one that
		 * the wait's end disarmed reports -ECANCELED. */
		if ((cqe->user_data & 0xff) == UW_TICK && cqe->res != -ECANCELED)
			*peer = 1;
		/* A poke (see the top) is no armed request of ours. */
		if ((cqe->user_data & 0xff) != UW_CANCEL && (cqe->user_data & 0xff) != UW_POKE &&
		    uw->pinflight)
			uw->pinflight--;
		io_uring_cqe_seen(uw->pring, cqe);
	}
}

/* Cancel what is still in flight of the latest arm and reap it all, which
 * leaves the fd unreadable. */
static void pring_cancel(struct uring_waker *uw, int *peer, uint64_t *syscalls)
{
	struct io_uring_sqe *sqe;
	int rounds;

	uw->pparked = false;
	if (!uw->pinflight)
		return;
	/* Whatever is still armed goes; each posts -ECANCELED. */
	sqe = io_uring_get_sqe(uw->pring);
	if (sqe) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
		sqe->user_data = UW_TAG(0, UW_CANCEL);
		io_uring_submit(uw->pring);
		*syscalls += 1;
	}
	/* Bounded: a cancel completes the requests at once. */
	for (rounds = 0; uw->pinflight && rounds < 100; rounds++) {
		struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = 10000000 };
		struct io_uring_cqe *cqe;

		*syscalls += 1;
		if (io_uring_wait_cqe_timeout(uw->pring, &cqe, &ts) == 0)
			pring_reap(uw, peer);
	}
	/* The cancel's own CQE was posted when it was submitted; reap it
	 * (and anything else left) so that the fd is not readable. */
	pring_reap(uw, peer);
}

/* This thread, for a parked wait's submitter (its completion is the
 * submitter's task work). */
static __thread char pring_self;

/*
 * The ops' disarm. A wait that a poke ended (poll_ring.c's top) is still in
 * the futex's queue: cancelling it would be a system call between the wake
 * and the data. Instead, when nothing of the arm has completed, it is
 * parked (returns 2): left in the kernel, out of the poke table, announced
 * nowhere, for the next arm to take up. What must stay true: a parked wait
 * is on a line, with UP_FUTEX_BIT_POLL, so that a wake for one sleeper
 * never ends it (wake.h); it is taken up only by the thread that submitted
 * it, and only while the word holds what the arm expects
 * (pring_take_parked()); and once anything of it completes, the next
 * disarm cancels the rest and reaps, so the fd is readable at most until
 * the end's next call that finds nothing (tests/model/wake.pml, POLLER).
 * Returns 1 when a peer's pidfd fired, 0, 2 (parked), or -errno.
 */
int up__uw_disarm(struct up__waker *w, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	int peer = 0;

	if (uw->pparked) {
		pring_reap(uw, &peer);
		if (uw->pinflight == uw->pnreq)
			return 2;
		pring_cancel(uw, &peer, syscalls);
		return peer;
	}
	if (!uw->parmed)
		return 0;
	uw->parmed = 0;
	/* Out of the table before the last reap: no poke comes after it. */
	poke_del(uw);
	pring_reap(uw, &peer);
	if (uw->pparkable && uw->pinflight == uw->pnreq) {
		uw->pparked = true;
		return 2;
	}
	pring_cancel(uw, &peer, syscalls);
	return peer;
}

/* The start of an arm: the poll ring made, what an earlier arm left
 * disarmed and reaped (nothing of it may keep the fd readable), a new
 * generation, and its first SQE in *@sqe. 0 or -errno. */
static int pring_begin(struct up__waker *w, uint64_t *syscalls, struct io_uring_sqe **sqe)
{
	struct uring_waker *uw = to_uw(w);
	int stale = 0;

	if (!uw->pring)
		return -EINVAL;
	if (uw->parmed)
		up__uw_disarm(w, syscalls);
	pring_cancel(uw, &stale, syscalls);
	uw->pinflight = 0;
	uw->pparkable = false;
	pring_reap(uw, &stale);
	uw->pgen++;
	*sqe = io_uring_get_sqe(uw->pring);
	return *sqe ? 0 : -EBUSY;
}

/* Take up a parked wait as this arm's: it waits on @word, which still
 * holds @expect, nothing of it has completed, this thread submitted it,
 * and this arm would submit the same (no pidfd, no early wake), but for its
 * tick, which runs from the first arm: it is taken up only in the first
 * UW_PARK_NS of it, so that the tick still ends only a wait of most of a
 * slice (an arm of a wait that lasts less never turns readable without a
 * cause). A completion that comes after this look makes the fd readable,
 * as for any arm. */
static bool pring_take_parked(struct uring_waker *uw, _Atomic uint32_t *word, uint32_t expect,
			      int npeer)
{
	int peer = 0;

	if (!uw->pparked || uw->pword != word || uw->pthread != &pring_self || npeer != 0 ||
	    uw->base.early_ns != 0 || !uw->base.may_park ||
	    up__now_ns() - uw->parm_ns > UW_PARK_NS)
		return false;
	/* A queued wait compares nothing: compare for it, as a FUTEX_WAIT
	 * would at its submission. A waker that bumped seq since the arm
	 * loaded @expect may have found this end not yet announced and woken
	 * nobody, its wake pending for us to see; a fresh FUTEX_WAIT sees it
	 * (-EAGAIN), a taken-up one would sleep through it
	 * (tests/model/wake.pml, PMUTANT 4). One that bumps it after this
	 * load finds the end announced, and so pokes it or wakes every bit.
	 * [wait] sc: after the announcement; pairs with [wait] sc in
	 * up__wake_line_slow(). */
	if (atomic_load_explicit(word, memory_order_seq_cst) != expect)
		return false;
	pring_reap(uw, &peer);
	if (uw->pinflight != uw->pnreq)
		return false;
	uw->pparked = false;
	uw->parmed = 1;
	return true;
}

/* Submit an arm's SQEs; armed once they are in. 0 or -errno. */
static int pring_submit(struct uring_waker *uw, uint64_t *syscalls)
{
	int r;

	*syscalls += 1;
	r = io_uring_submit(uw->pring);
	if (r < 0) {
		uw->pinflight = 0;
		return r;
	}
	uw->parmed = 1;
	return 0;
}

/* The ops' arm: queue a FUTEX_WAIT on @word and a poll per peer pidfd,
 * after disarming what an earlier arm left. */
int up__uw_arm(struct up__waker *w, _Atomic uint32_t *word, uint32_t expect,
	       const int *peer_pidfds, int npeer, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	struct io_uring_sqe *sqe;
	uint64_t gen;
	bool tick;
	int i, r;

	if (pring_take_parked(uw, word, expect, npeer)) {
		poke_add(uw, word);
		return 0;
	}
	r = pring_begin(w, syscalls, &sqe);
	if (r < 0)
		return r;
	gen = uw->pgen;
	tick = w->blind || npeer == 0 || npeer > UW_SQ_ENTRIES - 3 || w->early_ns != 0;
	if (npeer > UW_SQ_ENTRIES - 3)
		npeer = UW_SQ_ENTRIES - 3; /* the tick covers the rest */
	uw_prep_futex(sqe, UP__IORING_OP_FUTEX_WAIT, word, expect, UW_TAG(gen, UW_FUTEX));
	/* A wait on a line may be parked (up__uw_disarm()): no wake for one
	 * may end it (wake.h). */
	if (w->on_line)
		sqe->addr3 = UP_FUTEX_BIT_POLL;
	uw->pinflight = 1;
	/* A peer no pidfd covers (another pid namespace, or one that comes
	 * after this arm): the fd turns readable when a slice has passed, so
	 * that the next call asks the peers' locks (the kernel copies the
	 * timespec at submission). The tick is a timeout linked to the wait,
	 * not a request of its own: a wake ends both in one completion run,
	 * so the disarm after a wake has nothing left to cancel and enters
	 * no kernel. It must come right after the wait to be linked to it. */
	if (tick) {
		/* A planned early wake (early.c) is shorter than a slice and
		 * stands for the tick: a peer that died sends nothing, so the
		 * plan misses and the next arm ticks again. */
		bool early = w->early_ns != 0 && w->early_ns < UW_TICK_NS;
		uint64_t ns = early ? w->early_ns : UW_TICK_NS;
		struct __kernel_timespec ts = { .tv_sec = (long long)(ns / 1000000000u),
						.tv_nsec = (long long)(ns % 1000000000u) };
		struct io_uring_sqe *lt = io_uring_get_sqe(uw->pring);

		if (lt) {
			sqe->flags |= IOSQE_IO_LINK;
			io_uring_prep_link_timeout(lt, &ts, 0);
			lt->user_data = UW_TAG(gen, early ? UW_EARLY : UW_TICK);
			uw->pinflight++;
		}
	}
	for (i = 0; i < npeer; i++) {
		sqe = io_uring_get_sqe(uw->pring);
		if (!sqe)
			break;
		io_uring_prep_poll_add(sqe, peer_pidfds[i], POLLIN);
		sqe->user_data = UW_TAG(gen, UW_POLL);
		uw->pinflight++;
	}
	r = pring_submit(uw, syscalls);
	if (r < 0)
		return r;
	uw->pnreq = uw->pinflight;
	uw->parm_ns = up__now_ns();
	uw->pword = word;
	uw->pthread = &pring_self;
	uw->pparkable = w->may_park && npeer == 0 && !(tick && w->early_ns != 0);
	poke_add(uw, word);
	return 0;
}

/* The ops' arm_now: the fd readable at once with nothing waited on, for a
 * caller that polls its event loop through a planned early window
 * (poll.c). A NOP posts its completion within the submitting call. */
int up__uw_arm_now(struct up__waker *w, uint64_t *syscalls)
{
	struct uring_waker *uw = to_uw(w);
	struct io_uring_sqe *sqe;
	int r;

	r = pring_begin(w, syscalls, &sqe);
	if (r < 0)
		return r;
	io_uring_prep_nop(sqe);
	sqe->user_data = UW_TAG(uw->pgen, UW_NOW);
	uw->pinflight = 1;
	return pring_submit(uw, syscalls);
}

/* Tear the poll ring down, if there is one; that cancels anything armed. */
void up__uw_pring_exit(struct uring_waker *uw)
{
	if (!uw->pring)
		return;
	poke_del(uw); /* before the fd closes (see the top) */
	io_uring_queue_exit(uw->pring);
	up__free(uw->pring);
	uw->pring = NULL;
}
