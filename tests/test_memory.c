/* SPDX-License-Identifier: MIT */
/*
 * test_memory.c - the memory floor: after a burst, an idle pipe's resident
 * data pages fall back to the pool's keep-level (issue 5), spare pool pages
 * included; and the spare pages themselves (core/shm.c, pool_spare()).
 *
 * The pipe is filled, then 1 GiB goes through it; then the writer stays idle while the
 * reader blocks in up_read(). A reader about to sleep trims the pool, so the
 * resident pages of the segment's data area (mincore over this process's
 * mapping) must fall to at most keep-level + one page per slot still live +
 * the writer's page batch. The main thread polls mincore until that holds or
 * a deadline passes: the deadline is a failure bound, not synchronisation.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"

#define MIB (1024u * 1024u)

struct reader {
	struct up_end *e;
	uint64_t got;
	ssize_t last;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	static char buf[1 << 20];
	ssize_t n;

	while ((n = up_read(r->e, buf, sizeof(buf))) > 0)
		r->got += (uint64_t)n;
	r->last = n;
	return NULL;
}

static size_t resident_pages(struct up_pipe *p)
{
	return harness_resident(p->pages, (size_t)p->g.page_count * p->g.page_size) /
	       p->g.page_size;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void burst_then_idle(size_t cap, size_t keep)
{
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *w, *wnb;
	struct reader rd = { 0 };
	pthread_t t;
	static char chunk[1 << 16];
	uint64_t sent = 0, deadline;
	size_t peak, idle, floor_pages;

	up_config_init(&cfg);
	cfg.capacity = cap;
	cfg.pool_keep = keep;
	cfg.trim_ms = 10;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD, &rd.e));
	CHECK_OK(up_open(p, UP_WR, &w));
	/*
	 * Fill the pipe before the reader starts: a reader that keeps up holds
	 * only a few MiB live, and the peak would then depend on scheduling.
	 */
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &wnb));
	for (;;) {
		ssize_t n = up_write(wnb, chunk, sizeof(chunk));

		if (n == -EAGAIN)
			break;
		CHECK(n > 0);
		sent += (uint64_t)n;
	}
	up_close(wnb);
	CHECK(sent >= cap / 2); /* most of the ring is live now */
	peak = resident_pages(p);
	CHECK_EQ(pthread_create(&t, NULL, reader_main, &rd), 0);
	while (sent < 1024ull * MIB) {
		size_t len = sizeof(chunk);
		ssize_t n;

		if (len > 1024ull * MIB - sent)
			len = (size_t)(1024ull * MIB - sent);
		n = up_write(w, chunk, len);
		CHECK(n > 0);
		sent += (uint64_t)n;
	}
	/* Idle: the reader drains, finds nothing, trims, sleeps. */
	floor_pages = p->g.keep_pages + 1 /* last live slot */ + 16 /* writer batch */;
	deadline = now_ms() + 10000;
	do {
		idle = resident_pages(p);
		if (idle <= floor_pages)
			break;
		usleep(1000); /* polling a condition with a deadline */
	} while (now_ms() < deadline);
	printf("# capacity %zu KiB, keep %zu KiB: resident data pages with the pipe full %zu (%zu KiB), idle %zu (%zu KiB), floor %zu\n",
	       cap / 1024, keep / 1024, peak, peak * p->g.page_size / 1024, idle,
	       idle * p->g.page_size / 1024, floor_pages);
	CHECK(peak > floor_pages); /* the fill really used the pool */
	CHECK(idle <= floor_pages);
	/* The pipe still works after the trim, through punched pages. */
	for (sent = 0; sent < 128ull * MIB; sent += sizeof(chunk))
		CHECK_EQ(up_write(w, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	up_close(w);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(rd.last, 0);
	CHECK_EQ(rd.got, 1024ull * MIB + 128ull * MIB);
	up_close(rd.e);
	up_pipe_release(p);
}

static void default_keep(void)
{
	burst_then_idle(64 * MIB, 0); /* default: 1/8 of the capacity */
}

static void small_keep(void)
{
	burst_then_idle(64 * MIB, 256 * 1024);
}

static void never_trim(void)
{
	struct up_config cfg;
	struct up_pipe *p;

	up_config_init(&cfg);
	cfg.capacity = 4 * MIB;
	cfg.pool_keep = 8 * MIB; /* >= capacity: keep everything */
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_EQ(p->g.keep_pages, p->g.page_count);
	up_pipe_release(p);
	/* With spare pages too: the capacity is enough to keep them all. */
	cfg.capacity = MIB;
	cfg.pool_keep = MIB;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK(p->g.spare_pages > 0);
	CHECK_EQ(p->g.keep_pages, p->g.page_count);
	up_pipe_release(p);
}

/*
 * Pool pages beyond the capacity (core/shm.c, pool_spare()): how many, and
 * that they add nothing to what the pipe holds.
 */
static void spare_pool(void)
{
	static const struct {
		size_t cap, pool_min;
		uint32_t pages, spare;
	} g[] = {
		{ MIB, 0, 512, 256 },              /* default: a 2 MiB pool */
		{ MIB, 1, 256, 0 },                /* asked for none */
		{ MIB, 4 * MIB, 512, 256 },        /* at most twice the capacity */
		{ 768 * 1024, 0, 384, 192 },       /* twice: short of 2 MiB */
		{ 4 * MIB, 0, 1024, 0 },           /* over 2 MiB already */
		{ 256 * 1024, 0, 64, 0 },          /* under a quarter of 2 MiB */
	};
	static char chunk[4096];

	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		struct up_config cfg;
		struct up_end *e[2];
		struct up_pipe *p;
		size_t held = 0;
		ssize_t n;

		up_config_init(&cfg);
		cfg.capacity = g[i].cap;
		cfg.page_size = 4096; /* the table counts 4 KiB pages */
		cfg.pool_min = g[i].pool_min;
		CHECK_OK(up_pipe2(e, &cfg));
		p = up_end_pipe(e[0]);
		CHECK_EQ(p->g.page_count, g[i].pages);
		CHECK_EQ(p->g.spare_pages, g[i].spare);
		CHECK_EQ(up_capacity(p), g[i].cap);
		/* A non-blocking writer fills the capacity, not the pool. */
		CHECK_OK(up_close(e[1]));
		CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &e[1]));
		while ((n = up_write(e[1], chunk, sizeof(chunk))) > 0)
			held += (size_t)n;
		CHECK_EQ(n, -EAGAIN);
		CHECK_EQ(held, g[i].cap);
		up_close(e[1]);
		up_close(e[0]);
	}
}

