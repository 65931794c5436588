/* SPDX-License-Identifier: MIT */
/*
 * test_spin_inside.c - a side waits for the other by spinning, not by
 * sleeping, while the other is inside a call that ends the wait
 * (core/wait.c, peer_inside()):
 *
 *  - a writer waiting for pages while a reader holds a peek of the whole
 *    pipe (its pages come back at the consume);
 *  - a reader waiting for data while the writer fills a reservation of a
 *    chunk or more (its commit publishes it).
 *
 * Before, both slept once per hand-over as soon as the other side's work
 * outlasted the adaptive spin budget (at most 50 us): a zero-copy stream of
 * 1 MiB reservations through a 1 MiB pipe slept twice per reservation,
 * 4,096 system calls per GiB. Here the other side holds for HOLD_NS, over
 * the budget and well under UP_SPIN_INSIDE_NS; the waiter's sleep count
 * (c.waits) must not move, in every round the machine did not stretch
 * (see tally()); without the spin every round sleeps.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "harness.h"
#include "ring.h"

#define PAGE    4096u
#define PAGES   64u /* a quarter of the pipe (one reservation at most) is a chunk */
#define HOLD_NS 100000ull
#define ROUNDS  12

struct pair {
	struct up_end *w, *r;
	_Atomic int go, in;
	ssize_t res;
	uint64_t call_ns; /* how long the waiter's call took */
};

/*
 * A round counts when the other side was inside for less than SPIN_OK_NS
 * (the writer side: the waiter's own call was that short, all of it under
 * the held peek; the reader side: the reservation was open that long), so
 * the waiter had no reason to sleep. A round the machine stretched (a side descheduled) may
 * sleep and is not judged. Every judged round must be calm.
 */
#define SPIN_OK_NS (UP_SPIN_INSIDE_NS * 4ull / 5)

struct tally {
	int judged, calm, stretched;
};

static void tally(struct tally *ty, uint64_t call_ns, bool calm)
{
	if (call_ns >= SPIN_OK_NS) {
		ty->stretched++;
		return;
	}
	ty->judged++;
	ty->calm += calm;
}

static void judge(const struct tally *ty, const char *who, const char *what)
{
	printf("# %s: %d of %d waits for %s without a sleep (%d rounds stretched past %llu us)\n",
	       who, ty->calm, ty->judged, what, ty->stretched, SPIN_OK_NS / 1000);
	if (ty->judged == 0)
		SKIP("every round stretched by a busy machine");
	CHECK_EQ(ty->calm, ty->judged);
}

static void hold(void)
{
	uint64_t t0 = harness_now_ns();

	while (harness_now_ns() - t0 < HOLD_NS)
		;
}

/* Fill the whole pipe, so the next reservation has to wait for pages. */
static void fill(struct up_end *w)
{
	struct iovec iov[PAGES];
	size_t done = 0;

	while (done < (size_t)PAGES * PAGE) {
		int cnt = PAGES;
		ssize_t n = up_reserve(w, (size_t)PAGES * PAGE - done, iov, &cnt);

		CHECK(n > 0);
		for (int i = 0; i < cnt; i++)
			memset(iov[i].iov_base, 'f', iov[i].iov_len);
		CHECK_OK(up_commit(w, (size_t)n));
		done += (size_t)n;
	}
}

/* Read what is left (non-blocking), so the next round starts empty. */
static void drain(struct up_end *r)
{
	struct iovec iov[PAGES];
	int cnt = PAGES;
	ssize_t n;

	up_set_timeout(r, 0);
	while ((n = up_peek(r, iov, &cnt)) > 0) {
		CHECK_OK(up_consume(r, (size_t)n));
		cnt = PAGES;
	}
	CHECK(n == -ETIMEDOUT || n == -EAGAIN);
	up_set_timeout(r, -1);
}

static void make(struct pair *pr, struct up_pipe **pp)
{
	struct up_config cfg;

	up_config_init(&cfg);
	cfg.capacity = (uint64_t)PAGES * PAGE;
	cfg.page_size = PAGE;
	CHECK_OK(up_pipe_create(&cfg, pp));
	CHECK_OK(up_open(*pp, UP_WR, &pr->w));
	CHECK_OK(up_open(*pp, UP_RD, &pr->r));
}

