/* SPDX-License-Identifier: MIT */
/*
 * test_timeout.c - up_set_timeout() (blocking calls give -ETIMEDOUT after
 * the time asked, measured, not slept) and up_wakeup() (a call blocked on an
 * end, or the next one to block, returns -ECANCELED at once), on both
 * backends (test_timeout_futex).
 */
#include "sem_common.h"

struct blocked {
	struct up_end *e;
	bool write;
	size_t len;
	_Atomic pid_t tid;
	ssize_t res;
	double t_end;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	static char buf[256 * 1024];

	atomic_store(&b->tid, (pid_t)syscall(SYS_gettid));
	b->res = b->write ? up_write(b->e, buf, b->len) : up_read(b->e, buf, b->len);
	b->t_end = harness_now();
	return NULL;
}

static void read_times_out(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	char c;
	double t0, dt;

	CHECK_OK(up_set_timeout(r, 200));
	t0 = harness_now();
	CHECK_EQ(up_read(r, &c, 1), -ETIMEDOUT);
	dt = harness_now() - t0;
	printf("#   read timed out after %.1f ms (asked 200)\n", dt * 1e3);
	CHECK(dt >= 0.200);
	CHECK(dt < 0.200 + 0.5);
	/* 0: at the first wait */
	CHECK_OK(up_set_timeout(r, 0));
	t0 = harness_now();
	CHECK_EQ(up_read(r, &c, 1), -ETIMEDOUT);
	CHECK(harness_now() - t0 < 0.1);
	/* data first: no timeout */
	CHECK_EQ(up_write(w, "z", 1), 1);
	CHECK_EQ(up_read(r, &c, 1), 1);
	/* -1: no timeout again; the writer's close ends the wait */
	CHECK_OK(up_set_timeout(r, -1));
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, &c, 1), 0);
	CHECK_EQ(up_set_timeout(r, -2), -EINVAL);
	CHECK_EQ(up_set_timeout(NULL, 10), -EINVAL);
	up_close(r);
	up_pipe_release(p);
}

/* A write into a full pipe times out; one that moved bytes first returns
 * them, and the rest is not lost: it was never taken. */
static void write_times_out_keeping_bytes(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	uint8_t *buf = malloc(128 * KiB);
	double t0, dt;
	ssize_t n;
	bool eof;

	CHECK(buf != NULL);
	harness_fill(81, 0, buf, 128 * KiB);
	CHECK_OK(up_set_timeout(w, 100));
	t0 = harness_now();
	n = up_write(w, buf, 128 * KiB);
	dt = harness_now() - t0;
	CHECK_EQ(n, (ssize_t)(64 * KiB)); /* what fitted */
	CHECK(dt >= 0.100);
	t0 = harness_now();
	CHECK_EQ(up_write(w, buf + n, 128 * KiB - (size_t)n), -ETIMEDOUT);
	dt = harness_now() - t0;
	printf("#   write timed out after %.1f ms (asked 100)\n", dt * 1e3);
	CHECK(dt >= 0.100 && dt < 0.100 + 0.5);
	CHECK_EQ(drain_pat(r, 81, 0, &eof), 64 * KiB);
	CHECK(!eof);
	free(buf);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A commit held up by another writer's open reservation times out and
 * keeps its reservation: committed again later, nothing is lost. */
static void commit_times_out_keeping_reservation(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
	struct up_end *a = mk_end(p, UP_WR), *b = mk_end(p, UP_WR);
	struct iovec va[4], vb[4];
	int na = 4, nb = 4;
	char buf[8192];
	ssize_t got;

	CHECK_EQ(up_write(a, "x", 1), 1); /* a page with room to merge into */
	CHECK_EQ(up_read(r, buf, 1), 1);
	CHECK_EQ(up_reserve(a, 10, va, &na), 10); /* holds the writers' lock */
	CHECK_EQ(up_reserve(b, 4096, vb, &nb), 4096); /* a page of its own */
	memset(vb[0].iov_base, 'B', 4096);
	CHECK_OK(up_set_timeout(b, 50));
	CHECK_EQ(up_commit(b, 4096), -ETIMEDOUT);
	memset(va[0].iov_base, 'A', 10);
	CHECK_OK(up_commit(a, 10));
	CHECK_OK(up_commit(b, 4096)); /* the same reservation */
	got = up_read(r, buf, sizeof(buf));
	CHECK_EQ(got, 10 + 4096);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(buf[i], 'A');
	for (int i = 10; i < 10 + 4096; i++)
		CHECK_EQ(buf[i], 'B');
	up_close(a);
	up_close(b);
	up_close(r);
	up_pipe_release(p);
}

/* up_wakeup() from another thread ends a blocked read, and a blocked write,
 * at once. */
static void wakeup_ends_blocked_calls(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct blocked br = { .e = r, .write = false, .len = 16 };
	struct blocked bw = { .e = w, .write = true, .len = 256 * KiB };
	pthread_t t;
	double t0;

	CHECK_EQ(pthread_create(&t, NULL, blocked_main, &br), 0);
	harness_wait_asleep(&br.tid);
	t0 = harness_now();
	CHECK_OK(up_wakeup(r));
	CHECK_EQ(pthread_join(t, NULL), 0);
	printf("#   blocked read woken after %.1f us\n", (br.t_end - t0) * 1e6);
	CHECK_EQ(br.res, -ECANCELED);
	CHECK(br.t_end - t0 < 0.040); /* well under one 50 ms sleep slice */

	CHECK_EQ(pthread_create(&t, NULL, blocked_main, &bw), 0);
	harness_wait_asleep(&bw.tid);
	t0 = harness_now();
	CHECK_OK(up_wakeup(w));
	CHECK_EQ(pthread_join(t, NULL), 0);
	printf("#   blocked write woken after %.1f us\n", (bw.t_end - t0) * 1e6);
	CHECK_EQ(bw.res, (ssize_t)(64 * KiB)); /* what fitted before it blocked */
	CHECK(bw.t_end - t0 < 0.040);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/* A wakeup with nothing blocked is kept for the next call that would block;
 * a call that does not block leaves it; it is used once. */
static void wakeup_waits_for_the_next_block(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	char c;

	CHECK_OK(up_wakeup(r));
	CHECK_EQ(up_write(w, "ab", 2), 2);
	CHECK_EQ(up_read(r, &c, 1), 1); /* data: no block, kick kept */
	CHECK_EQ(up_read(r, &c, 1), 1);
	CHECK_EQ(up_read(r, &c, 1), -ECANCELED);
	CHECK_OK(up_set_timeout(r, 20));
	CHECK_EQ(up_read(r, &c, 1), -ETIMEDOUT); /* used once */
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void wakeup_on_closed_end(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD);

	CHECK_OK(up_close(r));
	CHECK_EQ(up_wakeup(r), -EBADF); /* not an open end of this process */
	CHECK_EQ(up_wakeup(NULL), -EINVAL);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(read_times_out);
	RUN(write_times_out_keeping_bytes);
	RUN(commit_times_out_keeping_reservation);
	RUN(wakeup_ends_blocked_calls);
	RUN(wakeup_waits_for_the_next_block);
	RUN(wakeup_on_closed_end);
	return 0;
}