/*
 * The header's spare_pages as another process attaching sees it: the
 * writers must be left at least two pages. Rewritten in the memfd, with
 * the checksum recomputed, as a hostile peer could.
 */
static void spare_pool_attach(void)
{
	struct up_pipe *p, *q;
	struct up_shm_hdr h;
	uint32_t orig;
	int fd;

	CHECK_OK(up_pipe_create(NULL, &p));
	fd = up_pipe_fd(p);
	CHECK_EQ(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	orig = h.spare_pages;
	CHECK(orig > 0);
	for (uint32_t spare = h.page_count + 1; spare >= h.page_count - 3; spare--) {
		h.spare_pages = spare;
		h.checksum = up__shm_hdr_sum(&h);
		CHECK_EQ(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		if (spare > h.page_count - UP_MIN_PAGES) {
			CHECK_EQ(up_pipe_attach(fd, &q), -EPROTO);
			continue;
		}
		CHECK_OK(up_pipe_attach(fd, &q));
		CHECK_EQ(up_capacity(q), (size_t)(h.page_count - spare) * h.page_size);
		up_pipe_release(q);
	}
	h.spare_pages = orig;
	h.resv_ = 1;
	h.checksum = up__shm_hdr_sum(&h);
	CHECK_EQ(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(up_pipe_attach(fd, &q), -EPROTO);
	h.resv_ = 0;
	h.checksum = up__shm_hdr_sum(&h);
	CHECK_EQ(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_OK(up_pipe_attach(fd, &q));
	CHECK_EQ(up_capacity(q), (size_t)MIB);
	up_pipe_release(q);
	up_pipe_release(p);
}

/* An idle 1 MiB pipe trims its spare pages with the rest. */
static void spare_pool_trims(void)
{
	burst_then_idle(MIB, 0);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(120);
	RUN(spare_pool);
	RUN(spare_pool_attach);
	RUN(spare_pool_trims);
	RUN(never_trim);
	RUN(small_keep);
	RUN(default_keep);
	return 0;
}
