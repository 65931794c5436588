/* SPDX-License-Identifier: MIT */
/*
 * test_lock_handoff.c - the ring's two futex mutexes (the writers' and the
 * readers' lock, core/lock.h, lock.c and take.c) wake every sleeper in turn.
 *
 * Two threads sleep on a lock that the main thread holds in their stead (it
 * stores the lock value of an idle endpoint of its own into the word). The
 * main thread then lets go as lock_drop() does: exchange to 0, wake one.
 * The woken thread takes the lock; when it drops it, the other must be
 * woken too. A lock taken after a sleep without the waiters bit (the bug
 * this test was written for) drops without a wake, and the second sleeper
 * lies there, with the lock free, until its sleep slice ends: that shows as
 * a timed-out sleep in its counters. Threads only, so TSan runs it too.
 *
 * The same for a wake of data, which goes to one reader: a reader woken
 * into up_peek that lets go without consuming (up_consume(0), a refused
 * up_consume, or close) must pass the wake on to the next sleeping reader.
 */
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "harness.h"
#include "up_int.h"
#include "lock.h"

#define MSG 100

/* UP_TEST_SQPOLL=1: wakes go out through an SQPOLL ring (its CTest
 * variant); the library falls back by itself where that is refused. */
static int new_pipe(struct up_pipe **p)
{
	struct up_config cfg;
	const char *v = getenv("UP_TEST_SQPOLL");

	up_config_init(&cfg);
	if (v && strcmp(v, "1") == 0)
		cfg.flags |= UP_CFG_SQPOLL;
	return up_pipe_create(&cfg, p);
}

struct sleeper {
	struct up_end *e;
	bool reader;
	_Atomic pid_t tid;
	ssize_t ret;
	pthread_t th;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	char buf[MSG];

	atomic_store(&s->tid, (pid_t)syscall(SYS_gettid));
	if (s->reader) {
		s->ret = up_read(s->e, buf, sizeof(buf));
	} else {
		harness_fill(1, 0, buf, sizeof(buf));
		s->ret = up_write(s->e, buf, sizeof(buf));
	}
	return NULL;
}

/* Thread @tid of end @e is asleep in the library: it counted a wait, and
 * is in state S (a lock's futex wait, or a wait line's). */
static bool end_asleep(struct up_end *e, pid_t tid)
{
	return tid != 0 && atomic_load(&e->c.waits) != 0 && harness_tid_state(tid) == 'S';
}

static bool asleep(struct sleeper *s)
{
	return end_asleep(s->e, atomic_load(&s->tid));
}

/*
 * Two threads asleep on a lock (the readers' with @readers, else the
 * writers') behind the main thread. With @dead_taker, the main thread lets
 * go and, before the wake, the word is taken by an endpoint that then
 * vanished (a fresh take: no waiters bit), so the woken thread finds a
 * dead holder and takes the lock over.
 */
static void two_sleepers_on(bool readers, bool dead_taker)
{
	struct up_pipe *p;
	struct up_end *holder, *r, *w, *extra;
	struct sleeper s[2];
	_Atomic uint32_t *word;
	uint64_t timeouts;
	uint32_t old, gone = 0;
	char buf[4 * MSG];
	int i;

	CHECK_OK(new_pipe(&p));
	if (dead_taker) {
		struct up_end *x;

		/* The lock value of an endpoint that no longer exists. */
		CHECK_OK(up_open(p, readers ? UP_RD : UP_WR, &x));
		gone = x->lock_id;
		CHECK_OK(up_close(x));
	}
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	/* A third end of the contended role holds the lock; a second of the
	 * other role keeps the counts away from 1 (no bias for writers). */
	CHECK_OK(up_open(p, readers ? UP_RD : UP_WR, &holder));
	CHECK_OK(up_open(p, readers ? UP_WR : UP_RD, &extra));
	if (readers) {
		/* Data for both readers, written before the lock is held. */
		harness_fill(1, 0, buf, MSG);
		harness_fill(1, 0, buf + MSG, MSG);
		CHECK_EQ(up_write(w, buf, 2 * MSG), 2 * MSG);
	}
	word = readers ? &p->ln->rlock.word : &p->ln->wlock.word;
	CHECK_EQ(atomic_load(word), 0);
	/* As a holder that took it: the held word claims the lock (lock.h),
	 * or a taker would take back a word that names an idle end. */
	atomic_store(&p->ends[holder->idx].held, readers ? UP_HELD_RLOCK : UP_HELD_WLOCK);
	atomic_store(word, holder->lock_id);

	memset(s, 0, sizeof(s));
	for (i = 0; i < 2; i++) {
		s[i].reader = readers;
		if (i == 0)
			s[i].e = readers ? r : w;
		else
			CHECK_OK(up_open(p, readers ? UP_RD : UP_WR, &s[i].e));
		CHECK_EQ(pthread_create(&s[i].th, NULL, sleeper_main, &s[i]), 0);
	}
	/* State, not a delay: both in the futex wait, the bit set. */
	while (!asleep(&s[0]) || !asleep(&s[1]) || !(atomic_load(word) & UP_LOCK_WAITERS))
		harness_nap_ns(100000);
	timeouts = atomic_load(&s[0].e->c.timeouts) + atomic_load(&s[1].e->c.timeouts);

	/* lock_drop(), by hand: one is woken; its drop must wake the other.
	 * With a dead taker, the word names it by the time of the wake. */
	old = atomic_exchange(word, gone);
	CHECK_EQ(old, holder->lock_id | UP_LOCK_WAITERS);
	CHECK(syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1, NULL, NULL, 0) >= 0);

	for (i = 0; i < 2; i++) {
		CHECK_EQ(pthread_join(s[i].th, NULL), 0);
		CHECK(s[i].ret > 0);
	}
	/* Neither slept out its slice with the lock free. */
	CHECK_EQ(atomic_load(&s[0].e->c.timeouts) + atomic_load(&s[1].e->c.timeouts), timeouts);
	CHECK_EQ(atomic_load(word) & ~UP_LOCK_WAITERS, 0);

	if (!readers) {
		/* Both messages arrived whole. */
		char want[MSG];

		harness_fill(1, 0, want, sizeof(want));
		for (i = 0; i < 2; i++) {
			CHECK_EQ(up_read(r, buf, MSG), MSG);
			CHECK(memcmp(buf, want, MSG) == 0);
		}
	}
	up_close(s[1].e);
	up_close(extra);
	up_close(holder);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void two_writers_asleep_are_both_woken(void)
{
	two_sleepers_on(false, false);
}

