/* SPDX-License-Identifier: MIT */
/*
 * test_lifecycle.c - a pipe's life around its ends: up_stats counts bytes,
 * calls and open ends (closed ends' bytes still count), the destructors
 * accept NULL, ends keep the pipe alive after up_pipe_release, and the
 * start order is free, as with pipe(2) and FIFOs: no end of stream before a
 * writer came, no EPIPE before a reader came.
 */
#include "sem_common.h"

static void stats_counts(void)
{
	static const size_t sz[] = { 100, 200, 300, 400, 500 };
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct up_stats st;
	uint64_t reads = 0;
	size_t i, total = 0;
	char buf[256];

	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.bytes_written, 0);
	CHECK_EQ(st.bytes_read, 0);
	CHECK_EQ(st.writes, 0);
	CHECK_EQ(st.reads, 0);
	CHECK_EQ(st.readers, 1);
	CHECK_EQ(st.writers, 1);
	CHECK(st.backend[0] != '\0');
	CHECK(memchr(st.backend, '\0', sizeof(st.backend)) != NULL);
	CHECK(strcmp(st.backend, "io_uring") == 0 || strcmp(st.backend, "io_uring-sqpoll") == 0 ||
	      strcmp(st.backend, "futex") == 0);

	for (i = 0; i < 5; i++) {
		write_pat(w, 51, total, sz[i]);
		total += sz[i];
	}
	total = 0;
	while (total < 1500) {
		ssize_t n = up_read(r, buf, sizeof(buf)); /* 256 at most: several reads */

		CHECK_OK(n);
		CHECK(n > 0);
		total += (size_t)n;
		reads++;
	}
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.bytes_written, 1500);
	CHECK_EQ(st.bytes_read, 1500);
	CHECK_EQ(st.writes, 5);
	CHECK_EQ(st.reads, reads);

	{
		struct up_end *w2 = mk_end(p, UP_WR), *r2 = mk_end(p, UP_RD);

		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.readers, 2);
		CHECK_EQ(st.writers, 2);
		CHECK_OK(up_close(w2));
		CHECK_OK(up_close(r2));
	}
	CHECK_OK(up_close(r));
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.readers, 0);
	CHECK_EQ(st.writers, 1);
	/* counters of closed endpoints still count */
	CHECK_EQ(st.bytes_read, 1500);
	CHECK_EQ(st.bytes_written, 1500);
	CHECK_OK(up_close(w));
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.writers, 0);
	CHECK_EQ(st.writes, 5);
	up_pipe_release(p);
}

static void destructors_accept_null(void)
{
	up_pipe_release(NULL);
	CHECK_EQ(up_close(NULL), 0);
}

static void release_before_close_keeps_ends(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct up_stats st;
	char c;

	up_pipe_release(p);
	/* the ends keep the mapping (and the pipe handle) alive */
	write_pat(w, 52, 0, 50000);
	read_pat(r, 52, 0, 50000);
	CHECK(up_end_pipe(r) != NULL);
	CHECK(up_end_pipe(r) == up_end_pipe(w));
	CHECK_OK(up_stats(up_end_pipe(r), &st));
	CHECK_EQ(st.bytes_written, 50000);
	CHECK_EQ(up_capacity(up_end_pipe(w)), 64 * KiB);
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, &c, 1), 0);
	CHECK_OK(up_close(r));
}

struct blocked_read {
	struct up_end *r;
	char buf[16];
	_Atomic pid_t tid;
	ssize_t res;
};

static void *blocked_read_main(void *arg)
{
	struct blocked_read *b = arg;

	atomic_store(&b->tid, (pid_t)syscall(SYS_gettid));
	b->res = up_read(b->r, b->buf, sizeof(b->buf));
	return NULL;
}

/* A reader that opens before any writer waits for one: a non-blocking read
 * says -EAGAIN, a blocking one sleeps until the first writer's data, and end
 * of stream comes only once that writer has closed. */
static void reader_before_any_writer_waits(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *rnb = mk_end(p, UP_RD | UP_NONBLOCK);
	struct blocked_read b = { .r = mk_end(p, UP_RD) };
	struct up_end *w;
	pthread_t t;
	char c;

	CHECK_EQ(up_read(rnb, &c, 1), -EAGAIN);
	CHECK_EQ(pthread_create(&t, NULL, blocked_read_main, &b), 0);
	harness_wait_asleep(&b.tid);
	CHECK_EQ(up_read(rnb, &c, 1), -EAGAIN); /* still no writer: not EOF */
	w = mk_end(p, UP_WR);
	CHECK_EQ(up_write(w, "hello", 5), 5);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(b.res, 5);
	CHECK(memcmp(b.buf, "hello", 5) == 0);
	CHECK_EQ(up_read(rnb, &c, 1), -EAGAIN); /* a writer is open */
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(rnb, &c, 1), 0);
	CHECK_EQ(up_read(b.r, &c, 1), 0);
	up_close(b.r);
	up_close(rnb);
	up_pipe_release(p);
}

/* A writer that opens before any reader is kept: writes fill the pipe up to
 * its capacity and then say -EAGAIN (not -EPIPE), and a reader that comes
 * later reads every byte. -EPIPE comes only once that reader has closed. */
static void writer_before_any_reader_keeps_data(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *w = mk_end(p, UP_WR | UP_NONBLOCK), *r;
	size_t in = fill_nb(w, 61, 0);
	bool eof;

	CHECK_EQ(in, up_capacity(p));
	CHECK_EQ(up_write(w, "x", 1), -EAGAIN);
	r = mk_end(p, UP_RD | UP_NONBLOCK);
	CHECK_EQ(drain_pat(r, 61, 0, &eof), in);
	CHECK(!eof);
	CHECK_EQ(up_write(w, "x", 1), 1);
	CHECK_OK(up_close(r));
	CHECK_EQ(up_write(w, "x", 1), -EPIPE);
	up_close(w);
	up_pipe_release(p);
}

/* Counts that came and left stay so: a second reader that opens after the
 * first closed makes writes succeed again, as a FIFO reopened does. */
static void side_that_returns_is_counted_again(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *w = mk_end(p, UP_WR | UP_NONBLOCK), *r = mk_end(p, UP_RD);
	struct up_stats st;

	CHECK_OK(up_close(r));
	CHECK_EQ(up_write(w, "x", 1), -EPIPE);
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.readers, 0);
	r = mk_end(p, UP_RD | UP_NONBLOCK);
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.readers, 1);
	CHECK_EQ(up_write(w, "y", 1), 1);
	up_close(r);
	up_close(w);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(stats_counts);
	RUN(destructors_accept_null);
	RUN(release_before_close_keeps_ends);
	RUN(reader_before_any_writer_waits);
	RUN(writer_before_any_reader_keeps_data);
	RUN(side_that_returns_is_counted_again);
	return 0;
}
