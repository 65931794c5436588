/* SPDX-License-Identifier: MIT */
/*
 * test_poll.c - event-loop integration: up_pollfd()/up_poll_arm() with
 * poll(2), and up_uring_prep_poll() on a caller's own io_uring.
 *
 * Every case arms first and only then lets the other side act (a thread
 * released through a pipe(2) token, or a child process), so a readiness
 * that never comes fails the case by poll's timeout instead of passing.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rec_harness.h"
#include "up_int.h"
#include "uringpipe.h"
#include "uringpipe/uring.h"

#define POLL_MS 5000

#if defined(__SANITIZE_THREAD__)
/* A forked child here makes the poll helper thread of its own (futex
 * backend), which TSan refuses after a multi-threaded fork unless told:
 * the child's own threads are what it then checks. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "die_after_fork=0";
}
#endif

struct actor {
	struct up_end *e;
	int go[2];     /* token: the actor acts once it reads a byte */
	int what;      /* 0 write "hello", 1 close, 2 read everything */
	ssize_t res;
	pthread_t t;
};

static void *actor_main(void *arg)
{
	struct actor *a = arg;
	char c, buf[1 << 16];

	if (read(a->go[0], &c, 1) != 1)
		return NULL;
	if (a->what == 0) {
		a->res = up_write(a->e, "hello", 5);
	} else if (a->what == 1) {
		a->res = up_close(a->e);
	} else {
		ssize_t n;

		a->res = 0;
		while ((n = up_read(a->e, buf, sizeof(buf))) > 0)
			a->res += n;
	}
	return NULL;
}

static void actor_start(struct actor *a, struct up_end *e, int what)
{
	memset(a, 0, sizeof(*a));
	a->e = e;
	a->what = what;
	CHECK_SYS(pipe(a->go));
	CHECK_EQ(pthread_create(&a->t, NULL, actor_main, a), 0);
}

static void actor_go(struct actor *a)
{
	CHECK_EQ(write(a->go[1], "x", 1), 1);
}

static void actor_join(struct actor *a)
{
	CHECK_EQ(pthread_join(a->t, NULL), 0);
	close(a->go[0]);
	close(a->go[1]);
}

/* poll the fd; returns 1 readable, 0 timeout */
static int wait_fd(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int r = poll(&pfd, 1, ms);

	CHECK(r >= 0);
	return r > 0 && (pfd.revents & POLLIN);
}

/* Readers here opt out of the early wake (UP_NO_EARLY): these tests write
 * at a steady pace and hold the fd readable for a wake or data only, which
 * the early window would make it for the pace alone (test_early's part). */
static struct up_end *open_nb(struct up_pipe *p, int flags)
{
	struct up_end *e;

	CHECK_OK(up_open(p, flags | UP_NONBLOCK | ((flags & UP_RD) ? UP_NO_EARLY : 0), &e));
	return e;
}

static int pollfd_or_skip(struct up_end *e)
{
	int fd = up_pollfd(e);

	if (fd == -EOPNOTSUPP)
		SKIP("up_pollfd: neither io_uring nor futex_waitv(2) on this host");
	CHECK_OK(fd);
	return fd;
}

/* A default pipe with a poll-mode reader *r, its pollfd in *fd, and a
 * blocking writer *w. */
static struct up_pipe *poll_reader_pipe(struct up_end **r, struct up_end **w, int *fd)
{
	struct up_pipe *p;

	CHECK_OK(up_pipe_create(NULL, &p));
	*r = open_nb(p, UP_RD);
	CHECK_OK(up_open(p, UP_WR, w));
	*fd = pollfd_or_skip(*r);
	return p;
}

/* A pipe of 64 KiB, which a few writes fill; @page_size 0: the default. */
static struct up_pipe *small_pipe(size_t page_size)
{
	struct up_config cfg;
	struct up_pipe *p;

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	if (page_size)
		cfg.page_size = page_size;
	CHECK_OK(up_pipe_create(&cfg, &p));
	return p;
}

/* The cases that need the io_uring backend say so and skip on another. */
static bool backend_is_io_uring(struct up_pipe *p, const char *fn)
{
	struct up_stats st;

	CHECK_OK(up_stats(p, &st));
	if (strncmp(st.backend, "io_uring", 8) == 0)
		return true;
	printf("# %s: skipped (backend %s)\n", fn, st.backend);
	return false;
}

static void reader_wakes_on_data(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct actor a;
	char buf[16];
	int fd;

	p = poll_reader_pipe(&r, &w, &fd);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_EQ(wait_fd(fd, 0), 0); /* armed, nothing yet: not readable */
	actor_start(&a, w, 0);
	actor_go(&a);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	actor_join(&a);
	CHECK_EQ(a.res, 5);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	CHECK(memcmp(buf, "hello", 5) == 0);
	/* Disarmed by the read: the fd was reset. */
	CHECK_EQ(wait_fd(fd, 0), 0);
	/* With data already there, arming says so instead of arming. */
	CHECK_EQ(up_write(w, "x", 1), 1);
	CHECK_EQ(up_poll_arm(r), 1);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 1);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * On io_uring, the reader's first call after a wake finds the armed wait
 * and its tick (an armed end with no pidfd to watch has one) both over, so
 * it enters no kernel before it has the data: the tick is linked to the
 * wait, not a timer of its own that would have to be cancelled.
 */
