/* SPDX-License-Identifier: MIT */
/*
 * test_coalesce.c - read coalescing (core/ring.c, coalesce()) is entered by
 * up_read and by up_peek alike.
 *
 * A reader that keeps finding data without waiting, and takes all of it,
 * counts a streak; from UP_STREAK_MIN on it waits briefly for whole pages
 * instead of copying the writer's partial page line by line. The streak
 * ends when that wait runs out, when the reader had to sleep for data, when
 * a non-blocking read found nothing, and when the caller's buffer was full;
 * a short spin for data does not end it. up_peek
 * compared the spans it found with the caller's vector after overwriting
 * the latter, so its streak never grew and a zero-copy reader never
 * coalesced (half the copy path's speed at 100-byte writes). These checks
 * look at the streak itself: whether coalescing pays is for the benchmark.
 * The last one checks the bytes of the page a coalescing reader copies
 * downwards (read_locked(), UP_READ_DOWN).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "up_int.h"

/* Writes and reads of 100 bytes, one at a time: each read finds its data
 * without waiting and leaves the caller's buffer room, so each counts. */
static void read_rounds(struct up_end *e[2], int n)
{
	char msg[100], buf[4096];

	memset(msg, 'r', sizeof(msg));
	for (int i = 0; i < n; i++) {
		CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		CHECK_EQ(up_read(e[0], buf, sizeof(buf)), (ssize_t)sizeof(msg));
	}
}

static void peek_rounds(struct up_end *e[2], int n)
{
	char msg[100];

	memset(msg, 'p', sizeof(msg));
	for (int i = 0; i < n; i++) {
		struct iovec iov[4];
		int cnt = 4;

		CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg));
		CHECK_EQ(cnt, 1);
		CHECK(memcmp(iov[0].iov_base, msg, sizeof(msg)) == 0);
		CHECK_OK(up_consume(e[0], sizeof(msg)));
	}
}

static void read_builds_a_streak(void)
{
	struct up_end *e[2];
	char msg[100], buf[4096];

	memset(msg, 'r', sizeof(msg));
	CHECK_OK(up_pipe2(e, NULL));
	read_rounds(e, UP_STREAK_MIN);
	CHECK_EQ(e[0]->streak, UP_STREAK_MIN);
	/* Now coalescing: the read waits for a page that never comes (head
	 * does not move), gives up, and starts a new streak with this read. */
	read_rounds(e, 1);
	CHECK_EQ(e[0]->streak, 1);
	/* A read that fills the caller's buffer is not keeping up: reset. */
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(up_read(e[0], buf, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(e[0]->streak, 0);
	up_close(e[1]);
	up_close(e[0]);
}

static void peek_builds_a_streak(void)
{
	struct up_end *e[2];
	char msg[100];

	memset(msg, 'p', sizeof(msg));
	CHECK_OK(up_pipe2(e, NULL));
	peek_rounds(e, UP_STREAK_MIN);
	CHECK_EQ(e[0]->streak, UP_STREAK_MIN);
	peek_rounds(e, 1); /* as for read: the coalescing wait runs out */
	CHECK_EQ(e[0]->streak, 1);
	/* A peek that fills the caller's vector is not keeping up: reset. */
	{
		struct iovec iov[1];
		int cnt = 1;

		CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg));
		CHECK_EQ(cnt, 1);
		CHECK_EQ(e[0]->streak, 0);
		CHECK_OK(up_consume(e[0], sizeof(msg)));
	}
	up_close(e[1]);
	up_close(e[0]);
}

struct sleeper {
	struct up_end *r;
	ssize_t got;
};

static void *sleeper_read(void *arg)
{
	struct sleeper *s = arg;
	char buf[4096];

	s->got = up_read(s->r, buf, sizeof(buf));
	return NULL;
}

/* A reader that had to sleep for its data is not keeping up with a
 * streaming writer: the streak ends, and the next reads do not coalesce. A
 * non-blocking read that finds nothing ends it too. */
