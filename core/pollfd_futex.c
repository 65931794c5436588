/* SPDX-License-Identifier: MIT */
/*
 * pollfd_futex.c - poll mode without io_uring: helper threads that wait on
 * the futex words of armed ends with futex_waitv(2) and write each end's
 * eventfd when its wait would have ended. The peers' pidfds of an armed end
 * are the pidfd watcher's (pidwatch.c), which writes the same eventfd when
 * a peer process dies.
 *
 * An armed end (poll.c) is announced on its wait line exactly as for the io_uring
 * poll ring; what that ring's FUTEX_WAIT does, a helper does here: it waits
 * for the word to differ from the value the end read before announcing,
 * or for a wake on it. What must stay true:
 *
 *  - A helper queues on a word only with the value of a pending end that read
 *    it (an end whose value differs is fired first), so the kernel's compare
 *    in futex_waitv(2) and the waker's wake, which the end's npoll count makes
 *    a wake of all, end its wait as they end a FUTEX_WAIT: no wake is lost.
 *  - A word is in a helper's vector only while an end is pending on it. A
 *    helper left queued on a word after its last end disarmed would be one
 *    more sleeper to the kernel, and could take a wake for one that was
 *    meant for a blocked reader or writer once npoll is back to 0. So a
 *    disarm that takes the last pending end off a word the helper waits on
 *    kicks the helper and waits until it has left that wait (disarm()); npoll
 *    is decremented only after that (poll.c).
 *  - The eventfd is written under the registry lock, and an end unregisters
 *    under it before its fds close, so a helper never writes a closed or
 *    reused fd.
 *  - A blind end (no pidfd covers every peer) is fired every
 *    UP_WAIT_SLICE_NS while armed; its disarm then returns 1, so its next
 *    call looks for dead peers as a sleeper does after a slice.
 *
 * Several ends on one word share one vector entry. A helper holds up to
 * PF_WORDS words (futex_waitv's 128, less its own kick word); beyond that
 * another helper thread is made, up to PF_HELPERS of them. Helpers are made
 * at the first arm that needs one, never when nobody polls, and then stay,
 * asleep on their kick word, costing nothing. A forked child has none: its
 * copy of the registry is emptied by the child's atfork handler, and its first
 * arm makes a helper of its own.
 *
 * The fd returned by up_pollfd() is the end's eventfd, its one fd. Nothing
 * runs while idle.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"
#include "pollfd_futex.h"
#include "thread.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#define PF_FUTEX2_SIZE_U32 0x02u
#define PF_FUTEX2_PRIVATE  128u /* FUTEX_PRIVATE_FLAG */
#define PF_WAITV_MAX       128  /* the kernel's FUTEX_WAITV_MAX */
#define PF_WORDS           (PF_WAITV_MAX - 1)
#define PF_HELPERS         32
#define PF_ERR_BACKOFF_NS  1000000ull
#define PF_TICK_GRID       (UP_WAIT_SLICE_NS / 2)

enum { PF_IDLE, PF_PENDING, PF_FIRED };
/* What fired an end: its word, a tick (look for dead peers), an error,
 * or its planned early wake. */
enum { PF_WHY_WORD, PF_WHY_TICK, PF_WHY_ERR, PF_WHY_EARLY };

/* One word some armed ends wait on: one entry of a helper's vector. */
struct pf_watch {
	_Atomic uint32_t *word; /* NULL: a free slot */
	struct up__pf_end *ends; /* pending on it */
	uint32_t val;            /* the value queued with, while active */
	bool active;             /* in the vector the helper waits on now */
};

struct up__pf_helper {
	_Atomic uint32_t kick; /* private futex word: the registry changed */
	uint64_t round;        /* returns from futex_waitv, under the lock */
	uint64_t timeout_at;   /* the current wait's deadline, 0: none */
	int nwatch;            /* slots in use */
	struct pf_watch w[PF_WORDS];
	struct futex_waitv v[PF_WAITV_MAX];
	int vw[PF_WAITV_MAX];  /* the watch of each vector entry (0: kick) */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* a helper's round advanced */
	uint32_t gen;        /* bumped in a forked child: older registrations are void */
	int nhelper;
	struct up__pf_helper *h[PF_HELPERS];
} reg = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .gen = 1 };

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&reg.mu);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&reg.mu);
}

/* The child has no helper thread: forget them all. The child's copies of
 * the parent's armed ends are void by generation (their wakers are replaced
 * by fork.c, and a copy's fini only closes its fds). */
static void atfork_child(void)
{
	int i;

	for (i = 0; i < reg.nhelper; i++)
		up__free(reg.h[i]);
	reg.nhelper = 0;
	reg.gen++;
	pthread_cond_init(&reg.cv, NULL);
	pthread_mutex_unlock(&reg.mu);
}