static void woken_reader_reads_without_a_syscall(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct up_stats s0, s1;
	struct actor a;
	char buf[16];
	int fd, round;

	p = poll_reader_pipe(&r, &w, &fd);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	for (round = 0; round < 20; round++) {
		CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
		CHECK_EQ(up_poll_arm(r), 0);
		actor_start(&a, w, 0);
		actor_go(&a);
		CHECK_EQ(wait_fd(fd, POLL_MS), 1);
		actor_join(&a);
		CHECK_EQ(a.res, 5);
		CHECK_OK(up_stats(p, &s0));
		CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
		CHECK_OK(up_stats(p, &s1));
		if (s1.syscalls != s0.syscalls) {
			fprintf(stderr, "round %d: the read after the wake made %llu system calls\n",
				round, (unsigned long long)(s1.syscalls - s0.syscalls));
			harness_fail();
		}
		/* And the fd is no longer readable: nothing of the arm is left. */
		CHECK_EQ(wait_fd(fd, 0), 0);
	}
out:
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * On io_uring, a wake from a thread of the reader's own process makes the
 * pollfd readable from the waker's call (a MSG_RING into the poll ring), so
 * the reader's epoll_wait() returns it. The armed FUTEX_WAIT's completion
 * alone is task work of the arming thread: it would end that thread's
 * epoll_wait() with EINTR, and only the next one would return the fd. The
 * reader arms and waits on a thread of its own, which the writer sees
 * asleep before it writes (an epoll_wait() that starts while the wake is
 * being made can end with EINTR either way: the kernel looks for events
 * before it looks for a signal).
 */
struct epoll_reader {
	struct up_end *r;
	int ep, first, first_errno;
	_Atomic pid_t tid;
	char buf[16];
	ssize_t got;
};

static void *epoll_reader_main(void *arg)
{
	struct epoll_reader *er = arg;
	struct epoll_event ev;
	int n;

	er->got = up_read(er->r, er->buf, sizeof(er->buf));
	if (er->got != -EAGAIN || up_poll_arm(er->r) != 0)
		return NULL;
	atomic_store(&er->tid, (pid_t)syscall(SYS_gettid));
	n = epoll_wait(er->ep, &ev, 1, POLL_MS);
	er->first = n;
	er->first_errno = n < 0 ? errno : 0;
	if (n < 0 && errno == EINTR)
		n = epoll_wait(er->ep, &ev, 1, POLL_MS);
	er->got = n == 1 ? up_read(er->r, er->buf, sizeof(er->buf)) : -ETIMEDOUT;
	return NULL;
}

static void in_process_wake_is_one_epoll_wait(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct epoll_reader er;
	struct up_pipe *p;
	struct up_end *r, *w;
	pthread_t t;
	int fd, ep, round, eintr = 0;

	p = poll_reader_pipe(&r, &w, &fd);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	for (round = 0; round < 20; round++) {
		memset(&er, 0, sizeof(er));
		er.r = r;
		er.ep = ep;
		CHECK_EQ(pthread_create(&t, NULL, epoll_reader_main, &er), 0);
		harness_wait_asleep(&er.tid);
		CHECK_EQ(up_write(w, "hello", 5), 5);
		CHECK_EQ(pthread_join(t, NULL), 0);
		CHECK_EQ(er.got, 5);
		CHECK(memcmp(er.buf, "hello", 5) == 0);
		if (er.first != 1) {
			CHECK(er.first < 0 && er.first_errno == EINTR);
			eintr++;
		}
		CHECK_EQ(wait_fd(fd, 0), 0);
	}
	if (eintr != 0) {
		fprintf(stderr, "%d of 20 wakes ended the first epoll_wait with EINTR\n", eintr);
		harness_fail();
	}
	close(ep);
out:
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * Pokes reach armed poll rings only: not one whose end has disarmed (its
 * fd would turn readable with nothing armed), and not the number of one
 * that has closed, which the next ring made here takes (a completion its
 * owner never asked for). A third end, armed and waiting in epoll_wait() on
 * a thread of its own, is poked: its first epoll_wait() returns the fd
 * (as in_process_wake_is_one_epoll_wait()), so the write did poke.
 */
static void poke_reaches_only_armed_rings(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct epoll_reader er;
	struct io_uring mine;
	struct io_uring_cqe *cqe;
	struct up_pipe *p;
	struct up_end *w, *r1, *r2, *r3;
	pthread_t t;
	char buf[16];
	int fd1, fd2, fd3, ep;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_WR, &w));
	r1 = open_nb(p, UP_RD);
	r2 = open_nb(p, UP_RD);
	r3 = open_nb(p, UP_RD);
	fd1 = pollfd_or_skip(r1);
	fd2 = pollfd_or_skip(r2);
	fd3 = pollfd_or_skip(r3);
	if (!backend_is_io_uring(p, __func__)) {
		up_close(r3);
		goto out;
	}
	/* r1 armed, then disarmed by a read that finds nothing. */
	CHECK_EQ(up_read(r1, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(up_poll_arm(r1), 0);
	CHECK_EQ(up_read(r1, buf, sizeof(buf)), -EAGAIN);
	/* r3 armed, then closed; its ring's number goes to a ring of ours. */
	CHECK_EQ(up_read(r3, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(up_poll_arm(r3), 0);
	CHECK_OK(up_close(r3));
	/* The backend is io_uring: rings can be made here. */
	CHECK_EQ(io_uring_queue_init(4, &mine, 0), 0);
	CHECK_EQ(mine.ring_fd, fd3);
	/* r2 armed by a thread asleep in epoll_wait() on it. */
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd2, &ev), 0);
	memset(&er, 0, sizeof(er));
	er.r = r2;
	er.ep = ep;
	CHECK_EQ(pthread_create(&t, NULL, epoll_reader_main, &er), 0);
	harness_wait_asleep(&er.tid);
	CHECK_EQ(up_write(w, "x", 1), 1);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(er.first, 1);
	CHECK_EQ(er.got, 1);
	close(ep);
	CHECK(io_uring_peek_cqe(&mine, &cqe) != 0);
	io_uring_queue_exit(&mine);
	CHECK_EQ(wait_fd(fd1, 0), 0);
out:
	up_close(r1);
	up_close(r2);
	up_close(w);
	up_pipe_release(p);
}

/*
 * Pokes name a poll ring by its fd number. A reader end arms and closes
 * over and over while a writer keeps waking it and another thread keeps
 * making rings of its own, which take the fd numbers the closed poll rings
 * give back: no poke may land in one of those (its CQE would be a
 * completion their owner never asked for). Holds because a poll ring
 * leaves the table before its fd closes, and the waker holds the table
 * across the submission that resolves the fd.
 */
/* TSan does not see liburing unmap a ring (a raw system call), so a ring
 * mapped later at the same address reads as a race on the old one's CQ:
 * the churn below makes rings on two threads, so it is left out there
 * (UP_TEST_TSAN: harness.h). */

struct churn {
	struct up_pipe *p;
	_Atomic int stop;
	_Atomic long stray, rings, writes;
};

static void *churn_writer(void *arg)
{
	struct churn *c = arg;
	struct up_end *w;

	if (up_open(c->p, UP_WR | UP_NONBLOCK, &w) < 0)
		return NULL;
	while (!atomic_load(&c->stop)) {
		ssize_t n = up_write(w, "x", 1);

		if (n == 1)
			atomic_fetch_add(&c->writes, 1);
		else if (n == -EAGAIN)
			sched_yield();
		else
			break;
	}
	up_close(w);
	return NULL;
}

static void *churn_rings(void *arg)
{
	struct churn *c = arg;

	while (!atomic_load(&c->stop)) {
		struct io_uring ring;
		struct io_uring_cqe *cqe;
		int i;

		if (io_uring_queue_init(4, &ring, 0) < 0)
			break;
		for (i = 0; i < 20; i++) {
			while (io_uring_peek_cqe(&ring, &cqe) == 0) {
				atomic_fetch_add(&c->stray, 1);
				io_uring_cqe_seen(&ring, cqe);
			}
			sched_yield();
		}
		io_uring_queue_exit(&ring);
		atomic_fetch_add(&c->rings, 1);
	}
	return NULL;
}

static void closed_poll_ring_is_never_poked(void)
{
	struct churn c;
	struct up_end *keep, *r;
	pthread_t tw, tr;
	char buf[4096];
	int i;

	if (UP_TEST_TSAN) {
		printf("# %s: skipped under TSan (see struct churn)\n", __func__);
		return;
	}
	memset(&c, 0, sizeof(c));
	CHECK_OK(up_pipe_create(NULL, &c.p));
	/* A reader that stays, so that the writer never sees EPIPE. */
	CHECK_OK(up_open(c.p, UP_RD | UP_NONBLOCK | UP_NO_EARLY, &keep));
	if (!backend_is_io_uring(c.p, __func__))
		goto out;
	CHECK_EQ(pthread_create(&tw, NULL, churn_writer, &c), 0);
	CHECK_EQ(pthread_create(&tr, NULL, churn_rings, &c), 0);
	for (i = 0; i < 3000; i++) {
		r = open_nb(c.p, UP_RD);
		(void)pollfd_or_skip(r);
		while (up_read(r, buf, sizeof(buf)) > 0)
			;
		CHECK(up_poll_arm(r) >= 0);
		/* Now and then, let a wake come before the close. */
		if (i % 2)
			sched_yield();
		CHECK_OK(up_close(r));
	}
	atomic_store(&c.stop, 1);
	CHECK_EQ(pthread_join(tw, NULL), 0);
	CHECK_EQ(pthread_join(tr, NULL), 0);
	printf("# %s: %ld writes, %ld rings made beside\n", __func__, atomic_load(&c.writes),
	       atomic_load(&c.rings));
	CHECK(atomic_load(&c.writes) > 0);
	CHECK(atomic_load(&c.rings) > 0);
	if (atomic_load(&c.stray) != 0) {
		fprintf(stderr, "%ld completions landed in rings nobody armed\n",
			atomic_load(&c.stray));
		harness_fail();
	}
out:
	up_close(keep);
	up_pipe_release(c.p);
}

struct blocked_reader {
	struct up_end *r;
	_Atomic pid_t tid;
	ssize_t res;
	char buf[16];
};

static void *blocked_read(void *arg)
{
	struct blocked_reader *b = arg;

	atomic_store(&b->tid, (pid_t)syscall(SYS_gettid));
	b->res = up_read(b->r, b->buf, sizeof(b->buf));
	return NULL;
}

/* Start @b's thread and return once it sleeps (its state in /proc), with
 * its end's timeouts counted so far. */
static uint64_t blocked_reader_start(struct blocked_reader *b, pthread_t *t)
{
	pid_t tid;

	CHECK(pthread_create(t, NULL, blocked_read, b) == 0);
	while ((tid = atomic_load(&b->tid)) == 0 || harness_tid_state(tid) != 'S')
		sched_yield();
	return atomic_load(&b->r->c.timeouts);
}

/* Arm @r, write a byte that pokes it (no FUTEX_WAKE), read it: the wait is
 * parked. */
static void park(struct up_end *r, struct up_end *w, int fd)
{
	char c;

	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_EQ(up_write(w, "a", 1), 1);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_read(r, &c, 1), 1);
	CHECK(r->parked);
}

/*
 * An armed poll-mode reader whose event loop does not read must not take
 * the only wake meant for a reader blocked in up_read. Futex waiters are
 * woken in the order they queued, so with the armed end first, a wake for
 * one sleeper reached the armed end and the blocked reader slept until its
 * 50 ms slice ran out (seen as a timeout in its counters).
 */
static void armed_reader_does_not_swallow_a_wake(void)
{
	struct up_pipe *p;
	struct up_end *armed, *w;
	struct blocked_reader b = { 0 };
	pthread_t t;
	uint64_t timeouts;
	int fd;

	CHECK_OK(up_pipe_create(NULL, &p));
	armed = open_nb(p, UP_RD);
	CHECK_OK(up_open(p, UP_RD, &b.r));
	CHECK_OK(up_open(p, UP_WR, &w));
	fd = pollfd_or_skip(armed);
	CHECK_EQ(up_poll_arm(armed), 0);
	timeouts = blocked_reader_start(&b, &t);
	CHECK_EQ(up_write(w, "hello", 5), 5);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(b.res, 5);
	CHECK(memcmp(b.buf, "hello", 5) == 0);
	CHECK_EQ(atomic_load(&b.r->c.timeouts), timeouts);
	/* The armed end was told too, and finds nothing left. */
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_read(armed, b.buf, sizeof(b.buf)), -EAGAIN);
	up_close(w);
	up_close(b.r);
	up_close(armed);
	up_pipe_release(p);
}

