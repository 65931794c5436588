/* SPDX-License-Identifier: MIT */
/*
 * test_coalesce.c - read coalescing (core/ring.c, coalesce()) is entered by
 * up_read and by up_peek alike.
 *
 * A reader that keeps finding data without waiting, and takes all of it,
 * counts a streak; from UP_STREAK_MIN on it waits briefly for whole pages
 * instead of copying the writer's partial page line by line. up_peek
 * compared the spans it found with the caller's vector after overwriting
 * the latter, so its streak never grew and a zero-copy reader never
 * coalesced (half the copy path's speed at 100-byte writes). These checks
 * look at the streak itself: whether coalescing pays is for the benchmark.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "up_int.h"

#define ROUNDS 8

static void read_builds_a_streak(void)
{
	struct up_end *e[2];
	char msg[100], buf[4096];

	memset(msg, 'r', sizeof(msg));
	CHECK_OK(up_pipe2(e, NULL));
	for (int i = 0; i < ROUNDS; i++) {
		CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		CHECK_EQ(up_read(e[0], buf, sizeof(buf)), (ssize_t)sizeof(msg));
	}
	CHECK(e[0]->streak >= ROUNDS - 1);
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
	for (int i = 0; i < ROUNDS; i++) {
		struct iovec iov[4];
		int cnt = 4;

		CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg));
		CHECK_EQ(cnt, 1);
		CHECK(memcmp(iov[0].iov_base, msg, sizeof(msg)) == 0);
		CHECK_OK(up_consume(e[0], sizeof(msg)));
	}
	CHECK(e[0]->streak >= ROUNDS - 1);
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

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(30);
	RUN(read_builds_a_streak);
	RUN(peek_builds_a_streak);
	return 0;
}
