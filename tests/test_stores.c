/* SPDX-License-Identifier: MIT */
/*
 * test_stores.c - the writer's choice between streaming and plain stores for
 * whole pages (core/copy.c, up__stores_turn(); core/writer.c).
 *
 * The choice is driven by a clock, so the checks feed it one: each window is
 * 4 MiB over a chosen number of nanoseconds. They show that each kind is
 * measured once first, that the faster is kept with the slower tried one
 * window in UP_STORES_EXPLORE, that a change of which one is faster is
 * followed, that a slow first window is forgotten at the next try, and that
 * an idle window teaches nothing. The last check runs a
 * real stream and finds both kinds measured by the writer end.
 */
#include <string.h>

#include "harness.h"
#include "ring.h"

/* A window of UP_STORES_WINDOW bytes at @mbps, ending now. */
static void window(struct up__stores *s, uint64_t *clk, uint32_t mbps)
{
	uint64_t ns = (uint64_t)UP_STORES_WINDOW * 1000u / mbps;

	s->t0 = *clk;
	s->bytes = UP_STORES_WINDOW;
	*clk += ns;
	up__stores_turn(s, *clk);
}

/* Run @n windows, plain at @plain MB/s and streaming at @nt; count the
 * windows that used streaming stores. */
static unsigned run(struct up__stores *s, uint64_t *clk, unsigned n, uint32_t plain, uint32_t nt)
{
	unsigned used = 0;

	for (unsigned i = 0; i < n; i++) {
		used += s->nt;
		window(s, clk, s->nt ? nt : plain);
	}
	return used;
}

static void each_kind_first_then_the_faster(void)
{
	struct up__stores s;
	uint64_t clk = 1000;

	memset(&s, 0, sizeof(s));
	CHECK(!s.nt); /* plain first */
	window(&s, &clk, 8000);
	CHECK(s.nt); /* then streaming */
	window(&s, &clk, 4000);
	CHECK(!s.nt); /* plain was faster */
	CHECK_EQ(s.rate[0], 8000u);
	CHECK_EQ(s.rate[1], 4000u);
	/* 160 windows: the slower kind in one of every 16. */
	CHECK_EQ(run(&s, &clk, 160, 8000, 4000), 10u);
	CHECK(s.rate[0] > s.rate[1]);
}

static void streaming_kept_when_faster(void)
{
	struct up__stores s;
	uint64_t clk = 1000;

	memset(&s, 0, sizeof(s));
	CHECK_EQ(run(&s, &clk, 2, 3000, 12000), 1u);
	CHECK(s.nt);
	CHECK_EQ(run(&s, &clk, 160, 3000, 12000), 150u);
}

/* Plain stores were faster; then the machine changes and streaming ones
 * are three times faster: the choice follows within a few explorations. */
static void a_change_is_followed(void)
{
	struct up__stores s;
	uint64_t clk = 1000;
	unsigned used;

	memset(&s, 0, sizeof(s));
	(void)run(&s, &clk, 64, 9000, 6000);
	CHECK(!s.nt || s.windows % UP_STORES_EXPLORE == 0);
	(void)run(&s, &clk, 4 * UP_STORES_EXPLORE, 3000, 9000);
	used = run(&s, &clk, 160, 3000, 9000);
	CHECK_EQ(used, 150u);
}

/* The first plain window was slow (the pipe's pages faulted in), so
 * streaming stores were taken; the next plain window, one in 16, replaces
 * that rate, and the writer is back on plain stores at once. */
static void a_slow_start_is_forgotten(void)
{
	struct up__stores s;
	uint64_t clk = 1000;

	memset(&s, 0, sizeof(s));
	window(&s, &clk, 3000); /* plain, cold */
	window(&s, &clk, 8000); /* streaming */
	CHECK(s.nt);
	(void)run(&s, &clk, UP_STORES_EXPLORE, 12000, 8000);
	CHECK(!s.nt);
	CHECK_EQ(run(&s, &clk, 160, 12000, 8000), 10u);
}

/* A window slower than UP_STORES_IDLE_NS (the writer waited for a stopped
 * reader, or had nothing to write) changes neither rate nor choice. */
static void an_idle_window_teaches_nothing(void)
{
	struct up__stores s;
	uint64_t clk = 1000;
	uint32_t r0, r1, wn;
	bool nt;

	memset(&s, 0, sizeof(s));
	(void)run(&s, &clk, 5, 9000, 6000);
	r0 = s.rate[0];
	r1 = s.rate[1];
	wn = s.windows;
	nt = s.nt;
	s.t0 = clk;
	s.bytes = UP_STORES_WINDOW;
	clk += UP_STORES_IDLE_NS;
	up__stores_turn(&s, clk);
	CHECK_EQ(s.rate[0], r0);
	CHECK_EQ(s.rate[1], r1);
	CHECK_EQ(s.windows, wn);
	CHECK_EQ(s.nt, nt);
	CHECK_EQ(s.bytes, 0u);
	CHECK_EQ(s.t0, 0u);
}

/* A real stream of whole pages: the writer end times its windows and has
 * measured both kinds of store by the end. */
static void a_writer_measures_both(void)
{
	struct up_config cfg;
	struct up_end *w, *r;
	struct up_pipe *p;
	static unsigned char buf[1 << 20];
	uint64_t left = 64u << 20;

	up_config_init(&cfg);
	cfg.capacity = 4u << 20;
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_OK(up_open(p, UP_RD, &r));
	memset(buf, 0x5a, sizeof(buf));
	while (left) {
		CHECK_EQ(up_write(w, buf, sizeof(buf)), (ssize_t)sizeof(buf));
		for (size_t got = 0; got < sizeof(buf);) {
			ssize_t k = up_read(r, buf, sizeof(buf) - got);

			CHECK(k > 0);
			got += (size_t)k;
		}
		left -= sizeof(buf);
	}
	/* 64 MiB is 16 windows; one may have been slower than the idle bound
	 * on a loaded machine, not most. */
	CHECK(w->stores.windows >= 8);
	CHECK(w->stores.rate[0] > 0);
	CHECK(w->stores.rate[1] > 0);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

int main(void)
{
	RUN(each_kind_first_then_the_faster);
	RUN(streaming_kept_when_faster);
	RUN(a_change_is_followed);
	RUN(a_slow_start_is_forgotten);
	RUN(an_idle_window_teaches_nothing);
	RUN(a_writer_measures_both);
	return 0;
}