/*
 * On io_uring, a wake from a thread of the reader's own process pokes the
 * armed ring and, when that reaches every sleeper, makes no FUTEX_WAKE: the
 * armed FUTEX_WAIT stays in the kernel, parked, and the next arm takes it
 * up: at most one system call (the reader's fence, membarrier(), where it
 * is made), where an arm that lets the parked wait go cancels it and
 * submits anew (two more). Arms more than UW_PARK_NS after the parked
 * wait's submission do that, so a slow run may see a few.
 */
static void rearm_after_a_poke_takes_up_the_wait(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct up_stats s0, s1;
	char buf[16];
	int fd, round, free_arms = 0;

	p = poll_reader_pipe(&r, &w, &fd);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	for (round = 0; round < 20; round++) {
		CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
		CHECK_OK(up_stats(p, &s0));
		CHECK_EQ(up_poll_arm(r), 0);
		CHECK_OK(up_stats(p, &s1));
		if (round > 0 && s1.syscalls - s0.syscalls <= 1)
			free_arms++;
		CHECK_EQ(up_write(w, "hello", 5), 5);
		CHECK_EQ(wait_fd(fd, POLL_MS), 1);
		CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
		CHECK(memcmp(buf, "hello", 5) == 0);
		CHECK_EQ(wait_fd(fd, 0), 0);
	}
	printf("# %d of 19 arms took up the parked wait\n", free_arms);
	if (free_arms < 10) {
		fprintf(stderr, "only %d of 19 arms after a poke made at most one system call\n",
			free_arms);
		harness_fail();
	}
out:
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * A parked wait (above) sits in the futex's queue ahead of a reader that
 * blocks later. A data wake is for one sleeper: it must reach the blocked
 * reader, not end the parked wait (its end announced nowhere), or that
 * reader sleeps until its 50 ms slice runs out (a timeout in its counters).
 * Then a wake for every bit, which does end the parked wait, leaves the fd
 * readable only until the end's next call that finds nothing.
 */
static void parked_wait_takes_no_wake_for_one(void)
{
	struct up_pipe *p;
	struct up_end *parked, *w;
	struct blocked_reader b = { 0 };
	uint64_t timeouts, t0;
	pthread_t t;
	char buf[16];
	int fd;

	CHECK_OK(up_pipe_create(NULL, &p));
	parked = open_nb(p, UP_RD);
	CHECK_OK(up_open(p, UP_RD, &b.r));
	CHECK_OK(up_open(p, UP_WR, &w));
	fd = pollfd_or_skip(parked);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	t0 = harness_now_ns();
	park(parked, w, fd);
	timeouts = blocked_reader_start(&b, &t);
	CHECK_EQ(up_write(w, "hello", 5), 5);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(b.res, 5);
	CHECK_EQ(atomic_load(&b.r->c.timeouts), timeouts);
	/* The parked wait is still asleep (unless its tick, 50 ms after the
	 * arm, ended it: a slow run). */
	if (harness_now_ns() - t0 < 25000000ull)
		CHECK_EQ(wait_fd(fd, 0), 0);
	/* A wake for every bit ends it: readable, and reset by the call that
	 * finds nothing. */
	syscall(SYS_futex, &p->ln->rd_wait.seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_read(parked, buf, sizeof(buf)), -EAGAIN);
	CHECK(!parked->parked);
	CHECK_EQ(wait_fd(fd, 0), 0);
out:
	up_close(w);
	up_close(b.r);
	up_close(parked);
	up_pipe_release(p);
}

/*
 * An arm that finds data returns 1 and arms nothing; it must still let go
 * of a parked wait that completed meanwhile, or the fd stays readable for
 * a loop that, having been told to read, reads exactly what it wanted and
 * makes no call that finds nothing.
 */
static void arm_that_finds_data_lets_a_completed_park_go(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char buf[16];
	int fd;

	p = poll_reader_pipe(&r, &w, &fd);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	park(r, w, fd);
	syscall(SYS_futex, &p->ln->rd_wait.seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_write(w, "b", 1), 1);
	CHECK_EQ(up_poll_arm(r), 1);
	CHECK(!r->parked);
	CHECK_EQ(wait_fd(fd, 0), 0);
	CHECK_EQ(up_read(r, buf, 1), 1);
out:
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * A poll-mode writer woken by a reader of its own process is not parked: an
 * idle writer makes no call that finds nothing, so what a parked wait posted
 * later (its tick) would leave its fd readable for good.
 */
static void woken_writer_parks_nothing(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	static char big[1 << 16];
	int fd;

	p = small_pipe(0);
	r = open_nb(p, UP_RD);
	w = open_nb(p, UP_WR);
	fd = pollfd_or_skip(w);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	while (up_write(w, big, sizeof(big)) > 0)
		;
	CHECK_EQ(up_poll_arm(w), 0);
	while (up_read(r, big, sizeof(big)) > 0)
		;
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK(up_write(w, big, 4096) == 4096);
	CHECK(!w->parked);
	CHECK_EQ(wait_fd(fd, 0), 0);
out:
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * An arm older than the park window (UW_PARK_NS, 6.25 ms) would not be taken
 * up, so its wake is no reason to leave the FUTEX_WAKE out: the wake ends its
 * wait, and the disarm parks nothing (a parked wait there would cost the next
 * arm a cancel). The arm ages on the clock; nothing waits on it.
 */
static void old_arm_gets_its_futex_wake(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char buf[16];
	uint64_t t0;
	int fd;

	p = poll_reader_pipe(&r, &w, &fd);
	if (!backend_is_io_uring(p, __func__))
		goto out;
	CHECK_EQ(up_poll_arm(r), 0);
	t0 = harness_now_ns();
	while (harness_now_ns() - t0 < 10000000ull)
		CHECK_EQ(poll(NULL, 0, 1), 0);
	CHECK_EQ(up_write(w, "a", 1), 1);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 1);
	CHECK(!r->parked);
	CHECK_EQ(wait_fd(fd, 0), 0);
out:
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* In a child process: close the copies of the parent's @ninh ends @inh (ends
 * of its own since the fork, which its death would leave to be reaped too),
 * attach @p, open an end of @role in poll mode, arm it (a writer first finds
 * the lock held: -EAGAIN), and exit without ever disarming. Returns once the
 * child has exited 0. */
static void arm_in_child_and_die(struct up_pipe *p, int role, struct up_end **inh, int ninh)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *a;

		harness_close_inherited(inh, ninh);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 ||
		    up_open(q, role | UP_NONBLOCK, &a) < 0 || up_pollfd(a) < 0 ||
		    (role == UP_WR && up_write(a, "abc", 3) != -EAGAIN) ||
		    up_poll_arm(a) != 0)
			_exit(1);
		_exit(0); /* armed, for good */
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

/* A process that dies armed (never disarms) is taken off the wait line
 * when it is reaped; otherwise every later data wake went to all. */
static void dead_armed_reader_is_taken_off_the_line(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	(void)pollfd_or_skip(r); /* skips where poll mode is not supported */
	arm_in_child_and_die(p, UP_RD, (struct up_end *[]){ r, w }, 2);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.npoll), 1);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nwait), 1);
	/* 1: the armed reader; the child's copies of r and w were closed
	 * first (left open, they would be reaped with it: 3). */
	CHECK_EQ(up__peers_reap(r), 1);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.npoll), 0);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nwait), 0);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void reader_wakes_on_eof(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct actor a;
	char buf[16];
	int fd;

	p = poll_reader_pipe(&r, &w, &fd);
	CHECK_EQ(up_poll_arm(r), 0);
	actor_start(&a, w, 1);
	actor_go(&a);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	actor_join(&a);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	up_close(r);
	up_pipe_release(p);
}

