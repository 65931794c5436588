/* SPDX-License-Identifier: MIT */
/*
 * test_coalesce.c - read coalescing (core/reader.c, up__coalesce()) is entered by
 * up_read and by up_peek alike.
 *
 * A reader that keeps finding data without waiting, and takes all of it,
 * counts a streak; from UP_STREAK_MIN on it waits briefly for whole pages
 * instead of copying the writer's partial page line by line. The streak
 * ends when that wait runs out, when the reader had to sleep for data, and
 * when a non-blocking read found nothing; a short spin for data does not end
 * it, and a read cut short by the caller's buffer with data left neither
 * adds to it nor ends it. up_peek
 * compared the spans it found with the caller's vector after overwriting
 * the latter, so its streak never grew and a zero-copy reader never
 * coalesced (half the copy path's speed at 100-byte writes). These checks
 * look at the streak itself: whether coalescing pays is for the benchmark.
 * The last one checks the bytes of the page a coalescing reader copies
 * downwards (up__read_locked(), up__cur_copy_out_down()).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "short.h"
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

/* Makes @r a coalescing reader: a streak of the length its backoff needs. */
static uint32_t make_coalescing(struct up_end *r)
{
	r->streak = UP_STREAK_MIN << r->coalesce_backoff;
	return r->streak;
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
	/* A read of a message's size that takes all there is caught up with
	 * the writer as much as one with room to spare: it counts. */
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(up_read(e[0], buf, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(e[0]->streak, 2);
	/* One that fills the caller's buffer and leaves data behind is not
	 * keeping up, nor is it behind a streaming writer: the streak stays. */
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(up_read(e[0], buf, sizeof(msg) / 2), (ssize_t)sizeof(msg) / 2);
	CHECK_EQ(e[0]->streak, 2);
	CHECK(!e[0]->caught);
	CHECK_EQ(up_read(e[0], buf, sizeof(msg)), (ssize_t)sizeof(msg) / 2);
	CHECK_EQ(e[0]->streak, 3);
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
	/* A peek whose one span is all there is counts, its vector full or
	 * not (the read case above shows a call cut short leaving the streak
	 * as it was: both go through up__streak_note()). */
	{
		struct iovec iov[1];
		int cnt = 1;

		CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
		CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg));
		CHECK_EQ(cnt, 1);
		CHECK_EQ(e[0]->streak, 2);
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

/* Byte @j of the @i-th record: no two records look alike. */
static unsigned char rec_byte(int i, int j)
{
	return (unsigned char)(i * 131 + j * 7 + (i >> 8));
}

enum { PAGE = 4096, GAP = 64, GUARD = 0xa5, REC_MAX = 100, NREC_MAX = 3 * PAGE / 64 };

struct down_case {
	size_t rec;      /* record size */
	int behind;      /* whole pages written past the first before reading */
	size_t iov[3];   /* the caller's iovecs (0: fewer) */
};

static void down_copy_case(const struct down_case *dc)
{
	static unsigned char mem[3 * GAP + 3 * PAGE];
	static unsigned char want[3 * PAGE], got[3 * PAGE];
	struct up_config cfg;
	struct iovec iov[3];
	struct up_end *e[2];
	unsigned char msg[REC_MAX];
	size_t fill, whole = 0, total = 0, at = GAP, room = 0, n = 0;
	int cnt = 0, pages = 1, nrec = 0;
	ssize_t r;

	up_config_init(&cfg);
	cfg.page_size = PAGE;
	CHECK_OK(up_pipe2(e, &cfg));
	CHECK_EQ(up_page_size(up_end_pipe(e[0])), PAGE);
	read_rounds(e, UP_STREAK_MIN);
	CHECK_EQ(e[0]->streak, UP_STREAK_MIN);
	/* Records fill the first page (after the streak's bytes) and
	 * dc->behind more; the one that starts the page after them stays in
	 * the writer's page. A write that does not fit a page's room starts
	 * the next page. */
	fill = UP_STREAK_MIN * 100;
	for (;;) {
		CHECK(nrec < NREC_MAX);
		if (fill + dc->rec > PAGE) {
			if (pages == dc->behind + 1)
				whole = total;
			pages++;
			fill = 0;
		}
		for (int j = 0; j < (int)dc->rec; j++)
			msg[j] = want[total + (size_t)j] = rec_byte(nrec, j);
		CHECK_EQ(up_write(e[1], msg, dc->rec), (ssize_t)dc->rec);
		fill += dc->rec;
		total += dc->rec;
		nrec++;
		if (pages == dc->behind + 2)
			break;
	}
	memset(mem, GUARD, sizeof(mem));
	for (int x = 0; x < 3 && dc->iov[x]; x++) {
		iov[x].iov_base = mem + at;
		iov[x].iov_len = dc->iov[x];
		at += dc->iov[x] + GAP;
		room += dc->iov[x];
		cnt++;
	}
	CHECK(at <= sizeof(mem));
	/* Whole pages only (not the record in the writer's page, which shows
	 * the read coalesced), as much as the iovecs hold. */
	r = up_readv(e[0], iov, cnt);
	CHECK_EQ(r, (ssize_t)(whole < room ? whole : room));
	for (int x = 0; x < cnt; x++) {
		size_t k = (size_t)r - n < iov[x].iov_len ? (size_t)r - n : iov[x].iov_len;

		memcpy(got + n, iov[x].iov_base, k);
		/* Untouched: the guard before each iovec and what the read did
		 * not fill. */
		for (size_t g = 1; g <= GAP; g++)
			CHECK_EQ(((unsigned char *)iov[x].iov_base)[-(ptrdiff_t)g], GUARD);
		for (size_t g = k; g < iov[x].iov_len; g++)
			CHECK_EQ(((unsigned char *)iov[x].iov_base)[g], GUARD);
		n += k;
	}
	CHECK_EQ(n, (size_t)r);
	/* The rest, however later reads split it. */
	while (n < total) {
		r = up_read(e[0], got + n, total - n);
		CHECK(r > 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	CHECK(memcmp(got, want, total) == 0);
	up_close(e[1]);
	up_close(e[0]);
}

/*
 * A coalescing reader copies the page just below the writer's downwards
 * (up__read_locked(), up__cur_copy_out_down()). Every byte must still land where an
 * upward copy puts it, with nothing written outside the caller's iovecs,
 * which lie apart with guard bytes between them: a range of a multiple of
 * 64 bytes and one that is not, one shorter than a block (the caller's
 * buffer is that small), one split across iovecs (copied upwards then),
 * and with the reader pages behind, so that the page is copied into an
 * iovec that earlier pages partly filled.
 */
static void down_copy_keeps_every_byte(void)
{
	static const struct down_case cases[] = {
		{ 100, 0, { 3 * PAGE, 0, 0 } },    /* 3600 bytes */
		{ 64, 0, { 3 * PAGE, 0, 0 } },     /* 3648 bytes, 57 blocks */
		{ 100, 0, { 40, 0, 0 } },          /* less than a block */
		{ 100, 0, { 37, 1000, 2 * PAGE } },/* split */
		{ 100, 2, { 3 * PAGE, 0, 0 } },    /* behind: up, up, down */
		{ 64, 1, { 1000, 2 * PAGE, 0 } },  /* behind and split */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		down_copy_case(&cases[i]);
}

/*
 * The kept slot's short ways (up__ring_read_small(), up_peek()'s) stay out
 * of the writer's page while the reader coalesces: a kept slot that is the
 * last one is read there only by a reader whose streak is under
 * UP_STREAK_MIN. A coalescing reader reading it would trade the line the
 * writer appends to after every message, the cost coalescing is for.
 */
static void coalescing_short_ways_leave_the_writers_page(void)
{
	struct up_end *e[2];
	char msg[1000], buf[100];
	struct iovec iov[4];
	uint32_t full;
	int cnt = 4;

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (char)('a' + i % 26);
	CHECK_OK(up_pipe2(e, NULL));
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(up_read(e[0], buf, 100), 100);
	/* Cut short in the only slot, the writer's: kept, as the last. */
	CHECK(e[0]->fin_valid && e[0]->fin_last);
	/* Not coalescing: the short way takes it. */
	e[0]->streak = 0;
	CHECK_EQ(up__ring_read_small(e[0], buf, 100), 100);
	CHECK(memcmp(buf, msg + 100, 100) == 0);
	/* Coalescing: it declines, and the general path reads the same bytes. */
	make_coalescing(e[0]);
	CHECK_EQ(up__ring_read_small(e[0], buf, 100), 0);
	CHECK_EQ(up_read(e[0], buf, 100), 100);
	CHECK(memcmp(buf, msg + 200, 100) == 0);
	/* The peek's short way likewise: a coalescing reader's peek goes the
	 * general way, whose coalescing step moves the streak (it waits for a
	 * page and gives up, or counts the read); the short way leaves it. */
	e[0]->streak = 0;
	CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg) - 300);
	CHECK_OK(up_consume(e[0], 100)); /* the next peek wants 100 */
	CHECK(e[0]->fin_valid && e[0]->fin_last);
	full = make_coalescing(e[0]);
	cnt = 4;
	CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg) - 400);
	CHECK(memcmp(iov[0].iov_base, msg + 400, 100) == 0);
	CHECK(e[0]->streak != full);
	CHECK_OK(up_consume(e[0], 100));
	CHECK(e[0]->fin_valid && e[0]->fin_last);
	e[0]->streak = 0;
	cnt = 4;
	CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg) - 500);
	CHECK(memcmp(iov[0].iov_base, msg + 500, 100) == 0);
	CHECK_EQ(e[0]->streak, 0); /* the short way */
	CHECK_OK(up_consume(e[0], 100));
	up_close(e[1]);
	up_close(e[0]);
}