static void atfork_install(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void kick(struct up__pf_helper *h)
{
	/* relaxed: the registry lock orders what changed; the kernel compares
	 * the word in the helper's futex_waitv(). */
	atomic_fetch_add_explicit(&h->kick, 1, memory_order_relaxed);
	syscall(SYS_futex, (uint32_t *)&h->kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void unlink_end(struct up__pf_end *pe)
{
	struct pf_watch *w = &pe->h->w[pe->wi];

	if (pe->prev)
		pe->prev->next = pe->next;
	else
		w->ends = pe->next;
	if (pe->next)
		pe->next->prev = pe->prev;
	pe->next = pe->prev = NULL;
}

/* Under the lock: the end's wait is over; make its fd readable. */
static void fire(struct up__pf_end *pe, int why)
{
	uint64_t one = 1;

	unlink_end(pe);
	pe->state = PF_FIRED;
	pe->why = why;
	/* Cannot fail short of a counter at 2^64 - 1: the disarm reads it. */
	(void)!write(pe->efd, &one, sizeof(one));
}

/* Under the lock, after a return from futex_waitv (or before the first
 * wait): fire what is due, then fill the vector with the words that still
 * have pending ends, each with their value. Returns the vector's length. */
static int build(struct up__pf_helper *h, uint64_t now)
{
	int i, n = 1;

	h->timeout_at = 0;
	h->v[0].uaddr = (uint64_t)(uintptr_t)&h->kick;
	/* relaxed: the kernel compares it; a kick after this load changes it. */
	h->v[0].val = atomic_load_explicit(&h->kick, memory_order_relaxed);
	h->v[0].flags = PF_FUTEX2_SIZE_U32 | PF_FUTEX2_PRIVATE;
	h->v[0].__reserved = 0;
	for (i = 0; i < PF_WORDS; i++) {
		struct pf_watch *w = &h->w[i];
		struct up__pf_end *pe, *next;
		uint32_t cur;

		w->active = false;
		if (!w->word)
			continue;
		/* relaxed: the value to queue with; the kernel compares it
		 * again under its lock, and the end re-checks readiness. A
		 * pending end lives, so its word is mapped. */
		cur = w->ends ? atomic_load_explicit(w->word, memory_order_relaxed) : 0;
		for (pe = w->ends; pe; pe = next) {
			uint64_t due = pe->tick ? pe->tick_at : 0;

			next = pe->next;
			if (pe->early_at && (!due || pe->early_at < due))
				due = pe->early_at;
			if (pe->expect != cur)
				fire(pe, PF_WHY_WORD);
			else if (pe->tick && pe->tick_at <= now)
				fire(pe, PF_WHY_TICK);
			else if (pe->early_at && pe->early_at <= now)
				fire(pe, PF_WHY_EARLY);
			else if (due && (!h->timeout_at || due < h->timeout_at))
				h->timeout_at = due;
		}
		if (!w->ends) {
			w->word = NULL;
			h->nwatch--;
			continue;
		}
		w->active = true;
		w->val = cur;
		h->v[n].uaddr = (uint64_t)(uintptr_t)w->word;
		h->v[n].val = cur;
		h->v[n].flags = PF_FUTEX2_SIZE_U32;
		h->v[n].__reserved = 0;
		h->vw[n] = i;
		n++;
	}
	return n;
}

static void fire_all(struct up__pf_helper *h, int why)
{
	int i;

	for (i = 0; i < PF_WORDS; i++)
		while (h->w[i].ends)
			fire(h->w[i].ends, why);
}

static void *helper_main(void *arg)
{
	struct up__pf_helper *h = arg;
	struct timespec ts;
	long r;
	int n;

	/* An early wake is timed by this thread's wait: with the default
	 * slack of 50 us it would end up to that much late. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	pthread_mutex_lock(&reg.mu);
	for (;;) {
		uint64_t at;

		n = build(h, up__now_ns());
		at = h->timeout_at;
		pthread_cond_broadcast(&reg.cv);
		pthread_mutex_unlock(&reg.mu);
		if (at) {
			ts.tv_sec = (time_t)(at / 1000000000ull);
			ts.tv_nsec = (long)(at % 1000000000ull);
		}
		r = syscall(SYS_futex_waitv, h->v, (unsigned int)n, 0u, at ? &ts : NULL,
			    CLOCK_MONOTONIC);
		if (r < 0 && errno != EAGAIN && errno != ETIMEDOUT && errno != EINTR) {
			/* Not ours to fix (ENOMEM, or a word gone bad): let every
			 * end try again, and do not spin. */
			struct timespec b = { 0, (long)PF_ERR_BACKOFF_NS };

			pthread_mutex_lock(&reg.mu);
			fire_all(h, PF_WHY_ERR);
			pthread_mutex_unlock(&reg.mu);
			nanosleep(&b, NULL);
		}
		pthread_mutex_lock(&reg.mu);
		h->round++;
		/* Woken on a word: every end pending on it, whatever its value
		 * is now (a lock word may be back where it was). */
		if (r > 0 && r < n) {
			struct pf_watch *w = &h->w[h->vw[r]];

			while (w->ends)
				fire(w->ends, PF_WHY_WORD);
		}
	}
	return NULL;
}

/* Under the lock: a new helper and its thread, or NULL. */
static struct up__pf_helper *helper_new(void)
{
	struct up__pf_helper *h;

	if (reg.nhelper == PF_HELPERS)
		return NULL;
	h = up__calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	pthread_once(&atfork_once, atfork_install);
	if (up__thread_start(NULL, UP_THREAD_SMALL_STACK, helper_main, h, "uringpipe-poll") != 0) {
		up__free(h);
		return NULL;
	}
	reg.h[reg.nhelper++] = h;
	return h;
}

/* Under the lock: the helper and slot watching @word, made if need be. */
static int watch_find(_Atomic uint32_t *word, struct up__pf_helper **hp, int *wip)
{
	struct up__pf_helper *h;
	int i, j, free_i = -1, free_j = -1;

	for (i = 0; i < reg.nhelper; i++) {
		h = reg.h[i];
		for (j = 0; j < PF_WORDS; j++) {
			if (h->w[j].word == word) {
				*hp = h;
				*wip = j;
				return 0;
			}
			if (free_i < 0 && !h->w[j].word && !h->w[j].active) {
				free_i = i;
				free_j = j;
			}
		}
	}
	if (free_i >= 0) {
		h = reg.h[free_i];
	} else {
		h = helper_new();
		if (!h)
			return reg.nhelper == PF_HELPERS ? -EMFILE : -ENOMEM;
		free_j = 0;
	}
	h->w[free_j].word = word;
	h->w[free_j].ends = NULL;
	h->nwatch++;
	*hp = h;
	*wip = free_j;
	return 0;
}

void up__pf_init(struct up__pf_end *pe)
{
	memset(pe, 0, sizeof(*pe));
	pe->efd = -1;
	pe->state = PF_IDLE;
}

/* futex_waitv(2) is there: EINVAL for an empty vector; ENOSYS (before Linux
 * 5.16) or a seccomp refusal otherwise. */
static bool have_waitv(uint64_t *syscalls)
{
	*syscalls += 1;
	return syscall(SYS_futex_waitv, NULL, 0u, 0u, NULL, CLOCK_MONOTONIC) < 0 &&
	       errno == EINVAL;
}

int up__pf_pollfd(struct up__pf_end *pe, uint64_t *syscalls)
{
	if (pe->efd >= 0)
		return pe->efd;
	if (!have_waitv(syscalls))
		return -EOPNOTSUPP;
	*syscalls += 2;
	pe->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pe->efd < 0)
		return -errno;
	pe->pid = getpid();
	return pe->efd;
}