static void writer_wakes_on_room(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct actor a;
	static char big[1 << 16];
	ssize_t n, total = 0;
	int fd;

	p = small_pipe(0);
	CHECK_OK(up_open(p, UP_RD, &r));
	w = open_nb(p, UP_WR);
	fd = pollfd_or_skip(w);
	while ((n = up_write(w, big, sizeof(big))) > 0)
		total += n;
	CHECK_EQ(n, -EAGAIN);
	CHECK_EQ(up_poll_arm(w), 0);
	actor_start(&a, r, 2);
	actor_go(&a);
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK(up_write(w, big, 4096) == 4096);
	total += 4096;
	up_close(w);
	actor_join(&a);
	CHECK_EQ(a.res, total);
	up_close(r);
	up_pipe_release(p);
}

/* A write that fits the room left in the last page disarms an armed writer
 * like any other call on the end, also on the lone writer's short way. */
static void small_write_disarms_the_writer(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	static char big[1 << 16];

	p = small_pipe(4096);
	CHECK_OK(up_open(p, UP_RD, &r));
	w = open_nb(p, UP_WR);
	pollfd_or_skip(w);
	CHECK_EQ(up_write(w, big, sizeof(big) - 100), (ssize_t)sizeof(big) - 100);
	if (!w->last_ok)
		SKIP("the lock never biases here (membarrier refused): no short way");
	CHECK_EQ(up_write(w, big, 4096), -EAGAIN); /* 100 bytes of room */
	CHECK_EQ(up_poll_arm(w), 0);
	CHECK_EQ(atomic_load(&p->ln->wr_wait.nwait), 1);
	CHECK_EQ(up_write(w, "abc", 3), 3);
	CHECK_EQ(atomic_load(&p->ln->wr_wait.nwait), 0);
	CHECK_EQ(w->armed, UP_ARMED_NONE);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* Two writers, no bias (both open before any write); w1 holds the writers'
 * lock word over a small reservation merged into the last page. */
static struct up_pipe *held_by_reservation(struct up_end **r, struct up_end **w1,
					   struct up_end **w2, struct iovec *iov)
{
	struct up_pipe *p;
	int cnt = 1;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, r));
	CHECK_OK(up_open(p, UP_WR, w1));
	*w2 = open_nb(p, UP_WR);
	CHECK_EQ(up_write(*w1, "x", 1), 1);
	CHECK_EQ(up_reserve(*w1, 100, iov, &cnt), 100);
	CHECK((*w1)->resv_merge && !(*w1)->biased);
	CHECK_EQ(atomic_load(&p->ln->wlock.word) & ~UP_LOCK_WAITERS, (*w1)->lock_id);
	return p;
}