/*
 * A coalescing reader that left data only in the page the writer appends to
 * waits for that page to be published past (up__coalesce()) instead of
 * taking the next message from it at once; data left in a page the writer
 * has moved past is taken without a wait.
 */
static void coalescing_waits_out_the_writers_page(void)
{
	char msg[3000], buf[100];
	struct up_config cfg;
	struct up_end *e[2];
	uint32_t full;

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (char)('A' + i % 26);
	up_config_init(&cfg);
	cfg.page_size = 4096; /* two messages do not share a page */
	CHECK_OK(up_pipe2(e, &cfg));
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK_EQ(up_read(e[0], buf, 100), 100);
	CHECK(e[0]->fin_valid && e[0]->fin_last && !e[0]->caught);
	/* All that is left is the writer's page: the wait runs out (nothing
	 * moves head here) and ends the streak. */
	make_coalescing(e[0]);
	CHECK(!up__coalesce(e[0]));
	CHECK_EQ(e[0]->streak, 0);
	/* The writer moves past it (its next write needs a page of its
	 * own): the page left part-read is final, taken without a wait. */
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	full = make_coalescing(e[0]);
	CHECK(up__coalesce(e[0]));
	CHECK_EQ(e[0]->streak, full);
	CHECK_EQ(up_read(e[0], buf, 100), 100);
	CHECK(memcmp(buf, msg + 100, 100) == 0);
	CHECK(!e[0]->fin_last);
	CHECK(up__coalesce(e[0]));
	CHECK_EQ(e[0]->streak, full);
	up_close(e[1]);
	up_close(e[0]);
}