/* Under the lock: take a pending end off its watch. If that leaves a word
 * the helper waits on with no end, wait until the helper has left that wait
 * (see the top of the file). */
static void unregister(struct up__pf_end *pe)
{
	struct up__pf_helper *h = pe->h;
	struct pf_watch *w = &h->w[pe->wi];
	uint64_t round;

	unlink_end(pe);
	pe->state = PF_IDLE;
	if (w->ends || !w->active)
		return;
	round = h->round;
	kick(h);
	while (h->round == round && reg.gen == pe->gen)
		pthread_cond_wait(&reg.cv, &reg.mu);
}

int up__pf_disarm(struct up__pf_end *pe, uint64_t *syscalls)
{
	uint64_t junk;
	int state, why, peer = 0;
	bool peer_fired;

	if (pe->efd < 0 || !pe->armed)
		return 0;
	pe->armed = false;
	peer_fired = up__pw_unwatch(&pe->pw, syscalls);
	pthread_mutex_lock(&reg.mu);
	/* Registered in the parent before a fork: nothing of it is in this
	 * process's registry. */
	if (pe->gen != reg.gen)
		pe->state = PF_IDLE;
	state = pe->state;
	why = pe->why;
	if (state == PF_PENDING)
		unregister(pe);
	pe->state = PF_IDLE;
	pthread_mutex_unlock(&reg.mu);
	/* Nobody writes efd now: reset it. */
	if (state == PF_FIRED || peer_fired) {
		*syscalls += 1;
		(void)!read(pe->efd, &junk, sizeof(junk));
		if (peer_fired || why == PF_WHY_TICK || why == PF_WHY_ERR)
			peer = 1;
	}
	if (up__pw_dead(&pe->pw, syscalls))
		peer = 1;
	return peer;
}