/* A poll-mode writer held up by another writer's lock waits on the lock:
 * up_poll_arm used to say "ready" (pages were free), and the event loop went
 * round until the commit. */
static void poll_writer_waits_for_the_lock(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov;
	char buf[128];
	int fd;

	p = held_by_reservation(&r, &w1, &w2, &iov);
	fd = pollfd_or_skip(w2);
	CHECK_EQ(up_write(w2, "abc", 3), -EAGAIN);
	CHECK_EQ(up_poll_arm(w2), 0);
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 1);
	CHECK_EQ(wait_fd(fd, 0), 0); /* armed, lock still held: not readable */
	memset(iov.iov_base, 'r', 100);
	CHECK_OK(up_commit(w1, 100));
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_write(w2, "abc", 3), 3); /* disarms */
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 0);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 104);
	CHECK(buf[0] == 'x' && buf[1] == 'r' && buf[100] == 'r' && memcmp(buf + 101, "abc", 3) == 0);
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* A writer process that dies armed on the lock word is taken off it: its
 * count would turn every later wake on the word into a wake for all. */
static void dead_armed_writer_is_taken_off_the_lock(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov;

	p = held_by_reservation(&r, &w1, &w2, &iov);
	(void)pollfd_or_skip(w2);
	up_close(w2);
	arm_in_child_and_die(p, UP_WR, (struct up_end *[]){ r, w1 }, 2);
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 1);
	/* 1: the armed writer, as above (its copies of r and w1: 3). */
	CHECK_EQ(up__peers_reap(r), 1);
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 0);
	CHECK_OK(up_commit(w1, 0));
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* The lone writer holds a small reservation inside its bias; a writer
 * joining in poll mode waits on the owner's busy word, which the owner's
 * commit wakes. */
