/* SPDX-License-Identifier: MIT */
/*
 * test_zerocopy.c - the zero-copy calls: up_reserve/up_commit on the writer
 * side (nothing visible before the commit, partial commits, reservations
 * handed out again, merged into the last page, held across another
 * writer's calls, given back by close) and up_peek/up_consume on the
 * reader side (peek consumes nothing, consume may go past the peeked
 * spans); commits and consumes larger than allowed are refused unharmed.
 */
#include <sys/syscall.h>

#include "sem_common.h"

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t t = 0;
	int i;

	for (i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

static void fill_iov_pat(const struct iovec *iov, int cnt, uint64_t seed, uint64_t off)
{
	int i;

	for (i = 0; i < cnt; i++) {
		harness_fill(seed, off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
}

static void check_iov_pat(const struct iovec *iov, int cnt, size_t n, uint64_t seed,
			  uint64_t off)
{
	int i;

	for (i = 0; i < cnt && n > 0; i++) {
		size_t k = iov[i].iov_len < n ? iov[i].iov_len : n;

		CHECK(iov[i].iov_base != NULL);
		CHECK_EQ(harness_verify(seed, off, iov[i].iov_base, k), (size_t)-1);
		off += k;
		n -= k;
	}
	CHECK_EQ(n, 0);
}

static void zero_copy_reserve_commit_read(void)
{
	static const size_t pages[] = { 4096, 64 * KiB };
	size_t pi;

	for (pi = 0; pi < 2; pi++) {
		struct up_pipe *p = mk_pipe(256 * KiB, pages[pi]);
		struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
		struct iovec iov[8];
		int cnt = 8;
		ssize_t n;
		bool eof;

		n = up_reserve(w, 10000, iov, &cnt);
		CHECK_OK(n);
		CHECK(n > 0 && n <= 10000);
		CHECK(cnt >= 1 && cnt <= 8);
		CHECK_EQ(iov_total(iov, cnt), (size_t)n);
		fill_iov_pat(iov, cnt, 41, 0);
		/* nothing is visible before the commit */
		{
			char c;

			CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
		}
		CHECK_OK(up_commit(w, (size_t)n));
		/* then a plain write lands after the committed bytes */
		write_pat(w, 41, (uint64_t)n, 777);
		CHECK_EQ(drain_pat(r, 41, 0, &eof), (size_t)n + 777);
		CHECK(!eof);
		CHECK_OK(up_close(w));
		CHECK_EQ(drain_pat(r, 41, 0, &eof), 0);
		CHECK(eof);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

static void zero_copy_commit_partial_and_rereserve(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec a[8], b[8], c[8];
	int na = 8, nb = 8, nc = 8;
	ssize_t ra, rb, rc;
	bool eof;

	ra = up_reserve(w, 5000, a, &na);
	CHECK_OK(ra);
	CHECK(ra > 0);
	/* a second reserve without commit hands out the same spans */
	rb = up_reserve(w, 5000, b, &nb);
	CHECK_EQ(rb, ra);
	CHECK_EQ(nb, na);
	CHECK(a[0].iov_base == b[0].iov_base);
	/* extended when more is asked; starts at the same place */
	rc = up_reserve(w, 9000, c, &nc);
	CHECK_OK(rc);
	CHECK(rc >= ra);
	CHECK(c[0].iov_base == a[0].iov_base);
	fill_iov_pat(c, nc, 42, 0);
	/* publish only the first 1000 bytes; the rest is dropped */
	CHECK_OK(up_commit(w, 1000));
	write_pat(w, 42, 1000, 50);
	CHECK_EQ(drain_pat(r, 42, 0, &eof), 1050);
	CHECK(!eof);
	/* commit 0 publishes nothing */
	nc = 8;
	CHECK_OK(up_reserve(w, 100, c, &nc));
	CHECK_OK(up_commit(w, 0));
	CHECK_EQ(drain_pat(r, 42, 1050, &eof), 0);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_EQ(drain_pat(r, 42, 1050, &eof), 0);
	CHECK(eof);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void zero_copy_close_returns_reserved_pages(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct up_end *w2;
	struct iovec iov[32];
	int cnt = 32;
	size_t got = 0, cap = up_capacity(p);
	bool eof;

	/* reserve everything (possibly in several calls), then close */
	for (;;) {
		ssize_t n;

		cnt = 32;
		n = up_reserve(w, cap, iov, &cnt);
		CHECK_OK(n);
		if ((size_t)n == got || (size_t)n == cap)
			break;
		got = (size_t)n;
	}
	w2 = mk_end(p, UP_WR | UP_NONBLOCK);
	CHECK_OK(up_close(w));
	/* the whole capacity is usable again */
	CHECK_EQ(fill_nb(w2, 43, 0), cap);
	CHECK_OK(up_close(w2));
	CHECK_EQ(drain_pat(r, 43, 0, &eof), cap);
	CHECK(eof);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/*
 * Small reservations by the only writer share the last page, like small
 * writes do: 200 reserve+commit pairs of 40 bytes fit in an 8 KiB pipe
 * (they took a page each before, and the third one found the pipe full).
 */
static void zero_copy_small_reservations_merge(void)
{
	struct up_pipe *p = mk_pipe(8 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	struct iovec iov[4];
	uint64_t off = 0;
	int i, cnt;
	bool eof;

	for (i = 0; i < 200; i++) {
		cnt = 4;
		CHECK_EQ(up_reserve(w, 40, iov, &cnt), 40);
		CHECK_EQ(cnt, 1);
		fill_iov_pat(iov, cnt, 44, off);
		CHECK_OK(up_commit(w, 40));
		off += 40;
	}
	/* the two pages hold 8000 bytes; what is left is 192 bytes of the
	 * second page, so a reservation of 100 still merges, 200 does not fit */
	cnt = 4;
	CHECK_EQ(up_reserve(w, 100, iov, &cnt), 100);
	cnt = 4;
	CHECK_EQ(up_reserve(w, 200, iov, &cnt), -EAGAIN);
	CHECK_EQ(drain_pat(r, 44, 0, &eof), off);
	CHECK(!eof);
	/* a commit of part of a merged reservation publishes only that part */
	cnt = 4;
	CHECK_EQ(up_reserve(w, 100, iov, &cnt), 100);
	fill_iov_pat(iov, cnt, 44, off);
	CHECK_OK(up_commit(w, 30));
	off += 30;
	/* a write after a reservation drops it and lands in order */
	cnt = 4;
	CHECK_EQ(up_reserve(w, 100, iov, &cnt), 100);
	write_pat(w, 44, off, 70);
	off += 70;
	CHECK_EQ(drain_pat(r, 44, 8000, &eof), off - 8000);
	CHECK_OK(up_close(w));
	CHECK_EQ(drain_pat(r, 44, off, &eof), 0);
	CHECK(eof);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/*
 * A merged reservation holds the writers' lock until commit: a second
 * writer waits for it (non-blocking: -EAGAIN), then goes on. While two
 * writers are open, a small reservation merges only when the lock is free
 * (see zero_copy_small_reservations_two_writers); one over half a page
 * takes a page of its own. Closing with a merged reservation open releases
 * the lock and publishes nothing.
 */
static void zero_copy_merge_reservation_and_other_writers(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct up_end *w2;
	struct iovec iov[4];
	uint64_t off = 0;
	int cnt = 4;
	bool eof;

	write_pat(w, 45, off, 10);
	off += 10;
	CHECK_EQ(up_reserve(w, 50, iov, &cnt), 50);
	/* in the page just written: right after its 10 bytes */
	CHECK_EQ(((uintptr_t)iov[0].iov_base & 4095), 10);
	fill_iov_pat(iov, cnt, 45, off);
	w2 = mk_end(p, UP_WR | UP_NONBLOCK);
	CHECK_EQ(up_write(w2, "x", 1), -EAGAIN);
	CHECK_OK(up_commit(w, 50));
	off += 50;
	write_pat(w2, 45, off, 20);
	off += 20;
	/* two writers: a small reservation with the lock free merges */
	cnt = 4;
	CHECK_EQ(up_reserve(w, 50, iov, &cnt), 50);
	CHECK_EQ(((uintptr_t)iov[0].iov_base & 4095), 80);
	fill_iov_pat(iov, cnt, 45, off);
	CHECK_OK(up_commit(w, 50));
	off += 50;
	/* over half a page: a fresh page, even with room left in the last */
	cnt = 4;
	CHECK_EQ(up_reserve(w, 2049, iov, &cnt), 2049);
	CHECK_EQ(cnt, 1);
	CHECK_EQ(((uintptr_t)iov[0].iov_base & 4095), 0);
	fill_iov_pat(iov, cnt, 45, off);
	CHECK_OK(up_commit(w, 2049));
	off += 2049;
	CHECK_EQ(drain_pat(r, 45, 0, &eof), off);
	CHECK_OK(up_close(w2));
	/* alone again: merges; closing drops the reservation and the lock */
	write_pat(w, 45, off, 5);
	off += 5;
	cnt = 4;
	CHECK_EQ(up_reserve(w, 50, iov, &cnt), 50);
	CHECK(((uintptr_t)iov[0].iov_base & 4095) != 0); /* merged */
	w2 = mk_end(p, UP_WR | UP_NONBLOCK);
	CHECK_OK(up_close(w));
	write_pat(w2, 45, off, 7);
	off += 7;
	CHECK_OK(up_close(w2));
	CHECK_EQ(drain_pat(r, 45, off - 12, &eof), 12);
	CHECK(eof);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

struct resv_arg {
	struct up_end *w;
	_Atomic pid_t tid;
	uint64_t off;
	atomic_int reserved, committed;
	ssize_t got;
	uintptr_t page_off;
	int commit_r;
};

/* A blocking writer: reserve 20 bytes, say so, fill, commit. */
static void *resv_writer(void *arg)
{
	struct resv_arg *a = arg;
	struct iovec iov[4];
	int cnt = 4;

	atomic_store(&a->tid, (pid_t)syscall(SYS_gettid));
	a->got = up_reserve(a->w, 20, iov, &cnt);
	if (a->got == 20)
		a->page_off = (uintptr_t)iov[0].iov_base & 4095;
	atomic_store_explicit(&a->reserved, 1, memory_order_release);
	if (a->got != 20)
		return NULL;
	fill_iov_pat(iov, cnt, 46, a->off);
	a->commit_r = up_commit(a->w, 20);
	atomic_store_explicit(&a->committed, 1, memory_order_release);
	return NULL;
}

/*
 * Small reservations by two writers share pages too: 200 reserve+commit
 * pairs of 40 bytes, alternating between two writer ends, fit in an 8 KiB
 * pipe (with a page each, the third found it full). A writer whose lock is
 * held by the other's open small reservation does not wait for it: its
 * reservation takes a page of its own, and its non-blocking commit says
 * -EAGAIN and keeps the reservation until the lock is free.
 */
static void zero_copy_small_reservations_two_writers(void)
{
	struct up_pipe *p = mk_pipe(8 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
	struct up_end *w[2] = { mk_end(p, UP_WR | UP_NONBLOCK), mk_end(p, UP_WR | UP_NONBLOCK) };
	struct iovec iov[4], iov2[4];
	uint64_t off = 0;
	int i, cnt, cnt2;
	bool eof;

	for (i = 0; i < 200; i++) {
		cnt = 4;
		CHECK_EQ(up_reserve(w[i & 1], 40, iov, &cnt), 40);
		CHECK_EQ(cnt, 1);
		fill_iov_pat(iov, cnt, 46, off);
		CHECK_OK(up_commit(w[i & 1], 40));
		off += 40;
	}
	CHECK_EQ(drain_pat(r, 46, 0, &eof), off);
	/* w[0] holds the lock with a merged reservation open */
	cnt = 4;
	CHECK_EQ(up_reserve(w[0], 30, iov, &cnt), 30);
	CHECK(((uintptr_t)iov[0].iov_base & 4095) != 0);
	CHECK_EQ(up_write(w[1], "x", 1), -EAGAIN);
	/* w[1] gets a page of its own at once */
	cnt2 = 4;
	CHECK_EQ(up_reserve(w[1], 20, iov2, &cnt2), 20);
	CHECK_EQ(((uintptr_t)iov2[0].iov_base & 4095), 0);
	fill_iov_pat(iov2, cnt2, 46, off + 30);
	/* its commit cannot publish yet, and loses nothing */
	CHECK_EQ(up_commit(w[1], 20), -EAGAIN);
	CHECK_EQ(up_commit(w[1], 20), -EAGAIN);
	fill_iov_pat(iov, cnt, 46, off);
	CHECK_OK(up_commit(w[0], 30));
	CHECK_OK(up_commit(w[1], 20));
	off += 50;
	CHECK_EQ(drain_pat(r, 46, off - 50, &eof), 50);
	CHECK(!eof);
	/* A blocking writer does not wait for the lock to reserve either;
	 * only its commit waits, for the other's commit. */
	{
		struct resv_arg a = { .w = mk_end(p, UP_WR), .off = off + 30 };
		pthread_t th;
		double until;

		cnt = 4;
		CHECK_EQ(up_reserve(w[0], 30, iov, &cnt), 30);
		CHECK_EQ(pthread_create(&th, NULL, resv_writer, &a), 0);
		CHECK(harness_wait_flag(&a.reserved, 10.0));
		CHECK_EQ(a.got, 20);
		CHECK_EQ(a.page_off, 0);
		/* It cannot publish while we hold the lock: give it the time to
		 * try, until it is seen asleep on the lock (bounded). */
		until = harness_now() + 2.0;
		while (harness_tid_state(atomic_load(&a.tid)) != 'S' && harness_now() < until)
			sched_yield();
		CHECK(!atomic_load_explicit(&a.committed, memory_order_acquire));
		fill_iov_pat(iov, cnt, 46, off);
		CHECK_OK(up_commit(w[0], 30));
		CHECK_EQ(pthread_join(th, NULL), 0);
		CHECK_OK(a.commit_r);
		off += 50;
		CHECK_EQ(drain_pat(r, 46, off - 50, &eof), 50);
		CHECK_OK(up_close(a.w));
	}
	CHECK_OK(up_close(w[0]));
	CHECK_OK(up_close(w[1]));
	CHECK_EQ(drain_pat(r, 46, off, &eof), 0);
	CHECK(eof);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void zero_copy_peek_consume(void)
{
	static const size_t pages[] = { 4096, 64 * KiB };
	size_t pi;

	for (pi = 0; pi < 2; pi++) {
		struct up_pipe *p = mk_pipe(256 * KiB, pages[pi]);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct iovec iov[8], iov2[8];
		int cnt = 8, cnt2 = 8;
		ssize_t n, n2;

		write_pat(w, 44, 0, 10000);
		n = up_peek(r, iov, &cnt);
		CHECK_OK(n);
		CHECK(n > 0 && n <= 10000);
		CHECK(cnt >= 1 && cnt <= 8);
		CHECK_EQ(iov_total(iov, cnt), (size_t)n);
		check_iov_pat(iov, cnt, (size_t)n, 44, 0);
		/* peeking again shows the same bytes: peek consumes nothing */
		n2 = up_peek(r, iov2, &cnt2);
		CHECK_EQ(n2, n);
		CHECK(iov2[0].iov_base == iov[0].iov_base);
		/* consume part; the rest comes through up_read */
		CHECK_OK(up_consume(r, 3000));
		read_pat(r, 44, 3000, 7000);
		/* the consumed bytes are gone, nothing else is left */
		CHECK_OK(up_close(w));
		{
			char c;

			CHECK_EQ(up_read(r, &c, 1), 0);
		}
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

static void zero_copy_consume_more_than_peeked(void)
{
	struct up_pipe *p = mk_pipe(256 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct iovec iov[1];
	int cnt = 1;
	ssize_t n;

	write_pat(w, 45, 0, 20000);
	n = up_peek(r, iov, &cnt); /* one span only */
	CHECK_OK(n);
	CHECK(n > 0);
	CHECK_EQ(cnt, 1);
	/* consume may go past the peeked spans up to what is readable */
	CHECK_OK(up_consume(r, 12345));
	read_pat(r, 45, 12345, 20000 - 12345);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void commit_too_large_einval(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec iov[8];
	int cnt = 8;
	ssize_t n;
	char buf[8];

	/* no reservation at all */
	CHECK_EQ(up_commit(w, 5), -EINVAL);
	n = up_reserve(w, 100, iov, &cnt);
	CHECK_OK(n);
	CHECK(n > 0 && n <= 100);
	fill_iov_pat(iov, cnt, 46, 0);
	CHECK_EQ(up_commit(w, (size_t)n + 1), -EINVAL);
	CHECK_EQ(up_commit(w, SIZE_MAX), -EINVAL);
	/* the failed commits published nothing */
	CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
	CHECK_OK(up_commit(w, 0));
	CHECK_EQ(up_write(w, "abc", 3), 3);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 3);
	CHECK(memcmp(buf, "abc", 3) == 0);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void consume_too_large_einval(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec iov[8];
	int cnt = 8;
	bool eof;

	write_pat(w, 47, 0, 100);
	CHECK_EQ(up_peek(r, iov, &cnt), 100);
	CHECK_EQ(up_consume(r, 101), -EINVAL);
	CHECK_EQ(up_consume(r, SIZE_MAX), -EINVAL);
	/* nothing was consumed by the failed calls */
	CHECK_EQ(drain_pat(r, 47, 0, &eof), 100);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/*
 * One reservation takes at most a quarter of the capacity (a page at the
 * least), so a writer of the whole pipe at once fills while the reader
 * drains: asked for the whole capacity, with all of it free, it gets a
 * quarter, commits it, and gets the next quarter at once.
 */
static void a_reservation_takes_a_quarter_at_most(void)
{
	static const struct { size_t cap, page, want; } cases[] = {
		{ 1 * MiB, 0, 256 * KiB },      /* 16 KiB pages */
		{ 1 * MiB, 4096, 256 * KiB },
		{ 64 * KiB, 4096, 16 * KiB },
		{ 12 * KiB, 4096, 4096 },       /* three pages: one */
		{ 8 * KiB, 4096, 4096 },        /* two pages: one */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct up_pipe *p = mk_pipe(cases[i].cap, cases[i].page);
		struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
		size_t cap = up_capacity(p);
		struct iovec iov[256];
		int cnt = 256;
		bool eof;

		CHECK_EQ(up_reserve(w, cap, iov, &cnt), (ssize_t)cases[i].want);
		CHECK_EQ(iov_total(iov, cnt), cases[i].want);
		fill_iov_pat(iov, cnt, 43, 0);
		CHECK_OK(up_commit(w, cases[i].want));
		cnt = 256;
		CHECK_EQ(up_reserve(w, cap, iov, &cnt), (ssize_t)cases[i].want);
		fill_iov_pat(iov, cnt, 43, cases[i].want);
		CHECK_OK(up_commit(w, cases[i].want));
		CHECK_OK(up_close(w));
		CHECK_EQ(drain_pat(r, 43, 0, &eof), 2 * cases[i].want);
		CHECK(eof);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(zero_copy_reserve_commit_read);
	RUN(zero_copy_commit_partial_and_rereserve);
	RUN(zero_copy_close_returns_reserved_pages);
	RUN(zero_copy_small_reservations_merge);
	RUN(zero_copy_merge_reservation_and_other_writers);
	RUN(zero_copy_small_reservations_two_writers);
	RUN(zero_copy_peek_consume);
	RUN(zero_copy_consume_more_than_peeked);
	RUN(commit_too_large_einval);
	RUN(consume_too_large_einval);
	RUN(a_reservation_takes_a_quarter_at_most);
	return 0;
}