/* The start of either arm: the fd made, and what an earlier arm left
 * disarmed. 0 or -errno. */
static int arm_begin(struct up__pf_end *pe, uint64_t *syscalls)
{
	if (pe->efd < 0)
		return have_waitv(syscalls) ? -EINVAL : -EOPNOTSUPP;
	if (pe->armed)
		up__pf_disarm(pe, syscalls);
	return 0;
}

int up__pf_arm(struct up__pf_end *pe, _Atomic uint32_t *word, uint32_t expect,
	       const int *pidfds, int npeer, bool tick, uint64_t early_ns, uint64_t *syscalls)
{
	uint64_t now;
	struct up__pf_helper *h;
	bool need_kick;
	int r, wi;

	r = arm_begin(pe, syscalls);
	if (r < 0)
		return r;
	pe->armed = true;
	/* A peer the watcher does not cover (beyond UP_PF_PIDFDS, or no
	 * watcher here) is covered by the ticks. */
	if (npeer > 0 && up__pw_watch(&pe->pw, pe->efd, pidfds, npeer, syscalls) < npeer)
		tick = true;
	pthread_mutex_lock(&reg.mu);
	r = watch_find(word, &h, &wi);
	if (r < 0) {
		pthread_mutex_unlock(&reg.mu);
		up__pf_disarm(pe, syscalls);
		return r;
	}
	pe->h = h;
	pe->wi = wi;
	pe->gen = reg.gen;
	pe->expect = expect;
	pe->tick = tick;
	now = up__now_ns();
	/* On a grid of half slices, so that the ticks of the blind ends of a
	 * helper come in few rounds: half a slice to a slice away. */
	pe->tick_at = tick ? ((now + PF_TICK_GRID) / PF_TICK_GRID + 1) * PF_TICK_GRID : 0;
	pe->early_at = early_ns ? now + early_ns : 0;
	pe->state = PF_PENDING;
	pe->prev = NULL;
	pe->next = h->w[wi].ends;
	if (pe->next)
		pe->next->prev = pe;
	h->w[wi].ends = pe;
	/* A helper queued on the word wakes for us too, whatever value it
	 * queued with: one that differs from ours is an older one, which came
	 * with a wake of its own (or futex_waitv returns at once), and the
	 * rebuild that follows queues ours. A tick or an early wake earlier
	 * than its timeout, or a word it does not wait on yet, needs a new
	 * wait. */
	need_kick = !h->w[wi].active ||
		    (tick && (!h->timeout_at || pe->tick_at < h->timeout_at)) ||
		    (pe->early_at && (!h->timeout_at || pe->early_at < h->timeout_at));
	pthread_mutex_unlock(&reg.mu);
	if (need_kick) {
		*syscalls += 1;
		kick(h);
	}
	return 0;
}

int up__pf_arm_now(struct up__pf_end *pe, uint64_t *syscalls)
{
	uint64_t one = 1;
	int r = arm_begin(pe, syscalls);

	if (r < 0)
		return r;
	/* Fired as a helper fires an end, but on no watch: the disarm reads
	 * the fd back and takes it for no peer's death. */
	pthread_mutex_lock(&reg.mu);
	pe->gen = reg.gen;
	pe->state = PF_FIRED;
	pe->why = PF_WHY_EARLY;
	pthread_mutex_unlock(&reg.mu);
	pe->armed = true;
	*syscalls += 1;
	if (write(pe->efd, &one, sizeof(one)) < 0) {
		int err = -errno;

		up__pf_disarm(pe, syscalls);
		return err;
	}
	return 0;
}

void up__pf_fini(struct up__pf_end *pe)
{
	uint64_t sc = 0;

	if (pe->efd < 0)
		return;
	/* A forked child's copy of a parent's end: the registry is not its
	 * own (the child's atfork handler may not have run yet). */
	if (pe->pid == getpid())
		up__pf_disarm(pe, &sc);
	close(pe->efd);
	pe->efd = -1;
}

void up__pf_stats(struct up__pf_stats *st)
{
	int i, j;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&reg.mu);
	st->helpers = reg.nhelper;
	for (i = 0; i < reg.nhelper; i++) {
		struct up__pf_helper *h = reg.h[i];

		st->rounds += h->round;
		for (j = 0; j < PF_WORDS; j++) {
			struct up__pf_end *pe;

			if (h->w[j].active)
				st->watches++;
			for (pe = h->w[j].ends; pe; pe = pe->next)
				st->pending++;
		}
	}
	pthread_mutex_unlock(&reg.mu);
}