static void poll_writer_waits_for_a_bias_owner(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov;
	uint64_t sc = 0;
	char buf[128];
	int cnt = 1, fd;

	if (!up__membarrier_registered(getpid(), &sc))
		SKIP("membarrier refused: the lock never biases");
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w1));
	CHECK_EQ(up_write(w1, "x", 1), 1);
	CHECK_EQ(up_reserve(w1, 100, &iov, &cnt), 100);
	CHECK(w1->biased && w1->resv_merge);
	w2 = open_nb(p, UP_WR);
	fd = pollfd_or_skip(w2);
	CHECK_EQ(up_write(w2, "abc", 3), -EAGAIN); /* marked and fenced */
	CHECK_EQ(atomic_load(&p->ln->wlock.bias), w1->lock_id | UP_BIAS_REVOKE);
	CHECK_EQ(up_poll_arm(w2), 0);
	CHECK_EQ(w2->armed_on, UP_ARMED_ON_BUSY);
	CHECK_EQ(wait_fd(fd, 0), 0);
	memset(iov.iov_base, 'r', 100);
	CHECK_OK(up_commit(w1, 100));
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(up_write(w2, "abc", 3), 3);
	CHECK_EQ(w2->armed, UP_ARMED_NONE);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 104);
	CHECK(buf[0] == 'x' && buf[100] == 'r' && memcmp(buf + 101, "abc", 3) == 0);
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/* The last reader left after the -EAGAIN: arming says "try again" (the
 * retry gives -EPIPE) instead of waiting for the holder's commit. */
static void no_reader_left_is_not_waited_for(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2;
	struct iovec iov;

	p = held_by_reservation(&r, &w1, &w2, &iov);
	(void)pollfd_or_skip(w2);
	CHECK_EQ(up_write(w2, "abc", 3), -EAGAIN);
	up_close(r);
	CHECK_EQ(up_poll_arm(w2), 1);
	CHECK_EQ(up_write(w2, "abc", 3), -EPIPE);
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 0);
	up_close(w2);
	CHECK_OK(up_commit(w1, 0));
	up_close(w1);
	up_pipe_release(p);
}

/* The holder died (and was reaped) between the -EAGAIN and the arm: nobody
 * will let go of the word, so arming says "try again", and the retry takes
 * the lock over. */
static void arm_passes_a_dead_holder(void)
{
	struct up_pipe *p;
	struct up_end *r, *w2;
	int ready[2], go[2], status;
	char c, buf[16];
	pid_t pid;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	w2 = open_nb(p, UP_WR);
	(void)pollfd_or_skip(w2);
	CHECK_SYS(pipe(ready));
	CHECK_SYS(pipe(go));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *a;
		struct iovec iov;
		int cnt = 1;

		harness_close_inherited((struct up_end *[]){ r, w2 }, 2);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_WR, &a) < 0 ||
		    up_write(a, "x", 1) != 1 || up_reserve(a, 100, &iov, &cnt) != 100 ||
		    !a->resv_merge || write(ready[1], "r", 1) != 1)
			_exit(1);
		(void)!read(go[0], &c, 1);
		_exit(0); /* holding the writers' lock word */
	}
	CHECK_EQ(read(ready[0], &c, 1), 1);
	CHECK_EQ(up_write(w2, "abc", 3), -EAGAIN);
	CHECK_EQ(write(go[1], "g", 1), 1);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* 1: the holder; its copies of r and w2 were closed first (else 3). */
	CHECK_EQ(up__peers_reap(r), 1);
	CHECK_EQ(up_poll_arm(w2), 1);
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 0);
	CHECK_EQ(up_write(w2, "abc", 3), 3);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 4);
	CHECK(memcmp(buf, "xabc", 4) == 0);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	up_close(w2);
	up_close(r);
	up_pipe_release(p);
}

/* With a poll-mode writer armed on the lock word ahead of a blocked writer,
 * the drop wakes both: a wake for one went to the poller (first in the
 * futex queue), and the blocked writer slept until its slice ended. */
