/* SPDX-License-Identifier: MIT */
/*
 * test_handoff.c - the hand-off of the page a reader freed last
 * (core/pagepool.c, its top): a trickle lives in a few warm pages instead of
 * walking the whole FIFO pool, and the hot word, which any peer can store
 * to, is checked like a pool entry.
 *
 * The trickle: every message is written only once the reader has taken the
 * one before and gone to sleep (its wait counted), so each read follows a
 * sleep. With the trim off, the pages that hold memory afterwards are the
 * pages the stream used: a few with the hand-off, and every page of the
 * pool without it (4 MiB go round a 2 MiB pool twice).
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "ring.h"
#include "up_int.h"

#define MSG   1024u
#define TOTAL (4u << 20)

struct trickle_reader {
	struct up_end *r;
	bool poll;            /* non-blocking, waiting in poll(2) after an arm */
	_Atomic uint64_t got;
	uint64_t sum;
};

static void *trickle_read(void *arg)
{
	struct trickle_reader *t = arg;
	unsigned char buf[MSG];

	for (;;) {
		ssize_t n = up_read(t->r, buf, sizeof(buf));

		if (t->poll && n == -EAGAIN) {
			struct pollfd pfd = { .fd = up_pollfd(t->r), .events = POLLIN };
			int a = up_poll_arm(t->r);

			CHECK(a == 0 || a == 1);
			if (a == 0)
				CHECK(poll(&pfd, 1, 10000) == 1);
			continue;
		}
		CHECK(n >= 0);
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			t->sum += buf[i];
		atomic_fetch_add(&t->got, (uint64_t)n);
	}
	return NULL;
}

/* Pipe pages of @p that hold memory (any of their base pages resident). */
static uint32_t pages_resident(struct up_pipe *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->g.page_count; i++)
		n += harness_resident(p->pages + (size_t)i * p->g.page_size, p->g.page_size) != 0;
	return n;
}

static uint64_t waits_of(struct up_pipe *p)
{
	struct up_stats st;

	CHECK_OK(up_stats(p, &st));
	return st.waits;
}

/* The reader has taken all @sent bytes and waits again: a wait counted past
 * @waits, a sleep in the library or an arm (counted as it is announced,
 * before the arm marks the end idle, which comes before its next read). */
static bool reader_waits(struct trickle_reader *t, struct up_pipe *p, uint64_t sent,
			 uint64_t waits)
{
	return atomic_load(&t->got) >= sent && waits_of(p) > waits;
}

static void trickle(bool poll_mode)
{
	struct trickle_reader t = { .poll = poll_mode };
	struct up_config cfg;
	struct up_pipe *p;
	struct up_end *w;
	unsigned char msg[MSG];
	uint64_t sent = 0, want = 0, expect = 0;
	uint32_t before, after;
	pthread_t th;

	up_config_init(&cfg);
	cfg.pool_keep = 64u << 20; /* above the pool: no trim */
	CHECK_OK(up_pipe_create(&cfg, &p));
	CHECK_OK(up_open(p, UP_RD | (poll_mode ? UP_NONBLOCK : 0), &t.r));
	CHECK_OK(up_open(p, UP_WR, &w));
	before = pages_resident(p);
	CHECK(pthread_create(&th, NULL, trickle_read, &t) == 0);
	for (uint32_t k = 0; sent < TOTAL; k++) {
		uint64_t deadline = harness_now_ns() + 10000000000ull;

		/* The reader has taken everything and waits again. */
		while (!reader_waits(&t, p, sent, want)) {
			CHECK(harness_now_ns() < deadline);
			sched_yield();
		}
		want = waits_of(p);
		for (uint32_t i = 0; i < MSG; i++) {
			msg[i] = (unsigned char)(k * 7 + i);
			expect += msg[i];
		}
		CHECK_EQ(up_write(w, msg, MSG), (ssize_t)MSG);
		sent += MSG;
	}
	CHECK_OK(up_close(w));
	CHECK(pthread_join(th, NULL) == 0);
	CHECK_EQ(atomic_load(&t.got), (uint64_t)TOTAL);
	CHECK_EQ(t.sum, expect);
	after = pages_resident(p);
	printf("# %u MiB in %u-byte messages, each after the reader %s: %u of the pool's %u "
	       "pages of %u KiB hold memory (%u before)\n",
	       TOTAL >> 20, MSG, poll_mode ? "armed and polled" : "slept", after, p->g.page_count,
	       p->g.page_size >> 10, before);
	CHECK(before <= 2);
	/* The writer's first batch (take_batch pages) and the two or three
	 * it hands back and forth; the FIFO alone fills all of them. */
	CHECK(after <= 12);
	CHECK_OK(up_close(t.r));
	up_pipe_release(p);
}

static void trickle_lives_in_warm_pages(void)
{
	trickle(false);
}

static void trickle_in_poll_mode_too(void)
{
	trickle(true);
}

/* A hot word naming no page, or a page that is not free, is a corrupt
 * segment: the writer that would take it gets -EPROTO, and takes nothing. */
static void hostile_hot_word_is_refused(void)
{
	struct up_end *e[2], *w2;
	struct up_pipe *p;
	static unsigned char big[64u << 10];
	uint32_t pg;

	/* Out of range: the first page a fresh writer needs. */
	CHECK_OK(up_pipe2(e, NULL));
	p = e[0]->p;
	atomic_store(&p->ln->pput.hot, p->g.page_count + 3);
	CHECK_EQ(up_write(e[1], "x", 1), (ssize_t)-EPROTO);
	up_close(e[1]);
	up_close(e[0]);

	/* The page of a live slot. */
	CHECK_OK(up_pipe2(e, NULL));
	p = e[0]->p;
	CHECK_EQ(up_write(e[1], "y", 1), 1);
	pg = atomic_load(&up__slot_at(p, atomic_load(&p->ln->prod.head) - 1)->page);
	CHECK_EQ(atomic_load(&p->owner[pg]), UP_OWNER_RING);
	atomic_store(&p->ln->pput.hot, pg);
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_write(w2, big, sizeof(big)), (ssize_t)-EPROTO);
	CHECK_EQ(atomic_load(&p->owner[pg]), UP_OWNER_RING);
	up_close(w2);
	up_close(e[1]);
	up_close(e[0]);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(60);
	RUN(trickle_lives_in_warm_pages);
	RUN(trickle_in_poll_mode_too);
	RUN(hostile_hot_word_is_refused);
	return 0;
}
