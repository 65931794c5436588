/* SPDX-License-Identifier: MIT */
/*
 * mode_reader.h - a reader thread in one of the three ways a program reads
 * a pipe: blocking, non-blocking retrying now and then, or poll mode
 * (up_pollfd + up_poll_arm + poll(2)). It checks every byte against the
 * harness pattern and reads to end of stream.
 */
#ifndef UP_TESTS_MODE_READER_H
#define UP_TESTS_MODE_READER_H

#include <poll.h>

#include "harness.h"

enum reader_mode { READ_BLOCKING, READ_NONBLOCK, READ_POLL };

struct mode_reader {
	struct up_end *e;     /* opened UP_NONBLOCK unless READ_BLOCKING */
	enum reader_mode mode;
	uint64_t pat_seed;    /* the writer fills with harness_fill(pat_seed, ...) */
	uint64_t rng_seed;    /* 0: reads of max bytes; else sizes 1 .. max */
	size_t max;           /* at most 1 MiB */
	uint64_t got, bad;    /* bytes read; reads that did not match */
	ssize_t last;         /* 0 at end of stream */
};

static HARNESS_UNUSED void *mode_reader_main(void *arg)
{
	struct mode_reader *rd = (struct mode_reader *)arg;
	/* Thread-local on purpose: a host with 1 MiB of static TLS must still
	 * get the futex backend's helper thread (pollfd_futex.c, spawn()). */
	static _Thread_local char buf[1 << 20];
	struct pollfd pfd = { .fd = -1, .events = POLLIN };
	struct harness_rng rng;
	ssize_t n;

	CHECK(rd->max > 0 && rd->max <= sizeof(buf));
	harness_rng_seed(&rng, rd->rng_seed);
	if (rd->mode == READ_POLL) {
		pfd.fd = up_pollfd(rd->e);
		CHECK(pfd.fd >= 0);
	}
	for (;;) {
		size_t want = rd->rng_seed ? (size_t)harness_rng_range(&rng, 1, rd->max) : rd->max;

		n = up_read(rd->e, buf, want);
		if (n > 0) {
			rd->bad += harness_verify(rd->pat_seed, rd->got, buf, (size_t)n) !=
				   (size_t)-1;
			rd->got += (uint64_t)n;
			continue;
		}
		if (n != -EAGAIN)
			break;
		if (rd->mode == READ_NONBLOCK) {
			usleep(300); /* a program that looks now and then */
			continue;
		}
		n = up_poll_arm(rd->e);
		if (n == 1)
			continue;
		CHECK_EQ(n, 0);
		CHECK(poll(&pfd, 1, -1) == 1);
	}
	rd->last = n;
	return NULL;
}

#endif /* UP_TESTS_MODE_READER_H */