static void blocked_writer_is_not_left_behind_a_poller(void)
{
	struct up_pipe *p;
	struct up_end *r, *w1, *w2, *w3;
	struct harness_writer s = { .buf = "def" };
	struct iovec iov;
	uint64_t timeouts;
	pthread_t th;
	pid_t tid;
	int fd;

	p = held_by_reservation(&r, &w1, &w2, &iov);
	CHECK_OK(up_open(p, UP_WR, &w3));
	fd = pollfd_or_skip(w2);
	CHECK_EQ(up_write(w2, "abc", 3), -EAGAIN);
	CHECK_EQ(up_poll_arm(w2), 0);
	s.w = w3;
	CHECK_EQ(pthread_create(&th, NULL, harness_writer_main, &s), 0);
	{
		double until = harness_now() + 10;

		/* w3 asleep on the lock word, behind w2's armed wait. */
		while ((tid = atomic_load(&s.tid)) == 0 || atomic_load(&w3->c.waits) == 0 ||
		       harness_tid_state(tid) != 'S') {
			CHECK(harness_now() < until);
			sched_yield();
		}
	}
	/* A slice of w3's that ended before the commit (this thread held
	 * off the CPU) does not count; one after it would mean no wake. */
	timeouts = atomic_load(&w3->c.timeouts);
	memset(iov.iov_base, 'r', 100);
	CHECK_OK(up_commit(w1, 100));
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(s.res, 3);
	CHECK_EQ(atomic_load(&w3->c.timeouts), timeouts); /* woken, not timed out */
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	up_close(w3);
	up_close(w2);
	up_close(w1);
	up_close(r);
	up_pipe_release(p);
}

/*
 * Poll-mode writers under contention: three non-blocking writers driven by
 * up_poll_arm + poll(2), each alternating up_write with small reserve+commit
 * records, beside a blocking writer, into a small pipe that one reader
 * drains. They wait on pages, on each other's lock word and on commits. A
 * lost wake shows as a poll(2) that reaches its 10 s deadline; the reader
 * (tests/rec_harness.h) checks every record (writer, sequence, contents) in
 * order per writer.
 */
#define PW_WRITERS 4 /* writer 0 blocks, 1..3 are in poll mode */
#define PW_RECORDS 20000

/* The mode's state of one writer (tests/rec_harness.h runs the writers). */
struct pw_writer {
	int fd;
	int armed, on_lock, stalls;
};

static void pw_record(unsigned char *b, int id, uint32_t seq, size_t *len)
{
	size_t n = 8 + (seq * 7 + (uint32_t)id * 13) % 57;

	b[0] = (unsigned char)id;
	b[1] = (unsigned char)n;
	memcpy(b + 2, &seq, 4);
	for (size_t i = 6; i < n; i++)
		b[i] = (unsigned char)(id * 31 + seq + i);
	*len = n;
}

static size_t pw_make(const struct rec_mode *m, uint8_t *b, uint32_t id, uint32_t seq)
{
	size_t len;

	(void)m;
	pw_record(b, (int)id, seq, &len);
	return len;
}

static void pw_head(const uint8_t *b, uint32_t *id, size_t *len)
{
	*id = b[0];
	*len = b[1];
}

static int pw_flags(uint32_t id)
{
	return UP_WR | (id ? UP_NONBLOCK : 0);
}

static void pw_setup(struct rec_writer *rw)
{
	struct pw_writer *pw = rw->ctx;

	pw->fd = rw->id ? pollfd_or_skip(rw->w) : -1;
}

/* Non-blocking call returned -EAGAIN: arm and wait for the fd. */
static void pw_wait(struct rec_writer *rw)
{
	struct pw_writer *pw = rw->ctx;
	int r = up_poll_arm(rw->w);

	CHECK(r == 0 || r == 1);
	if (r == 1)
		return;
	pw->armed++;
	if (rw->w->armed_on != UP_ARMED_ON_LINE)
		pw->on_lock++;
	if (!wait_fd(pw->fd, 10000))
		pw->stalls++;
}

static bool pw_send(struct rec_writer *rw, const uint8_t *rec, size_t n, uint32_t seq)
{
	struct pw_writer *pw = rw->ctx;

	if (rw->id == 0 || (seq & 1)) {
		ssize_t r;

		while ((r = up_write(rw->w, rec, n)) == -EAGAIN)
			pw_wait(rw);
		CHECK_EQ(r, (ssize_t)n);
	} else {
		struct iovec iov[2];
		int cnt = 2, c;
		ssize_t r;

		while ((r = up_reserve(rw->w, n, iov, &cnt)) == -EAGAIN) {
			pw_wait(rw);
			cnt = 2;
		}
		CHECK_EQ(r, (ssize_t)n);
		CHECK_EQ(cnt, 1);
		memcpy(iov[0].iov_base, rec, n);
		/* Now and then hold the reservation (and with it, often,
		 * the writers' lock) across a yield, so that the others
		 * find the lock held. */
		if ((seq & 6) == 0)
			sched_yield();
		while ((c = up_commit(rw->w, n)) == -EAGAIN)
			pw_wait(rw);
		CHECK_OK(c);
	}
	return pw->stalls == 0; /* a lost wake: stop, done() fails it */
}

static void pw_done(struct rec_writer *rw)
{
	struct pw_writer *pw = rw->ctx;

	CHECK_EQ(pw->stalls, 0);
}

static void poll_writers_under_contention(void)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct pw_writer pw[PW_WRITERS];
	struct rec_writer ws[PW_WRITERS];
	struct rec_mode m = {
		.name = "poll_writers_under_contention", .writers = PW_WRITERS,
		.records = PW_RECORDS, .hdr_len = 2, .max_len = 64,
		.make = pw_make, .head = pw_head, .flags = pw_flags, .setup = pw_setup,
		.send = pw_send, .done = pw_done,
	};
	int armed = 0, on_lock = 0;

	up_config_init(&cfg);
	cfg.capacity = 16 * 1024;
	cfg.page_size = 4096;
	CHECK_OK(up_pipe_create(&cfg, &p));
	memset(pw, 0, sizeof(pw));
	memset(ws, 0, sizeof(ws));
	for (int i = 0; i < PW_WRITERS; i++)
		ws[i].ctx = &pw[i];
	rec_run(&m, p, ws);
	for (int i = 0; i < PW_WRITERS; i++) {
		armed += pw[i].armed;
		on_lock += pw[i].on_lock;
	}
	CHECK_EQ(atomic_load(&p->ln->wlock.npoll), 0);
	printf("# %d records from each of %d writers; poll-mode writers armed %d times,"
	       " %d of them on another writer's lock\n", PW_RECORDS, PW_WRITERS, armed, on_lock);
	up_pipe_release(p);
}