static void two_readers_asleep_are_both_woken(void)
{
	two_sleepers_on(true, false);
}

/* The takeover from a dead holder is a take too: after a sleep it must set
 * the waiters bit as well (model: lock.pml -DDEATH). */
static void a_takeover_after_a_sleep_wakes_the_next(void)
{
	two_sleepers_on(false, true);
	two_sleepers_on(true, true);
}

/* ---- a peek let go ---- */

enum { LET_GO_ZERO, LET_GO_REFUSED, LET_GO_CLOSE };

struct peeker {
	struct up_end *e;
	int how;
	_Atomic pid_t tid;
	int ret;
	pthread_t th;
};

static void *peeker_main(void *arg)
{
	struct peeker *k = arg;
	struct iovec iov[4];
	int cnt = 4;
	ssize_t n;

	atomic_store(&k->tid, (pid_t)syscall(SYS_gettid));
	n = up_peek(k->e, iov, &cnt);
	if (n <= 0) {
		k->ret = n < 0 ? (int)n : -1;
		return NULL;
	}
	if (k->how == LET_GO_ZERO)
		k->ret = up_consume(k->e, 0);
	else if (k->how == LET_GO_REFUSED)
		k->ret = up_consume(k->e, (size_t)n + 1) == -EINVAL ? 0 : -1;
	else
		k->ret = up_close(k->e);
	return NULL;
}

/*
 * Two readers asleep in up_peek, one write: whichever gets its one wake
 * lets go without consuming and must pass the wake on; the other then
 * peeks and lets go too. Neither may be left to its slice. Both let go,
 * so the order in which they queued does not matter (with SQPOLL their
 * futex waits are armed by the SQ thread, in an order no test can see).
 */
static void peek_let_go(int how)
{
	struct up_pipe *p;
	struct up_end *w;
	struct peeker k[2];
	uint64_t timeouts;
	char buf[MSG];
	int i;

	CHECK_OK(new_pipe(&p));
	CHECK_OK(up_open(p, UP_WR, &w));
	memset(k, 0, sizeof(k));
	for (i = 0; i < 2; i++) {
		k[i].how = how;
		CHECK_OK(up_open(p, UP_RD, &k[i].e));
	}
	for (i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&k[i].th, NULL, peeker_main, &k[i]), 0);
	while (!end_asleep(k[0].e, atomic_load(&k[0].tid)) ||
	       !end_asleep(k[1].e, atomic_load(&k[1].tid)))
		harness_nap_ns(100000);
	timeouts = atomic_load(&k[0].e->c.timeouts) + atomic_load(&k[1].e->c.timeouts);

	harness_fill(1, 0, buf, sizeof(buf));
	CHECK_EQ(up_write(w, buf, sizeof(buf)), MSG);
	for (i = 0; i < 2; i++) {
		CHECK_EQ(pthread_join(k[i].th, NULL), 0);
		CHECK_EQ(k[i].ret, 0);
	}
	/* The second was woken by the first letting go, not by its slice.
	 * Closed ends fold their counters into the pipe's. */
	if (how == LET_GO_CLOSE) {
		CHECK_EQ(atomic_load(&p->closed.timeouts), timeouts);
	} else {
		CHECK_EQ(atomic_load(&k[0].e->c.timeouts) + atomic_load(&k[1].e->c.timeouts),
			 timeouts);
		for (i = 0; i < 2; i++)
			up_close(k[i].e);
	}
	up_close(w);
	up_pipe_release(p);
}

static void peek_let_go_by_consume_zero_passes_the_wake(void)
{
	peek_let_go(LET_GO_ZERO);
}

static void peek_let_go_by_refused_consume_passes_the_wake(void)
{
	peek_let_go(LET_GO_REFUSED);
}

static void peek_let_go_by_close_passes_the_wake(void)
{
	peek_let_go(LET_GO_CLOSE);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	RUN(two_writers_asleep_are_both_woken);
	RUN(two_readers_asleep_are_both_woken);
	RUN(a_takeover_after_a_sleep_wakes_the_next);
	RUN(peek_let_go_by_consume_zero_passes_the_wake);
	RUN(peek_let_go_by_refused_consume_passes_the_wake);
	RUN(peek_let_go_by_close_passes_the_wake);
	return 0;
}