static void *reserve_waits(void *arg)
{
	struct pair *pr = arg;
	struct iovec iov[PAGES];
	int cnt = PAGES;
	uint64_t t0;

	while (!atomic_load(&pr->go))
		;
	atomic_store(&pr->in, 1);
	t0 = harness_now_ns();
	pr->res = up_reserve(pr->w, PAGE, iov, &cnt);
	pr->call_ns = harness_now_ns() - t0;
	if (pr->res > 0)
		CHECK_OK(up_commit(pr->w, 0));
	return NULL;
}

/* The reader holds a peek of every page; the writer's reserve waits. */
static void writer_spins_while_reader_holds(void)
{
	struct up_pipe *p;
	struct pair pr;
	struct tally ty = { 0, 0, 0 };

	memset(&pr, 0, sizeof(pr));
	make(&pr, &p);
	for (int round = 0; round < ROUNDS; round++) {
		struct iovec iov[PAGES];
		uint64_t waits;
		pthread_t t;
		int cnt = PAGES;
		ssize_t n;

		fill(pr.w);
		/* Every page is in the ring; a coalescing peek leaves the
		 * last one out, which the writer cannot use either. */
		n = up_peek(pr.r, iov, &cnt);
		CHECK(n >= (ssize_t)(PAGES - 1) * PAGE);
		atomic_store(&pr.go, 0);
		atomic_store(&pr.in, 0);
		CHECK_EQ(pthread_create(&t, NULL, reserve_waits, &pr), 0);
		/* relaxed in the library; the writer thread is not running yet. */
		waits = atomic_load(&pr.w->c.waits);
		atomic_store(&pr.go, 1);
		while (!atomic_load(&pr.in))
			;
		hold(); /* from the waiter's call on */
		CHECK_OK(up_consume(pr.r, (size_t)n));
		CHECK_EQ(pthread_join(t, NULL), 0);
		drain(pr.r);
		CHECK_EQ(pr.res, (ssize_t)PAGE);
		tally(&ty, pr.call_ns, atomic_load(&pr.w->c.waits) == waits);
	}
	judge(&ty, "writer", "pages");
	up_close(pr.w);
	up_close(pr.r);
	up_pipe_release(p);
}

static void *read_waits(void *arg)
{
	struct pair *pr = arg;
	char buf[PAGE];
	uint64_t t0;

	while (!atomic_load(&pr->go))
		;
	atomic_store(&pr->in, 1);
	t0 = harness_now_ns();
	pr->res = up_read(pr->r, buf, sizeof(buf));
	pr->call_ns = harness_now_ns() - t0;
	return NULL;
}

/* The writer holds a reservation of a chunk; the reader's read waits. */
static void reader_spins_while_writer_fills(void)
{
	const size_t chunk = UP_CHUNK_BYTES;
	struct up_pipe *p;
	struct pair pr;
	struct tally ty = { 0, 0, 0 };

	memset(&pr, 0, sizeof(pr));
	make(&pr, &p);
	for (int round = 0; round < ROUNDS; round++) {
		struct iovec iov[PAGES];
		char buf[PAGE];
		uint64_t waits, t_res, open_ns;
		pthread_t t;
		int cnt = PAGES;
		size_t left;

		/* The fill's hint runs from the reservation on: the round is
		 * judged by how long the reservation stayed open. */
		t_res = harness_now_ns();
		CHECK_EQ(up_reserve(pr.w, chunk, iov, &cnt), (ssize_t)chunk);
		atomic_store(&pr.go, 0);
		atomic_store(&pr.in, 0);
		CHECK_EQ(pthread_create(&t, NULL, read_waits, &pr), 0);
		waits = atomic_load(&pr.r->c.waits);
		atomic_store(&pr.go, 1);
		while (!atomic_load(&pr.in))
			;
		for (int i = 0; i < cnt; i++)
			memset(iov[i].iov_base, 'r', iov[i].iov_len);
		hold();
		CHECK_OK(up_commit(pr.w, chunk));
		open_ns = harness_now_ns() - t_res;
		CHECK_EQ(pthread_join(t, NULL), 0);
		CHECK(pr.res > 0);
		tally(&ty, open_ns, atomic_load(&pr.r->c.waits) == waits);
		for (left = chunk - (size_t)pr.res; left;) {
			ssize_t n = up_read(pr.r, buf, left < sizeof(buf) ? left : sizeof(buf));

			CHECK(n > 0);
			left -= (size_t)n;
		}
	}
	judge(&ty, "reader", "a fill");
	up_close(pr.w);
	up_close(pr.r);
	up_pipe_release(p);
}

int main(void)
{
	harness_watchdog(60);
	RUN(writer_spins_while_reader_holds);
	RUN(reader_spins_while_writer_fills);
	return 0;
}