static void writer_wakes_on_dead_reader_process(void)
{
	struct up_pipe *p;
	struct up_end *w;
	static char big[1 << 16];
	int fd, go[2];
	pid_t child;
	char c;

	p = small_pipe(0);
	CHECK_SYS(pipe(go));
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct up_pipe *cp;
		struct up_end *cr;

		if (up_pipe_attach(up_pipe_fd(p), &cp) < 0 || up_open(cp, UP_RD, &cr) < 0)
			_exit(1);
		/* Tell the parent we hold a reader, then wait to be killed. */
		if (write(go[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	CHECK_EQ(read(go[0], &c, 1), 1);
	w = open_nb(p, UP_WR);
	fd = pollfd_or_skip(w);
	while (up_write(w, big, sizeof(big)) > 0)
		;
	CHECK_EQ(up_poll_arm(w), 0);
	CHECK_SYS(kill(child, SIGKILL));
	CHECK_EQ(wait_fd(fd, POLL_MS), 1);
	CHECK_EQ(waitpid(child, NULL, 0), child);
	/* The write that follows the readiness notices: no reader left. */
	CHECK_EQ(up_write(w, big, 1), -EPIPE);
	up_close(w);
	up_pipe_release(p);
	close(go[0]);
	close(go[1]);
}

static void own_ring_prep_poll(void)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = POLL_MS / 1000 };
	struct up_pipe *p;
	struct up_end *r, *w;
	struct actor a;
	char buf[16];

	if (io_uring_queue_init(8, &ring, 0) < 0)
		SKIP("io_uring refused on this host");
	CHECK_OK(up_pipe_create(NULL, &p));
	r = open_nb(p, UP_RD);
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
	sqe = io_uring_get_sqe(&ring);
	CHECK(sqe != NULL);
	CHECK_EQ(up_uring_prep_poll(r, sqe), 0);
	io_uring_sqe_set_data64(sqe, 42);
	CHECK(io_uring_submit(&ring) == 1);
	/* Nothing written yet: the SQE must still be pending. */
	CHECK_EQ(io_uring_peek_cqe(&ring, &cqe), -EAGAIN);
	actor_start(&a, w, 0);
	actor_go(&a);
	CHECK_EQ(io_uring_wait_cqe_timeout(&ring, &cqe, &ts), 0);
	CHECK_EQ(io_uring_cqe_get_data64(cqe), 42);
	/* -EINVAL here would mean the kernel rejected our SQE encoding. */
	CHECK(cqe->res == 0 || cqe->res == -EAGAIN);
	io_uring_cqe_seen(&ring, cqe);
	actor_join(&a);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	/* Data present: nothing to prepare. */
	CHECK_EQ(up_write(w, "y", 1), 1);
	sqe = io_uring_get_sqe(&ring);
	CHECK_EQ(up_uring_prep_poll(r, sqe), 1);
	io_uring_prep_nop(sqe);
	CHECK(io_uring_submit(&ring) == 1);
	CHECK_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
	io_uring_cqe_seen(&ring, cqe);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
	io_uring_queue_exit(&ring);
}

/* The fallback has poll mode too (futex_waitv(2), Linux 5.16+): the same fd
 * every time, and an arm that waits. */
static void futex_backend_has_pollfd(void)
{
	struct up_pipe *p;
	struct up_end *r;
	struct up_stats st;
	int fd;

	/* Only meaningful when the fallback is forced (as wake_select.c reads
	 * UP_FORCE_FUTEX: set, not empty, not "0"). */
	const char *v = getenv("UP_FORCE_FUTEX");

	if (!v || !*v || strcmp(v, "0") == 0)
		return;
	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK | UP_NO_EARLY, &r));
	CHECK_OK(up_stats(p, &st));
	CHECK(strcmp(st.backend, "futex") == 0);
	fd = pollfd_or_skip(r);
	CHECK_EQ(up_pollfd(r), fd);
	CHECK_EQ(up_poll_arm(r), 0);
	CHECK_EQ(wait_fd(fd, 0), 0);
	up_close(r);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	harness_fail_on_sigpipe();
	RUN(futex_backend_has_pollfd);
	RUN(reader_wakes_on_data);
	RUN(woken_reader_reads_without_a_syscall);
	RUN(in_process_wake_is_one_epoll_wait);
	RUN(poke_reaches_only_armed_rings);
	RUN(closed_poll_ring_is_never_poked);
	RUN(armed_reader_does_not_swallow_a_wake);
	RUN(rearm_after_a_poke_takes_up_the_wait);
	RUN(parked_wait_takes_no_wake_for_one);
	RUN(arm_that_finds_data_lets_a_completed_park_go);
	RUN(woken_writer_parks_nothing);
	RUN(old_arm_gets_its_futex_wake);
	RUN(small_write_disarms_the_writer);
	RUN(poll_writer_waits_for_the_lock);
	RUN(blocked_writer_is_not_left_behind_a_poller);
	RUN(dead_armed_writer_is_taken_off_the_lock);
	RUN(poll_writer_waits_for_a_bias_owner);
	RUN(no_reader_left_is_not_waited_for);
	RUN(arm_passes_a_dead_holder);
	RUN(poll_writers_under_contention);
	RUN(dead_armed_reader_is_taken_off_the_line);
	RUN(reader_wakes_on_eof);
	RUN(writer_wakes_on_room);
	RUN(writer_wakes_on_dead_reader_process);
	RUN(own_ring_prep_poll);
	return 0;
}
