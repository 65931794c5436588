/* SPDX-License-Identifier: MIT */
/*
 * sem_common.h - helpers shared by the pipe(7) contract tests (test_rw,
 * test_eof, test_nonblock, test_blocking, test_args, test_zerocopy,
 * test_lifecycle, test_atomic), one executable per area.
 *
 * Every case in them is built so that it cannot pass vacuously: data is a
 * position-dependent pattern (loss, duplication and reordering all show),
 * error cases first establish that the same call succeeds in the good state,
 * and wakeup cases would hang (and be failed by the watchdog) if a wakeup
 * were lost.
 */
#ifndef UP_TESTS_SEM_COMMON_H
#define UP_TESTS_SEM_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>

#include "harness.h"
#include "uringpipe.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define UP_MAX_TEST_CAP (64 * MiB)

static HARNESS_UNUSED struct up_pipe *mk_pipe(size_t capacity, size_t page_size)
{
	struct up_config cfg;
	struct up_pipe *p = NULL;

	up_config_init(&cfg);
	cfg.capacity = capacity;
	cfg.page_size = page_size;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK(p != NULL);
	return p;
}

static HARNESS_UNUSED struct up_end *mk_end(struct up_pipe *p, int flags)
{
	struct up_end *e = NULL;

	CHECK_OK(up_open(p, flags, &e));
	CHECK(e != NULL);
	return e;
}

/* Blocking write of all @n bytes (short counts only after partial progress). */
static HARNESS_UNUSED void write_all(struct up_end *w, const void *buf, size_t n)
{
	const uint8_t *b = buf;

	while (n > 0) {
		ssize_t r = up_write(w, b, n);

		CHECK_OK(r);
		CHECK(r > 0 && (size_t)r <= n);
		b += r;
		n -= (size_t)r;
	}
}

static HARNESS_UNUSED void write_pat(struct up_end *w, uint64_t seed, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(n ? n : 1);

	CHECK(buf != NULL);
	harness_fill(seed, off, buf, n);
	write_all(w, buf, n);
	free(buf);
}

/* Reads exactly @n bytes (fails on EOF or error) and checks the pattern. */
static HARNESS_UNUSED void read_pat(struct up_end *r, uint64_t seed, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(64 * KiB);

	CHECK(buf != NULL);
	while (n > 0) {
		size_t ask = n < 64 * KiB ? n : 64 * KiB;
		ssize_t got = up_read(r, buf, ask);
		size_t bad;

		CHECK_OK(got);
		CHECK(got > 0); /* EOF before the expected bytes */
		CHECK((size_t)got <= ask);
		bad = harness_verify(seed, off, buf, (size_t)got);
		if (bad != (size_t)-1) {
			fprintf(stderr, "pattern mismatch at stream offset %llu\n",
				(unsigned long long)(off + bad));
			CHECK(0);
		}
		off += (uint64_t)got;
		n -= (size_t)got;
	}
	free(buf);
}

/* Non-blocking reader: reads until -EAGAIN (or EOF), verifying the pattern;
 * returns the bytes read. *eof is set when a 0 was seen. */
static HARNESS_UNUSED size_t drain_pat(struct up_end *r, uint64_t seed, uint64_t off, bool *eof)
{
	uint8_t *buf = malloc(64 * KiB);
	size_t total = 0;

	CHECK(buf != NULL);
	*eof = false;
	for (;;) {
		ssize_t got = up_read(r, buf, 64 * KiB);

		if (got == -EAGAIN)
			break;
		CHECK_OK(got);
		if (got == 0) {
			*eof = true;
			break;
		}
		CHECK_EQ(harness_verify(seed, off + total, buf, (size_t)got), (size_t)-1);
		total += (size_t)got;
	}
	free(buf);
	return total;
}

/* Fill a pipe through a non-blocking writer with 4096-byte writes until
 * -EAGAIN; returns the bytes that went in. */
static HARNESS_UNUSED size_t fill_nb(struct up_end *wnb, uint64_t seed, uint64_t off)
{
	uint8_t buf[4096];
	size_t total = 0;

	for (;;) {
		ssize_t r;

		harness_fill(seed, off + total, buf, sizeof(buf));
		r = up_write(wnb, buf, sizeof(buf));
		if (r == -EAGAIN)
			break;
		CHECK_EQ(r, (ssize_t)sizeof(buf)); /* <= PIPE_BUF: all or nothing */
		total += sizeof(buf);
		CHECK(total <= 2 * UP_MAX_TEST_CAP);
	}
	return total;
}

/* What every main() of these tests does first: the case filter, a watchdog
 * that turns a hang (a lost wakeup) into a failure, and SIGPIPE as a
 * failure (the library must return -EPIPE instead). */
static HARNESS_UNUSED void sem_init(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(120);
	harness_fail_on_sigpipe();
}

#endif /* UP_TESTS_SEM_COMMON_H */
