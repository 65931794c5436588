/* SPDX-License-Identifier: MIT */
/*
 * test_blocking.c - a blocked call is woken by what its peer does: a writer
 * blocked on a full pipe by a reader draining it, or by the last reader
 * closing (-EPIPE); a reader (or a peek) blocked on an empty pipe by a
 * write, or by the last writer closing (end of stream). A lost wakeup hangs
 * the case and the watchdog fails it.
 *
 * Each case uses a handshake flag set by the blocked thread right before it
 * calls into the library; the other thread then proceeds. Whether the first
 * thread is already asleep or not yet inside the call, the library must not
 * lose the wakeup. To make it likely that the sleeping path is really taken,
 * the waker additionally waits (bounded, never for correctness) until the
 * pipe's `waits` statistic moves.
 */
#include "sem_common.h"

static uint64_t waits_of(struct up_pipe *p)
{
	struct up_stats st;

	CHECK_OK(up_stats(p, &st));
	return st.waits;
}

/* Raises the odds that a peer thread is really asleep in the library (the
 * `waits` statistic moved) before we act. Bounded; correctness never
 * depends on it. Returns whether a sleep was observed. */
static bool nudge_until_asleep(struct up_pipe *p, uint64_t waits_before)
{
	double until = harness_now() + 0.25;

	while (harness_now() < until) {
		if (waits_of(p) > waits_before)
			return true;
		sched_yield();
	}
	return false;
}

static void spin_until(atomic_int *flag)
{
	while (atomic_load_explicit(flag, memory_order_acquire) == 0)
		sched_yield();
}

struct blk_arg {
	struct up_end *e;
	atomic_int started;
	uint64_t seed, off;
	size_t len;
	ssize_t ret;
	uint8_t buf[256];
};

/* Starts @fn (a blk_* thread) on @a and returns once it has said it is
 * about to call into the library, after a bounded wait for it to be seen
 * asleep there (nudge_until_asleep): returns whether it was. */
static bool start_blocked(struct up_pipe *p, pthread_t *t, void *(*fn)(void *),
			  struct blk_arg *a)
{
	uint64_t w0 = waits_of(p);

	CHECK(pthread_create(t, NULL, fn, a) == 0);
	spin_until(&a->started);
	return nudge_until_asleep(p, w0);
}

static void *blk_writer(void *arg)
{
	struct blk_arg *a = arg;
	uint8_t *buf = malloc(a->len);

	CHECK(buf != NULL);
	harness_fill(a->seed, a->off, buf, a->len);
	atomic_store_explicit(&a->started, 1, memory_order_release);
	a->ret = up_write(a->e, buf, a->len);
	free(buf);
	return NULL;
}

