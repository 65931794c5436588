/* SPDX-License-Identifier: MIT */
/*
 * test_poll_libuv.c - up_pollfd() in a libuv loop (uv_poll_t), on whichever
 * backend the environment gives (registered with UP_FORCE_FUTEX=1 and
 * without). One loop drives a poll-mode reader of pipe A, fed by a thread,
 * and a poll-mode writer of pipe B, drained by a thread, through small pipes
 * so that both arm again and again. A readiness that never comes stops the
 * loop by its 10 s timer and fails the case.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "uringpipe.h"

#define RECS 20000

struct side {
	struct up_end *e;
	uv_poll_t h;
	uint32_t next;  /* next record to read (A) or write (B) */
	int arms;
	bool done;
};

static struct side A, B;
static uv_timer_t guard;
static bool timed_out;

static void stop_if_done(void)
{
	if (A.done && B.done) {
		uv_timer_stop(&guard);
		uv_close((uv_handle_t *)&guard, NULL);
	}
}

/* Arm after -EAGAIN: 0 wait for the fd, 1 go round again now. */
static int arm(struct side *s)
{
	int r = up_poll_arm(s->e);

	CHECK(r == 0 || r == 1);
	if (r == 0)
		s->arms++;
	return r;
}

static void on_a(uv_poll_t *h, int status, int events)
{
	uint32_t v[256];

	(void)events;
	CHECK_EQ(status, 0);
	for (;;) {
		ssize_t n = up_read(A.e, v, sizeof(v));

		if (n == 0) {
			CHECK_EQ(A.next, RECS);
			A.done = true;
			uv_poll_stop(h);
			uv_close((uv_handle_t *)h, NULL);
			stop_if_done();
			return;
		}
		if (n == -EAGAIN) {
			if (arm(&A) == 1)
				continue;
			return;
		}
		CHECK(n > 0 && n % 4 == 0);
		for (ssize_t i = 0; i < n / 4; i++)
			CHECK_EQ(v[i], A.next++);
	}
}

static void on_b(uv_poll_t *h, int status, int events)
{
	(void)events;
	CHECK_EQ(status, 0);
	while (B.next < RECS) {
		ssize_t n = up_write(B.e, &B.next, sizeof(B.next));

		if (n == -EAGAIN) {
			if (arm(&B) == 1)
				continue;
			return;
		}
		CHECK_EQ(n, (ssize_t)sizeof(B.next));
		B.next++;
	}
	B.done = true;
	uv_poll_stop(h);
	uv_close((uv_handle_t *)h, NULL);
	stop_if_done();
}

static void on_guard(uv_timer_t *t)
{
	(void)t;
	timed_out = true;
	uv_stop(t->loop);
}

struct feeder {
	struct up_end *e;
	uint32_t got;
};

static void *feed_a(void *arg)
{
	struct feeder *f = arg;

	for (uint32_t i = 0; i < RECS; i++) {
		CHECK_EQ(up_write(f->e, &i, sizeof(i)), (ssize_t)sizeof(i));
		if ((i & 15) == 0) /* bursts, so that the reader runs dry */
			usleep(20);
	}
	up_close(f->e);
	return NULL;
}

static void *drain_b(void *arg)
{
	struct feeder *f = arg;
	uint32_t v[64];
	ssize_t n;

	while ((n = up_read(f->e, v, sizeof(v))) > 0) {
		for (ssize_t i = 0; i < n / 4; i++)
			CHECK_EQ(v[i], f->got++);
		usleep(20); /* slower than the writer, so that it finds no room */
	}
	CHECK_EQ(n, 0);
	return NULL;
}

static void libuv_loop(void)
{
	struct up_config cfg;
	struct up_pipe *pa, *pb;
	struct feeder fa = { 0 }, fb = { 0 };
	pthread_t ta, tb;
	uv_loop_t loop;
	struct up_stats st;
	int fd;

	up_config_init(&cfg);
	cfg.capacity = 16 * 1024;
	cfg.page_size = 4096;
	CHECK_OK(up_pipe_create(&cfg, &pa));
	CHECK_OK(up_pipe_create(&cfg, &pb));
	CHECK_OK(up_open(pa, UP_RD | UP_NONBLOCK, &A.e));
	CHECK_OK(up_open(pa, UP_WR, &fa.e));
	CHECK_OK(up_open(pb, UP_WR | UP_NONBLOCK, &B.e));
	CHECK_OK(up_open(pb, UP_RD, &fb.e));
	CHECK_EQ(uv_loop_init(&loop), 0);
	fd = up_pollfd(A.e);
	if (fd == -EOPNOTSUPP)
		SKIP("up_pollfd: neither io_uring nor futex_waitv(2) here");
	CHECK_OK(fd);
	CHECK_EQ(uv_poll_init(&loop, &A.h, fd), 0);
	fd = up_pollfd(B.e);
	CHECK_OK(fd);
	CHECK_EQ(uv_poll_init(&loop, &B.h, fd), 0);
	CHECK_EQ(uv_poll_start(&A.h, UV_READABLE, on_a), 0);
	CHECK_EQ(uv_poll_start(&B.h, UV_READABLE, on_b), 0);
	CHECK_EQ(uv_timer_init(&loop, &guard), 0);
	CHECK_EQ(uv_timer_start(&guard, on_guard, 10000, 0), 0);
	/* Both sides act only once armed: the loop's first callbacks arm. */
	CHECK_EQ(up_poll_arm(A.e), 0);
	on_b(&B.h, 0, UV_READABLE);
	CHECK_EQ(pthread_create(&ta, NULL, feed_a, &fa), 0);
	CHECK_EQ(pthread_create(&tb, NULL, drain_b, &fb), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK(!timed_out);
	CHECK(A.done && B.done);
	CHECK_EQ(pthread_join(ta, NULL), 0);
	up_close(B.e);
	CHECK_EQ(pthread_join(tb, NULL), 0);
	CHECK_EQ(fb.got, RECS);
	CHECK_OK(up_stats(pa, &st));
	printf("# libuv on %s: reader armed %d times, writer %d times\n", st.backend, A.arms,
	       B.arms);
	CHECK(A.arms > 0 && B.arms > 0);
	CHECK_EQ(uv_loop_close(&loop), 0);
	up_close(A.e);
	up_close(fb.e);
	up_pipe_release(pa);
	up_pipe_release(pb);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	harness_fail_on_sigpipe();
	RUN(libuv_loop);
	return 0;
}