static void a_sleep_ends_the_streak(void)
{
	struct up_end *e[2], *nb;
	struct sleeper s;
	pthread_t th;
	uint64_t w0;
	char c;

	CHECK_OK(up_pipe2(e, NULL));
	/* One read short of coalescing, so that no coalescing wait runs out
	 * and ends the streak before the sleep does. */
	read_rounds(e, UP_STREAK_MIN - 1);
	CHECK_EQ(e[0]->streak, UP_STREAK_MIN - 1);
	s.r = e[0];
	w0 = atomic_load(&e[0]->c.waits);
	CHECK_EQ(pthread_create(&th, NULL, sleeper_read, &s), 0);
	{
		double until = harness_now() + 10;

		while (atomic_load(&e[0]->c.waits) == w0) { /* asleep, not spinning */
			CHECK(harness_now() < until);
			sched_yield();
		}
	}
	CHECK_EQ(up_write(e[1], "x", 1), 1);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(s.got, 1);
	CHECK_EQ(e[0]->streak, 0);

	CHECK_OK(up_open(up_end_pipe(e[0]), UP_RD | UP_NONBLOCK, &nb));
	read_rounds((struct up_end *[]){ nb, e[1] }, UP_STREAK_MIN - 1);
	CHECK_EQ(nb->streak, UP_STREAK_MIN - 1);
	CHECK_EQ(up_read(nb, &c, 1), -EAGAIN);
	CHECK_EQ(nb->streak, 0);
	peek_rounds((struct up_end *[]){ nb, e[1] }, UP_STREAK_MIN - 1);
	CHECK_EQ(nb->streak, UP_STREAK_MIN - 1);
	{
		struct iovec iov[1];
		int cnt = 1;

		CHECK_EQ(up_peek(nb, iov, &cnt), -EAGAIN);
	}
	CHECK_EQ(nb->streak, 0);
	up_close(nb);
	up_close(e[1]);
	up_close(e[0]);
}

/* Byte @j of the @i-th 100-byte record: no two records look alike. */
static unsigned char rec_byte(int i, int j)
{
	return (unsigned char)(i * 131 + j * 7 + (i >> 8));
}

/*
 * A coalescing reader copies the page just below the writer's from its end
 * down. Every byte must still land where an upward copy puts it: into one
 * buffer, and across iovecs that split the page (copied upwards then). The
 * iovecs lie apart, with guard bytes between them that must stay as they
 * were.
 */
static void down_copy_keeps_every_byte(void)
{
	static const size_t split[][3] = { { 8192, 0, 0 }, { 37, 1000, 8192 } };
	enum { GAP = 64, GUARD = 0xa5 };

	for (size_t v = 0; v < sizeof(split) / sizeof(split[0]); v++) {
		static unsigned char mem[3 * GAP + 8192 + 1000 + 37];
		unsigned char got[8192 + 1000 + 37];
		struct iovec iov[3];
		struct up_end *e[2];
		unsigned char msg[100];
		size_t ps, first, at = GAP, n = 0;
		int cnt = 0, i, nrec;

		CHECK_OK(up_pipe2(e, NULL));
		ps = up_page_size(up_end_pipe(e[0]));
		read_rounds(e, UP_STREAK_MIN);
		CHECK_EQ(e[0]->streak, UP_STREAK_MIN);
		/* Fill the rest of the first page and start a second one. */
		first = UP_STREAK_MIN * sizeof(msg);
		nrec = (int)((ps - first) / sizeof(msg)) + 1;
		for (i = 0; i < nrec; i++) {
			for (int j = 0; j < (int)sizeof(msg); j++)
				msg[j] = rec_byte(i, j);
			CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		}
		memset(mem, GUARD, sizeof(mem));
		for (int x = 0; x < 3 && split[v][x]; x++) {
			iov[x].iov_base = mem + at;
			iov[x].iov_len = split[v][x];
			at += split[v][x] + GAP;
			cnt++;
		}
		/* Whole pages only: the first page, not the record in the
		 * second (which shows the read coalesced). */
		CHECK_EQ(up_readv(e[0], iov, cnt), (ssize_t)((nrec - 1) * sizeof(msg)));
		/* The bytes, gathered from the iovecs; the guards, untouched. */
		for (int x = 0; x < cnt; x++) {
			memcpy(got + n, iov[x].iov_base, iov[x].iov_len);
			n += iov[x].iov_len;
			for (size_t g = 1; g <= GAP; g++)
				CHECK_EQ(((unsigned char *)iov[x].iov_base)[-(ptrdiff_t)g], GUARD);
		}
		for (i = 0; i < nrec - 1; i++)
			for (int j = 0; j < (int)sizeof(msg); j++)
				CHECK_EQ(got[i * sizeof(msg) + (size_t)j], rec_byte(i, j));
		for (size_t g = (size_t)(nrec - 1) * sizeof(msg); g < n; g++)
			CHECK_EQ(got[g], GUARD); /* beyond what was read */
		CHECK_EQ(up_read(e[0], got, sizeof(got)), (ssize_t)sizeof(msg));
		for (int j = 0; j < (int)sizeof(msg); j++)
			CHECK_EQ(got[j], rec_byte(nrec - 1, j));
		up_close(e[1]);
		up_close(e[0]);
	}
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(30);
	RUN(read_builds_a_streak);
	RUN(peek_builds_a_streak);
	RUN(a_sleep_ends_the_streak);
	RUN(down_copy_keeps_every_byte);
	return 0;
}