/* A peek that walks the slots keeps the first one it shows, as a read cut
 * short in it does, so that up_consume() and the next peek take their short
 * ways. */
static void a_general_peek_keeps_its_first_slot(void)
{
	char msg[1000];
	struct iovec iov[4];
	struct up_end *e[2];
	int cnt = 4;

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (char)('k' + i % 7);
	CHECK_OK(up_pipe2(e, NULL));
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	CHECK(!e[0]->fin_valid);
	CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg));
	CHECK(e[0]->fin_valid && e[0]->fin_last);
	CHECK_EQ(e[0]->fin_len, sizeof(msg));
	CHECK_OK(up_consume(e[0], 100));
	/* The short ways: the rest of the kept slot, and no streak step. */
	cnt = 4;
	CHECK_EQ(up_peek(e[0], iov, &cnt), (ssize_t)sizeof(msg) - 100);
	CHECK(memcmp(iov[0].iov_base, msg + 100, sizeof(msg) - 100) == 0);
	CHECK_OK(up_consume(e[0], sizeof(msg) - 100));
	up_close(e[1]);
	up_close(e[0]);
}

/*
 * A reader whose writer cannot move while it waits (the same thread writes
 * and reads, or the writer is descheduled) finds every coalescing wait run
 * out. Each wait costs UP_COALESCE_NS of spinning: at one every
 * UP_STREAK_MIN + 1 reads, a thread reading back its own 100-byte writes
 * spent most of its time there. Each wait that runs out doubles the streak
 * the next one needs, so they come ever further apart.
 */
