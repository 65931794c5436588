/* SPDX-License-Identifier: MIT */
/*
 * test_lock_handoff.c - the ring's two futex mutexes (the writers' and the
 * readers' lock, ring.c lock_take()/lock_drop()) wake every sleeper in turn.
 *
 * Two threads sleep on a lock that the main thread holds in their stead (it
 * stores the lock value of an idle endpoint of its own into the word). The
 * main thread then lets go as lock_drop() does: exchange to 0, wake one.
 * The woken thread takes the lock; when it drops it, the other must be
 * woken too. A lock taken after a sleep without the waiters bit (the bug
 * this test was written for) drops without a wake, and the second sleeper
 * lies there, with the lock free, until its sleep slice ends: that shows as
 * a timed-out sleep in its counters. Threads only, so TSan runs it too.
 */
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "harness.h"
#include "up_int.h"

#define MSG 100

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

/* Asleep in the lock's futex wait: counted a wait, and in state S. */
static bool asleep(struct sleeper *s)
{
	pid_t tid = atomic_load(&s->tid);

	return tid != 0 && atomic_load(&s->e->c.waits) != 0 && harness_tid_state(tid) == 'S';
}

static void two_sleepers_on(bool readers)
{
	struct up_pipe *p;
	struct up_end *holder, *r, *w, *extra;
	struct sleeper s[2];
	_Atomic uint32_t *word;
	uint64_t timeouts;
	uint32_t old;
	char buf[4 * MSG];
	int i;

	CHECK_OK(up_pipe_create(NULL, &p));
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

	/* lock_drop(), by hand: one is woken; its drop must wake the other. */
	old = atomic_exchange(word, 0);
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
	two_sleepers_on(false);
}

static void two_readers_asleep_are_both_woken(void)
{
	two_sleepers_on(true);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	RUN(two_writers_asleep_are_both_woken);
	RUN(two_readers_asleep_are_both_woken);
	return 0;
}
