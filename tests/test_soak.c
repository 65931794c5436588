/* SPDX-License-Identifier: MIT */
/*
 * test_soak.c - bursts and idle periods for minutes: resident memory and
 * integrity together.
 *
 * Usage: test_soak [--seed N] [--seconds S] [--mode blocking|nonblock|poll]
 * Prints seed=N first; the seed replays the burst sizes, write and read sizes
 * and idle lengths (not the interleavings).
 *
 * A 16 MiB pipe. The writer alternates a burst (4 .. 64 MiB, writes of 1 B ..
 * 256 KiB, sometimes through up_reserve/up_commit) with an idle period
 * (300 .. 900 ms, now and then a byte every 50 ms). In every idle period
 * the resident data pages (mincore) must fall to the keep-level plus a
 * writer's batch and the ring's last page, before a deadline of 2 s (a failure
 * bound: the writer polls the figure). The reader reads random sizes in the
 * chosen mode and checks every byte against the pattern; at the end it must
 * have read exactly what was written. Bursts must have used more than the
 * bound, or the test tests nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "mode_reader.h"
#include "up_int.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define SEED_PAT 11

static size_t data_resident(struct up_pipe *p)
{
	return harness_resident(p->pages, (size_t)p->g.page_count * p->g.page_size);
}

static void write_all(struct up_end *w, struct harness_rng *rng, char *buf, uint64_t *sent,
		      uint64_t n)
{
	while (n) {
		size_t k = (size_t)harness_rng_range(rng, 1, 256 * KIB);

		if (k > n)
			k = (size_t)n;
		if (harness_rng_range(rng, 0, 7) == 0 && k <= 64 * KIB) {
			struct iovec iov[20];
			int cnt = 20, i;
			size_t off = 0;
			ssize_t r = up_reserve(w, k, iov, &cnt);

			CHECK(r == (ssize_t)k);
			for (i = 0; i < cnt; i++) {
				harness_fill(SEED_PAT, *sent + off, iov[i].iov_base, iov[i].iov_len);
				off += iov[i].iov_len;
			}
			CHECK_EQ(off, k);
			CHECK_OK(up_commit(w, k));
		} else {
			harness_fill(SEED_PAT, *sent, buf, k);
			CHECK_EQ(up_write(w, buf, k), (ssize_t)k);
		}
		*sent += k;
		n -= k;
	}
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL), sent = 0;
	double seconds = 60, end;
	enum reader_mode mode = READ_POLL;
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *w;
	struct mode_reader rd = { .pat_seed = SEED_PAT, .max = 256 * KIB };
	struct harness_rng rng;
	size_t bound, peak = 0, worst = 0;
	unsigned bursts = 0;
	pthread_t t;
	char *buf;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
			i++;
			mode = strcmp(argv[i], "blocking") == 0 ? READ_BLOCKING
			       : strcmp(argv[i], "nonblock") == 0 ? READ_NONBLOCK : READ_POLL;
		}
	}
	printf("seed=%llu mode=%d seconds=%.0f\n", (unsigned long long)seed, (int)mode, seconds);
	fflush(stdout);
	harness_watchdog((unsigned)seconds + 120);
	harness_rng_seed(&rng, seed);
	buf = malloc(256 * KIB);
	CHECK(buf != NULL);

	up_config_init(&cfg);
	cfg.capacity = 16 * MIB;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD | (mode == READ_BLOCKING ? 0 : UP_NONBLOCK), &rd.e));
	CHECK_OK(up_open(p, UP_WR, &w));
	rd.mode = mode;
	rd.rng_seed = seed ^ 0x5eed;
	CHECK_EQ(pthread_create(&t, NULL, mode_reader_main, &rd), 0);
	/* The keep-level, a writer's batch, the ring's last page, and what a
	 * reservation may have taken beyond its batch. */
	bound = ((size_t)p->g.keep_pages + w->take_batch + 1 + UP_END_CACHE_MAX / 16) *
		p->g.page_size;

	end = harness_now() + seconds;
	while (harness_now() < end) {
		uint64_t burst = harness_rng_range(&rng, 4, 64) * MIB;
		double idle_end, deadline;
		size_t res, hi;
		bool trickle = harness_rng_range(&rng, 0, 3) == 0;

		write_all(w, &rng, buf, &sent, burst);
		hi = data_resident(p);
		if (hi > peak)
			peak = hi;
		bursts++;
		idle_end = harness_now() + (double)harness_rng_range(&rng, 300, 900) / 1000;
		deadline = harness_now() + 2.0;
		/* Idle (or a trickle) until the figure is under the bound. */
		while ((res = data_resident(p)) > bound) {
			CHECK(harness_now() < deadline);
			if (trickle)
				write_all(w, &rng, buf, &sent, 1);
			usleep(trickle ? 50000 : 10000); /* the trickle's pace, or polling */
		}
		if (res > worst)
			worst = res;
		while (harness_now() < idle_end)
			usleep(10000); /* the rest of the idle period */
	}
	up_close(w);
	CHECK_EQ(pthread_join(t, NULL), 0);
	printf("# %u bursts, %llu MiB: peak %zu KiB, worst idle %zu KiB, bound %zu KiB\n", bursts,
	       (unsigned long long)(sent / MIB), peak / KIB, worst / KIB, bound / KIB);
	CHECK(peak > bound);
	CHECK_EQ(rd.last, 0);
	CHECK_EQ(rd.bad, 0);
	CHECK_EQ(rd.got, sent);
	up_close(rd.e);
	up_pipe_release(p);
	free(buf);
	printf("ok soak\n");
	return 0;
}