static void rounds_counting_waits(struct up_end *e[2], bool peek, int n, int *waits)
{
	for (int i = 0; i < n; i++) {
		uint32_t before = e[0]->streak;

		if (peek)
			peek_rounds(e, 1);
		else
			read_rounds(e, 1);
		/* A wait that runs out ends the streak; the read then counts. */
		if (e[0]->streak <= before)
			(*waits)++;
	}
}

static void waits_that_run_out_come_ever_further_apart(void)
{
	for (int peek = 0; peek < 2; peek++) {
		struct up_end *e[2];
		int waits = 0;

		CHECK_OK(up_pipe2(e, NULL));
		rounds_counting_waits(e, peek, 2000, &waits);
		/* Doubling from UP_STREAK_MIN: waits at 4, 12, 28, ... 2044
		 * reads, so at most 9 in 2000; without the backoff, 400. */
		if (waits > 9)
			fprintf(stderr, "%s: %d coalescing waits ran out in 2000 rounds\n",
				peek ? "peek" : "read", waits);
		CHECK(waits <= 9);
		CHECK(waits >= 1);
		CHECK(e[0]->coalesce_backoff > 0);
		up_close(e[1]);
		up_close(e[0]);
	}
}

/* A coalescing wait that sees a page come takes one step of the backoff
 * back, so a reader behind a writer that streams again coalesces at
 * UP_STREAK_MIN reads again. */
static void a_page_that_comes_takes_the_backoff_back(void)
{
	char msg[5000];
	struct up_config cfg;
	struct up_end *e[2];

	memset(msg, 'b', sizeof(msg));
	up_config_init(&cfg);
	cfg.page_size = 4096;
	CHECK_OK(up_pipe2(e, &cfg));
	e[0]->coalesce_backoff = 3;
	/* Under the streak the backoff needs: no wait, no step. */
	e[0]->streak = (UP_STREAK_MIN << 3) - 1;
	CHECK(!up__coalesce(e[0]));
	CHECK_EQ(e[0]->coalesce_backoff, 3);
	/* A page published since this end last read: a step back. */
	CHECK_EQ(up_write(e[1], msg, sizeof(msg)), (ssize_t)sizeof(msg));
	make_coalescing(e[0]);
	e[0]->caught = true;
	CHECK(up__coalesce(e[0]));
	CHECK_EQ(e[0]->coalesce_backoff, 2);
	/* Down to none, and no further. */
	e[0]->coalesce_backoff = 0;
	make_coalescing(e[0]);
	CHECK(up__coalesce(e[0]));
	CHECK_EQ(e[0]->coalesce_backoff, 0);
	up_close(e[1]);
	up_close(e[0]);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(30);
	RUN(read_builds_a_streak);
	RUN(peek_builds_a_streak);
	RUN(a_sleep_ends_the_streak);
	RUN(down_copy_keeps_every_byte);
	RUN(coalescing_short_ways_leave_the_writers_page);
	RUN(coalescing_waits_out_the_writers_page);
	RUN(a_general_peek_keeps_its_first_slot);
	RUN(waits_that_run_out_come_ever_further_apart);
	RUN(a_page_that_comes_takes_the_backoff_back);
	return 0;
}