static void blocking_writer_woken_by_reader(void)
{
	int round, slept = 0;

	for (round = 0; round < 8; round++) {
		struct up_pipe *p = mk_pipe(32 * KiB, 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct up_end *wnb = mk_end(p, UP_WR | UP_NONBLOCK);
		struct blk_arg a;
		size_t full;
		pthread_t t;

		full = fill_nb(wnb, 21, 0);
		CHECK_EQ(full, up_capacity(p));
		CHECK_OK(up_close(wnb)); /* w keeps the stream open */
		memset(&a, 0, sizeof(a));
		a.e = w;
		a.seed = 21;
		a.off = full;
		a.len = round % 2 ? 100 : 3 * 4096 + 123;
		slept += start_blocked(p, &t, blk_writer, &a);
		/* the reader drains: the blocked writer must wake and finish */
		read_pat(r, 21, 0, full + a.len);
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(a.ret, (ssize_t)a.len);
		CHECK_OK(up_close(w));
		CHECK_EQ(up_read(r, a.buf, 1), 0);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
	printf("# blocking_writer_woken_by_reader: writer seen asleep in %d/8 rounds\n", slept);
}

static void *blk_reader(void *arg)
{
	struct blk_arg *a = arg;

	atomic_store_explicit(&a->started, 1, memory_order_release);
	a->ret = up_read(a->e, a->buf, sizeof(a->buf));
	return NULL;
}

static void blocking_reader_woken_by_writer(void)
{
	int round, slept = 0;

	for (round = 0; round < 16; round++) {
		struct up_pipe *p = mk_pipe(0, round % 2 ? 64 * KiB : 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct blk_arg a;
		pthread_t t;

		memset(&a, 0, sizeof(a));
		a.e = r;
		slept += start_blocked(p, &t, blk_reader, &a);
		CHECK_EQ(up_write(w, "wake!", 5), 5);
		CHECK(pthread_join(t, NULL) == 0);
		CHECK(a.ret >= 1 && a.ret <= 5);
		CHECK(memcmp(a.buf, "wake!", (size_t)a.ret) == 0);
		if (a.ret < 5) {
			char rest[5];

			CHECK_EQ(up_read(r, rest, 5), 5 - a.ret);
			CHECK(memcmp(rest, &"wake!"[a.ret], (size_t)(5 - a.ret)) == 0);
		}
		CHECK_OK(up_close(w));
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
	printf("# blocking_reader_woken_by_writer: reader seen asleep in %d/16 rounds\n", slept);
}

static void blocking_reader_woken_by_last_writer_close(void)
{
	int round, slept = 0;

	for (round = 0; round < 16; round++) {
		struct up_pipe *p = mk_pipe(0, round % 2 ? 64 * KiB : 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct up_end *w2 = mk_end(p, UP_WR);
		struct blk_arg a;
		pthread_t t;

		/* a second writer that closes first: not the last one */
		CHECK_OK(up_close(w2));
		memset(&a, 0, sizeof(a));
		a.e = r;
		a.ret = -12345;
		slept += start_blocked(p, &t, blk_reader, &a);
		CHECK_OK(up_close(w));
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(a.ret, 0);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
	printf("# blocking_reader_woken_by_last_writer_close: reader seen asleep in %d/16 rounds\n",
	       slept);
}

static void *blk_peeker(void *arg)
{
	struct blk_arg *a = arg;
	struct iovec iov[4];
	int cnt = 4;

	atomic_store_explicit(&a->started, 1, memory_order_release);
	a->ret = up_peek(a->e, iov, &cnt);
	return NULL;
}

static void blocking_peek_woken_by_last_writer_close(void)
{
	int round;

	for (round = 0; round < 8; round++) {
		struct up_pipe *p = mk_pipe(0, 0);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct blk_arg a;
		pthread_t t;

		memset(&a, 0, sizeof(a));
		a.e = r;
		a.ret = -12345;
		start_blocked(p, &t, blk_peeker, &a);
		CHECK_OK(up_close(w));
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(a.ret, 0);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

static void blocking_writer_woken_by_last_reader_close(void)
{
	int round;

	for (round = 0; round < 8; round++) {
		struct up_pipe *p = mk_pipe(16 * KiB, 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct up_end *wnb = mk_end(p, UP_WR | UP_NONBLOCK);
		struct blk_arg a;
		pthread_t t;

		CHECK_EQ(fill_nb(wnb, 22, 0), up_capacity(p));
		CHECK_OK(up_close(wnb));
		memset(&a, 0, sizeof(a));
		a.e = w;
		a.seed = 22;
		a.len = round % 2 ? 10 : 3 * 4096;
		a.ret = -12345;
		start_blocked(p, &t, blk_writer, &a);
		CHECK_OK(up_close(r));
		CHECK(pthread_join(t, NULL) == 0);
		/* full pipe, no progress possible: the writer gets -EPIPE */
		CHECK_EQ(a.ret, -EPIPE);
		CHECK_OK(up_close(w));
		up_pipe_release(p);
	}
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(blocking_writer_woken_by_reader);
	RUN(blocking_reader_woken_by_writer);
	RUN(blocking_reader_woken_by_last_writer_close);
	RUN(blocking_peek_woken_by_last_writer_close);
	RUN(blocking_writer_woken_by_last_reader_close);
	return 0;
}
