/* SPDX-License-Identifier: MIT */
/*
 * test_semantics.c - the pipe(7) contract of uringpipe, one function per case.
 *
 * Every case is built so that it cannot pass vacuously: data is a
 * position-dependent pattern (loss, duplication and reordering all show),
 * error cases first establish that the same call succeeds in the good state,
 * and wakeup cases would hang (and be failed by the watchdog) if a wakeup were
 * lost.
 *
 * Wakeup cases use a handshake flag set by the blocked thread right before it
 * calls into the library; the other thread then proceeds. Whether the first
 * thread is already asleep or not yet inside the call, the library must not
 * lose the wakeup. To make it likely that the sleeping path is really taken,
 * the waker additionally waits (bounded, never for correctness) until the
 * pipe's `waits` statistic moves.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "harness.h"
#include "uringpipe.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define UP_MAX_TEST_CAP (64 * MiB)

/* ---------------------------------------------------------------- helpers */

static struct up_pipe *mk_pipe(size_t capacity, size_t page_size)
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

static struct up_end *mk_end(struct up_pipe *p, int flags)
{
	struct up_end *e = NULL;

	CHECK_OK(up_open(p, flags, &e));
	CHECK(e != NULL);
	return e;
}

/* Blocking write of all @n bytes (short counts only after partial progress). */
static void write_all(struct up_end *w, const void *buf, size_t n)
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

static void write_pat(struct up_end *w, uint64_t seed, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(n ? n : 1);

	CHECK(buf != NULL);
	harness_fill(seed, off, buf, n);
	write_all(w, buf, n);
	free(buf);
}

/* Reads exactly @n bytes (fails on EOF or error) and checks the pattern. */
static void read_pat(struct up_end *r, uint64_t seed, uint64_t off, size_t n)
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
static size_t drain_pat(struct up_end *r, uint64_t seed, uint64_t off, bool *eof)
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
static size_t fill_nb(struct up_end *wnb, uint64_t seed, uint64_t off)
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

static uint64_t waits_of(struct up_pipe *p)
{
	struct up_stats st;

	CHECK_OK(up_stats(p, &st));
	return st.waits;
}

/* Raises the odds that a peer thread is really asleep in the library (the
 * `waits` statistic moved) before we act. Bounded; correctness never
 * depends on it. Returns whether a sleep was observed. */
static bool nudge_until_asleep(struct up_pipe *p, uint64_t waits_before)
{
	double until = harness_now() + 0.25;

	while (harness_now() < until) {
		if (waits_of(p) > waits_before)
			return true;
		sched_yield();
	}
	return false;
}

static void spin_until(atomic_int *flag)
{
	while (atomic_load_explicit(flag, memory_order_acquire) == 0)
		sched_yield();
}

/* ------------------------------------------------------------------ cases */

static void roundtrip_basic(void)
{
	struct up_end *ends[2] = { NULL, NULL };
	char buf[64];

	CHECK_OK(up_pipe2(ends, NULL));
	CHECK(ends[0] != NULL && ends[1] != NULL);
	CHECK_EQ(up_write(ends[1], "hello, pipe", 11), 11);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(up_read(ends[0], buf, sizeof(buf)), 11);
	CHECK(memcmp(buf, "hello, pipe", 11) == 0);
	/* ends[0] reads and ends[1] writes, not the other way round */
	CHECK_EQ(up_write(ends[0], "x", 1), -EBADF);
	CHECK_EQ(up_read(ends[1], buf, 1), -EBADF);
	CHECK_OK(up_close(ends[1]));
	CHECK_EQ(up_read(ends[0], buf, sizeof(buf)), 0);
	CHECK_OK(up_close(ends[0]));
}

struct inorder_arg {
	struct up_end *w;
	uint64_t seed;
	size_t total;
};

static const size_t wsizes[] = { 1, 2, 3, 7, 64, 100, 511, 4095, 4096, 4097, 8191,
				 65536, 100000, 1 << 20, 3 << 20, 5, 4096 * 3 + 1 };
static const size_t rsizes[] = { 1, 13, 4096, 65537, 1 << 20, 7, 4095, 300000, 2 };

static size_t inorder_total(void)
{
	size_t t = 0, i;

	for (i = 0; i < sizeof(wsizes) / sizeof(wsizes[0]); i++)
		t += wsizes[i];
	return 2 * t;
}

static void *inorder_writer(void *arg)
{
	struct inorder_arg *a = arg;
	uint64_t off = 0;
	uint8_t *buf = malloc(3 << 20);
	int round;
	size_t i;

	CHECK(buf != NULL);
	for (round = 0; round < 2; round++) {
		for (i = 0; i < sizeof(wsizes) / sizeof(wsizes[0]); i++) {
			harness_fill(a->seed, off, buf, wsizes[i]);
			/* a blocking write returns the full count */
			CHECK_EQ(up_write(a->w, buf, wsizes[i]), (ssize_t)wsizes[i]);
			off += wsizes[i];
		}
	}
	a->total = off;
	CHECK_OK(up_close(a->w));
	free(buf);
	return NULL;
}

static void inorder_case(size_t capacity, size_t page)
{
	struct up_pipe *p = mk_pipe(capacity, page);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct inorder_arg a = { w, 0x1234 + page, 0 };
	uint8_t *buf = malloc(1 << 20);
	uint64_t off = 0;
	pthread_t t;
	size_t i = 0;

	CHECK(buf != NULL);
	CHECK(pthread_create(&t, NULL, inorder_writer, &a) == 0);
	for (;;) {
		size_t ask = rsizes[i++ % (sizeof(rsizes) / sizeof(rsizes[0]))];
		ssize_t got = up_read(r, buf, ask);

		CHECK_OK(got);
		if (got == 0)
			break;
		CHECK((size_t)got <= ask);
		if (harness_verify(a.seed, off, buf, (size_t)got) != (size_t)-1) {
			fprintf(stderr, "mismatch near offset %llu\n", (unsigned long long)off);
			CHECK(0);
		}
		off += (uint64_t)got;
	}
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(off, a.total);
	CHECK_EQ(off, inorder_total());
	CHECK_OK(up_close(r));
	up_pipe_release(p);
	free(buf);
}

static void inorder_many_sizes_4k_pages(void)
{
	inorder_case(1 * MiB, 4096);
}

static void inorder_many_sizes_64k_pages(void)
{
	inorder_case(256 * KiB, 64 * KiB);
}

static void inorder_small_pipe(void)
{
	inorder_case(8 * KiB, 4096); /* the minimum: two pages */
}

static void read_returns_what_is_there_case(size_t page)
{
	struct up_pipe *p = mk_pipe(0, page);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	char buf[1000];
	ssize_t got;
	size_t total;

	/* blocking reader, fewer bytes than asked: returns them, no waiting
	 * (if it waited for more, the watchdog would fire) */
	CHECK_EQ(up_write(w, "0123456789", 10), 10);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 10);
	CHECK(memcmp(buf, "0123456789", 10) == 0);

	/* asked for fewer than there are: exactly what was asked */
	CHECK_EQ(up_write(w, "abcdefghij", 10), 10);
	CHECK_EQ(up_read(r, buf, 4), 4);
	CHECK(memcmp(buf, "abcd", 4) == 0);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 6);
	CHECK(memcmp(buf, "efghij", 6) == 0);

	/* three writes, one big read: at least 1, at most what is there */
	write_pat(w, 77, 0, 100);
	write_pat(w, 77, 100, 100);
	write_pat(w, 77, 200, 100);
	total = 0;
	while (total < 300) {
		got = up_read(r, buf, sizeof(buf));
		CHECK_OK(got);
		CHECK(got >= 1 && (size_t)got <= 300 - total);
		CHECK_EQ(harness_verify(77, total, buf, (size_t)got), (size_t)-1);
		total += (size_t)got;
	}
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void read_returns_what_is_there(void)
{
	read_returns_what_is_there_case(4096);
	read_returns_what_is_there_case(64 * KiB);
}

static void eof_after_writer_close(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct iovec iov[4];
	int cnt = 4;
	char c;

	write_pat(w, 5, 0, 1000);
	write_pat(w, 5, 1000, 9000);
	write_pat(w, 5, 10000, 40000);
	CHECK_OK(up_close(w));
	/* everything written before the close comes first, then EOF */
	read_pat(r, 5, 0, 50000);
	CHECK_EQ(up_read(r, &c, 1), 0);
	CHECK_EQ(up_read(r, &c, 1), 0); /* EOF is sticky */
	CHECK_EQ(up_peek(r, iov, &cnt), 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void eof_only_after_all_writers_close(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
	struct up_end *w1 = mk_end(p, UP_WR), *w2 = mk_end(p, UP_WR), *w3 = mk_end(p, UP_WR);
	bool eof;
	char c;

	write_pat(w1, 9, 0, 3000);
	CHECK_OK(up_close(w1));
	write_pat(w2, 9, 3000, 3000);
	CHECK_OK(up_close(w2));
	CHECK_EQ(drain_pat(r, 9, 0, &eof), 6000);
	CHECK(!eof);
	/* one writer is left: empty is "would block", not end of stream */
	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	write_pat(w3, 9, 6000, 5);
	CHECK_EQ(drain_pat(r, 9, 6000, &eof), 5);
	CHECK(!eof);
	write_pat(w3, 9, 6005, 7);
	CHECK_OK(up_close(w3));
	/* data before the last close, then EOF */
	CHECK_EQ(drain_pat(r, 9, 6005, &eof), 7);
	CHECK(eof);
	CHECK_EQ(up_read(r, &c, 1), 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void epipe_after_readers_close(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r1 = mk_end(p, UP_RD), *r2 = mk_end(p, UP_RD);
	struct up_end *w = mk_end(p, UP_WR), *wnb = mk_end(p, UP_WR | UP_NONBLOCK);
	struct iovec iov[4], wv = { "abc", 3 };
	int cnt = 4;

	CHECK_EQ(up_write(w, "abc", 3), 3);
	CHECK_OK(up_close(r1));
	CHECK_EQ(up_write(w, "abc", 3), 3); /* one reader left */
	CHECK_OK(up_close(r2));
	CHECK_EQ(up_write(w, "abc", 3), -EPIPE);
	CHECK_EQ(up_write(w, "abc", 3), -EPIPE);
	CHECK_EQ(up_writev(w, &wv, 1), -EPIPE);
	CHECK_EQ(up_reserve(w, 100, iov, &cnt), -EPIPE);
	CHECK_EQ(up_write(wnb, "abc", 3), -EPIPE);
	{
		uint8_t big[20000];

		memset(big, 1, sizeof(big));
		CHECK_EQ(up_write(w, big, sizeof(big)), -EPIPE);
	}
	/* (SIGPIPE would have failed the test through harness_fail_on_sigpipe) */
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(wnb));
	up_pipe_release(p);
}

static void epipe_beats_eagain_when_full(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *wnb = mk_end(p, UP_WR | UP_NONBLOCK);
	uint8_t buf[100] = { 0 };

	CHECK_EQ(fill_nb(wnb, 1, 0), 16 * KiB);
	CHECK_EQ(up_write(wnb, buf, 100), -EAGAIN);
	CHECK_OK(up_close(r));
	CHECK_EQ(up_write(wnb, buf, 100), -EPIPE);
	CHECK_OK(up_close(wnb));
	up_pipe_release(p);
}

static void nonblock_read_empty_eagain(void)
{
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct iovec iov[4], rv;
	int cnt = 4;
	char c;

	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	rv.iov_base = &c;
	rv.iov_len = 1;
	CHECK_EQ(up_readv(r, &rv, 1), -EAGAIN);
	CHECK_EQ(up_peek(r, iov, &cnt), -EAGAIN);
	/* and it is not stuck: data makes it readable */
	CHECK_EQ(up_write(w, "z", 1), 1);
	CHECK_EQ(up_read(r, &c, 1), 1);
	CHECK_EQ(c, 'z');
	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, &c, 1), 0); /* EOF wins over EAGAIN */
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void nonblock_write_full_eagain(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	struct iovec iov[4], wv = { "q", 1 };
	int cnt = 4;
	uint8_t big[10000];
	bool eof;

	/* a pipe of capacity C holds C bytes */
	CHECK_EQ(fill_nb(w, 3, 0), up_capacity(p));
	CHECK_EQ(up_write(w, "q", 1), -EAGAIN);
	CHECK_EQ(up_writev(w, &wv, 1), -EAGAIN);
	memset(big, 0, sizeof(big));
	CHECK_EQ(up_write(w, big, sizeof(big)), -EAGAIN); /* no progress: EAGAIN, not 0 */
	CHECK_EQ(up_reserve(w, 100, iov, &cnt), -EAGAIN);
	/* a page's worth read makes room for a page's worth written */
	read_pat(r, 3, 0, 4096);
	write_pat(w, 3, up_capacity(p), 4096);
	CHECK_EQ(drain_pat(r, 3, 4096, &eof), up_capacity(p));
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/* Leaves exactly @room bytes free, all in the last page. */
static void fill_leaving(struct up_end *w, size_t cap, size_t room, uint64_t seed)
{
	size_t off = 0;

	while (cap - off > 4096) {
		write_pat(w, seed, off, 4096);
		off += 4096;
	}
	write_pat(w, seed, off, cap - off - room);
}

static void nonblock_small_write_all_or_nothing(void)
{
	static const size_t rooms[] = { 1, 100, 2048, 4095 };
	size_t i;

	for (i = 0; i < sizeof(rooms) / sizeof(rooms[0]); i++) {
		struct up_pipe *p = mk_pipe(64 * KiB, 4096);
		struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
		struct up_end *w = mk_end(p, UP_WR | UP_NONBLOCK);
		size_t cap = up_capacity(p), room = rooms[i];
		uint8_t buf[4096];
		struct iovec wv[2];
		bool eof;

		CHECK_EQ(cap, 64 * KiB);
		fill_leaving(w, cap, room, 11);
		memset(buf, 0xEE, sizeof(buf));
		/* room+1 .. 4096 bytes do not fit: nothing may be written */
		CHECK_EQ(up_write(w, buf, 4096), -EAGAIN);
		CHECK_EQ(up_write(w, buf, room + 1), -EAGAIN);
		wv[0].iov_base = buf;
		wv[0].iov_len = (room + 1) / 2 + 1;
		wv[1].iov_base = buf;
		wv[1].iov_len = room + 1 - wv[0].iov_len;
		CHECK_EQ(up_writev(w, wv, 2), -EAGAIN);
		/* what is in the pipe is exactly what was written, no 0xEE */
		CHECK_EQ(drain_pat(r, 11, 0, &eof), cap - room);
		CHECK(!eof);
		CHECK_OK(up_close(w));
		CHECK_EQ(drain_pat(r, 11, cap - room, &eof), 0);
		CHECK(eof);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

/* DESIGN.md "Data path" 1: a small write appends in place when the last
 * published page has room, so a non-blocking write that fits is accepted. */
static void nonblock_small_write_uses_room_in_last_page(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
	struct up_end *w = mk_end(p, UP_WR | UP_NONBLOCK);
	size_t cap = up_capacity(p);
	uint8_t buf[100];
	bool eof;

	fill_leaving(w, cap, 100, 12);
	harness_fill(12, cap - 100, buf, 60);
	CHECK_EQ(up_write(w, buf, 60), 60);
	harness_fill(12, cap - 40, buf, 40);
	CHECK_EQ(up_write(w, buf, 40), 40);
	CHECK_EQ(up_write(w, buf, 1), -EAGAIN);
	CHECK_EQ(drain_pat(r, 12, 0, &eof), cap);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void nonblock_large_write_partial(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
	struct up_end *w = mk_end(p, UP_WR | UP_NONBLOCK);
	size_t cap = up_capacity(p);
	uint8_t *buf = malloc(200000);
	bool eof;

	CHECK(buf != NULL);
	/* empty pipe, write larger than the capacity: partial, as many bytes
	 * as fit (pipe(7)), and the count is returned */
	harness_fill(13, 0, buf, 200000);
	CHECK_EQ(up_write(w, buf, 200000), (ssize_t)cap);
	CHECK_EQ(up_write(w, buf, 200000), -EAGAIN); /* full: no progress */
	/* one page free, a 10000-byte write: exactly that page */
	read_pat(r, 13, 0, 4096);
	harness_fill(13, cap, buf, 10000);
	CHECK_EQ(up_write(w, buf, 10000), 4096);
	CHECK_EQ(drain_pat(r, 13, 4096, &eof), cap);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
	free(buf);
}

struct blk_arg {
	struct up_end *e;
	atomic_int started;
	uint64_t seed, off;
	size_t len;
	ssize_t ret;
	uint8_t buf[256];
};

static void *blk_writer(void *arg)
{
	struct blk_arg *a = arg;
	uint8_t *buf = malloc(a->len);

	CHECK(buf != NULL);
	harness_fill(a->seed, a->off, buf, a->len);
	atomic_store_explicit(&a->started, 1, memory_order_release);
	a->ret = up_write(a->e, buf, a->len);
	free(buf);
	return NULL;
}

static void blocking_writer_woken_by_reader(void)
{
	int round, slept = 0;

	for (round = 0; round < 8; round++) {
		struct up_pipe *p = mk_pipe(32 * KiB, 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct up_end *wnb = mk_end(p, UP_WR | UP_NONBLOCK);
		struct blk_arg a;
		size_t full;
		uint64_t w0;
		pthread_t t;

		full = fill_nb(wnb, 21, 0);
		CHECK_EQ(full, up_capacity(p));
		CHECK_OK(up_close(wnb)); /* w keeps the stream open */
		memset(&a, 0, sizeof(a));
		a.e = w;
		a.seed = 21;
		a.off = full;
		a.len = round % 2 ? 100 : 3 * 4096 + 123;
		w0 = waits_of(p);
		CHECK(pthread_create(&t, NULL, blk_writer, &a) == 0);
		spin_until(&a.started);
		slept += nudge_until_asleep(p, w0);
		/* the reader drains: the blocked writer must wake and finish */
		read_pat(r, 21, 0, full + a.len);
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(a.ret, (ssize_t)a.len);
		CHECK_OK(up_close(w));
		CHECK_EQ(up_read(r, a.buf, 1), 0);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
	printf("# blocking_writer_woken_by_reader: writer seen asleep in %d/8 rounds\n", slept);
}

static void *blk_reader(void *arg)
{
	struct blk_arg *a = arg;

	atomic_store_explicit(&a->started, 1, memory_order_release);
	a->ret = up_read(a->e, a->buf, sizeof(a->buf));
	return NULL;
}

static void blocking_reader_woken_by_writer(void)
{
	int round, slept = 0;

	for (round = 0; round < 16; round++) {
		struct up_pipe *p = mk_pipe(0, round % 2 ? 64 * KiB : 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct blk_arg a;
		uint64_t w0;
		pthread_t t;

		memset(&a, 0, sizeof(a));
		a.e = r;
		w0 = waits_of(p);
		CHECK(pthread_create(&t, NULL, blk_reader, &a) == 0);
		spin_until(&a.started);
		slept += nudge_until_asleep(p, w0);
		CHECK_EQ(up_write(w, "wake!", 5), 5);
		CHECK(pthread_join(t, NULL) == 0);
		CHECK(a.ret >= 1 && a.ret <= 5);
		CHECK(memcmp(a.buf, "wake!", (size_t)a.ret) == 0);
		if (a.ret < 5) {
			char rest[5];

			CHECK_EQ(up_read(r, rest, 5), 5 - a.ret);
			CHECK(memcmp(rest, &"wake!"[a.ret], (size_t)(5 - a.ret)) == 0);
		}
		CHECK_OK(up_close(w));
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
	printf("# blocking_reader_woken_by_writer: reader seen asleep in %d/16 rounds\n", slept);
}

static void blocking_reader_woken_by_last_writer_close(void)
{
	int round, slept = 0;

	for (round = 0; round < 16; round++) {
		struct up_pipe *p = mk_pipe(0, round % 2 ? 64 * KiB : 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct up_end *w2 = mk_end(p, UP_WR);
		struct blk_arg a;
		uint64_t w0;
		pthread_t t;

		/* a second writer that closes first: not the last one */
		CHECK_OK(up_close(w2));
		memset(&a, 0, sizeof(a));
		a.e = r;
		a.ret = -12345;
		w0 = waits_of(p);
		CHECK(pthread_create(&t, NULL, blk_reader, &a) == 0);
		spin_until(&a.started);
		slept += nudge_until_asleep(p, w0);
		CHECK_OK(up_close(w));
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(a.ret, 0);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
	printf("# blocking_reader_woken_by_last_writer_close: reader seen asleep in %d/16 rounds\n",
	       slept);
}

static void *blk_peeker(void *arg)
{
	struct blk_arg *a = arg;
	struct iovec iov[4];
	int cnt = 4;

	atomic_store_explicit(&a->started, 1, memory_order_release);
	a->ret = up_peek(a->e, iov, &cnt);
	return NULL;
}

static void blocking_peek_woken_by_last_writer_close(void)
{
	int round;

	for (round = 0; round < 8; round++) {
		struct up_pipe *p = mk_pipe(0, 0);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct blk_arg a;
		uint64_t w0;
		pthread_t t;

		memset(&a, 0, sizeof(a));
		a.e = r;
		a.ret = -12345;
		w0 = waits_of(p);
		CHECK(pthread_create(&t, NULL, blk_peeker, &a) == 0);
		spin_until(&a.started);
		nudge_until_asleep(p, w0);
		CHECK_OK(up_close(w));
		CHECK(pthread_join(t, NULL) == 0);
		CHECK_EQ(a.ret, 0);
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

static void blocking_writer_woken_by_last_reader_close(void)
{
	int round;

	for (round = 0; round < 8; round++) {
		struct up_pipe *p = mk_pipe(16 * KiB, 4096);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		struct up_end *wnb = mk_end(p, UP_WR | UP_NONBLOCK);
		struct blk_arg a;
		uint64_t w0;
		pthread_t t;

		CHECK_EQ(fill_nb(wnb, 22, 0), up_capacity(p));
		CHECK_OK(up_close(wnb));
		memset(&a, 0, sizeof(a));
		a.e = w;
		a.seed = 22;
		a.len = round % 2 ? 10 : 3 * 4096;
		a.ret = -12345;
		w0 = waits_of(p);
		CHECK(pthread_create(&t, NULL, blk_writer, &a) == 0);
		spin_until(&a.started);
		nudge_until_asleep(p, w0);
		CHECK_OK(up_close(r));
		CHECK(pthread_join(t, NULL) == 0);
		/* full pipe, no progress possible: the writer gets -EPIPE */
		CHECK_EQ(a.ret, -EPIPE);
		CHECK_OK(up_close(w));
		up_pipe_release(p);
	}
}

static void ebadf_wrong_direction(void)
{
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	struct iovec iov[4], v;
	char buf[16];
	int cnt;

	CHECK_EQ(up_write(w, "data", 4), 4); /* non-empty: EAGAIN is not an option */
	v.iov_base = buf;
	v.iov_len = sizeof(buf);

	CHECK_EQ(up_read(w, buf, sizeof(buf)), -EBADF);
	CHECK_EQ(up_readv(w, &v, 1), -EBADF);
	cnt = 4;
	CHECK_EQ(up_peek(w, iov, &cnt), -EBADF);
	CHECK_EQ(up_consume(w, 1), -EBADF);

	CHECK_EQ(up_write(r, "x", 1), -EBADF);
	CHECK_EQ(up_writev(r, &v, 1), -EBADF);
	cnt = 4;
	CHECK_EQ(up_reserve(r, 100, iov, &cnt), -EBADF);
	CHECK_EQ(up_commit(r, 0), -EBADF);

	/* the right directions still work and nothing was consumed */
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 4);
	CHECK(memcmp(buf, "data", 4) == 0);
	CHECK_OK(up_close(r));
	CHECK_OK(up_close(w));
	up_pipe_release(p);
}

static void einval_null_args(void)
{
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	struct up_end *e = NULL;
	struct up_stats st;
	struct iovec iov[4];
	char buf[16];
	int cnt = 4;

	CHECK_EQ(up_pipe_create(NULL, NULL), -EINVAL);
	CHECK_EQ(up_pipe_attach(up_pipe_fd(p), NULL), -EINVAL);
	CHECK_EQ(up_pipe_fd(NULL), -EINVAL);
	CHECK(up_pipe_fd(p) >= 0);
	CHECK_EQ(up_open(NULL, UP_RD, &e), -EINVAL);
	CHECK_EQ(up_open(p, UP_RD, NULL), -EINVAL);
	CHECK_EQ(up_pipe2(NULL, NULL), -EINVAL);
	CHECK_EQ(up_stats(NULL, &st), -EINVAL);
	CHECK_EQ(up_stats(p, NULL), -EINVAL);

	CHECK_EQ(up_write(w, "data", 4), 4); /* non-empty, so reads would succeed */
	CHECK_EQ(up_write(NULL, "x", 1), -EINVAL);
	CHECK_EQ(up_write(w, NULL, 10), -EINVAL);
	CHECK_EQ(up_read(NULL, buf, 1), -EINVAL);
	CHECK_EQ(up_read(r, NULL, 10), -EINVAL);
	CHECK_EQ(up_writev(NULL, iov, 1), -EINVAL);
	CHECK_EQ(up_writev(w, NULL, 1), -EINVAL);
	CHECK_EQ(up_writev(w, iov, -1), -EINVAL);
	CHECK_EQ(up_readv(NULL, iov, 1), -EINVAL);
	CHECK_EQ(up_readv(r, NULL, 1), -EINVAL);
	CHECK_EQ(up_readv(r, iov, -1), -EINVAL);
	CHECK_EQ(up_reserve(NULL, 10, iov, &cnt), -EINVAL);
	CHECK_EQ(up_reserve(w, 10, NULL, &cnt), -EINVAL);
	CHECK_EQ(up_reserve(w, 10, iov, NULL), -EINVAL);
	CHECK_EQ(up_commit(NULL, 0), -EINVAL);
	CHECK_EQ(up_peek(NULL, iov, &cnt), -EINVAL);
	CHECK_EQ(up_peek(r, NULL, &cnt), -EINVAL);
	CHECK_EQ(up_peek(r, iov, NULL), -EINVAL);
	CHECK_EQ(up_consume(NULL, 0), -EINVAL);

	/* nothing above disturbed the stream */
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 4);
	CHECK(memcmp(buf, "data", 4) == 0);
	CHECK_OK(up_close(r));
	CHECK_OK(up_close(w));
	up_pipe_release(p);
}

static void einval_open_flags(void)
{
	static const int bad[] = { 0, UP_RD | UP_WR, UP_RD | UP_WR | UP_NONBLOCK, UP_NONBLOCK,
				   0x8, UP_RD | 0x8, UP_WR | 0x100, UP_RD | (int)0x40000000,
				   -1 };
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_stats st;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct up_end *e = NULL;
		int r = up_open(p, bad[i], &e);

		if (r != -EINVAL)
			fprintf(stderr, "up_open flags %#x\n", (unsigned)bad[i]);
		CHECK_EQ(r, -EINVAL);
	}
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.readers, 0); /* failed opens left nothing behind */
	CHECK_EQ(st.writers, 0);
	/* and the good ones work */
	{
		struct up_end *a = mk_end(p, UP_RD), *b = mk_end(p, UP_WR | UP_NONBLOCK);
		struct up_end *c = mk_end(p, UP_RD | UP_NONBLOCK), *d = mk_end(p, UP_WR);

		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.readers, 2);
		CHECK_EQ(st.writers, 2);
		CHECK_OK(up_close(a));
		CHECK_OK(up_close(b));
		CHECK_OK(up_close(c));
		CHECK_OK(up_close(d));
	}
	up_pipe_release(p);
}

static int create_with(void (*tweak)(struct up_config *))
{
	struct up_config cfg;
	struct up_pipe *p = NULL;
	int r;

	up_config_init(&cfg);
	tweak(&cfg);
	r = up_pipe_create(&cfg, &p);
	if (r == 0) {
		CHECK(p != NULL);
		up_pipe_release(p);
	}
	return r;
}

static void tw_none(struct up_config *c) { (void)c; }
static void tw_flag2(struct up_config *c) { c->flags = 0x2; }
static void tw_flag_hi(struct up_config *c) { c->flags = 0x80000000u; }
static void tw_flag_all_plus(struct up_config *c) { c->flags = UP_CFG_ALL | (UP_CFG_ALL << 1); }
static void tw_page_npot(struct up_config *c) { c->page_size = 6000; }
static void tw_page_npot2(struct up_config *c) { c->page_size = 4096 + 4096 / 2; }
static void tw_page_small(struct up_config *c) { c->page_size = 2048; }
static void tw_page_one(struct up_config *c) { c->page_size = 1; }
static void tw_page_huge(struct up_config *c) { c->page_size = 2 * MiB; }
static void tw_size0(struct up_config *c) { c->size = 0; }
/* too small to hold every field (trailing padding may be left out) */
static void tw_size_small(struct up_config *c)
{
	c->size = (uint32_t)(offsetof(struct up_config, numa_node) + sizeof(c->numa_node) - 1);
}
static void tw_size_4(struct up_config *c) { c->size = 4; }
static void tw_cap_huge(struct up_config *c) { c->capacity = ((size_t)1 << 30) + 1; }
static void tw_cap_max(struct up_config *c) { c->capacity = SIZE_MAX; }
static void tw_numa_bad(struct up_config *c) { c->numa_node = 100000; }

static void einval_config(void)
{
	CHECK_EQ(create_with(tw_none), 0);
	CHECK_EQ(create_with(tw_flag2), -EINVAL);
	CHECK_EQ(create_with(tw_flag_hi), -EINVAL);
	CHECK_EQ(create_with(tw_flag_all_plus), -EINVAL);
	CHECK_EQ(create_with(tw_page_npot), -EINVAL);
	CHECK_EQ(create_with(tw_page_npot2), -EINVAL);
	CHECK_EQ(create_with(tw_page_small), -EINVAL);
	CHECK_EQ(create_with(tw_page_one), -EINVAL);
	CHECK_EQ(create_with(tw_page_huge), -EINVAL);
	CHECK_EQ(create_with(tw_size0), -EINVAL);
	CHECK_EQ(create_with(tw_size_small), -EINVAL);
	CHECK_EQ(create_with(tw_size_4), -EINVAL);
	CHECK_EQ(create_with(tw_cap_huge), -EINVAL);
	CHECK_EQ(create_with(tw_cap_max), -EINVAL);
	CHECK_EQ(create_with(tw_numa_bad), -EINVAL);
	{
		struct up_end *ends[2] = { NULL, NULL };
		struct up_config cfg;

		up_config_init(&cfg);
		cfg.flags = 0x40;
		CHECK_EQ(up_pipe2(ends, &cfg), -EINVAL);
	}
}

static void capacity_rounding(void)
{
	static const struct { size_t ask, page, want; } cases[] = {
		{ 0, 0, 1 * MiB },
		{ 100000, 4096, 102400 },
		{ 100000, 8192, 106496 },
		{ 100000, 64 * KiB, 131072 },
		{ 65536, 4096, 65536 },
		{ 65537, 4096, 69632 },
		{ 3 * MiB + 1, 1 * MiB, 4 * MiB },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct up_pipe *p = mk_pipe(cases[i].ask, cases[i].page);
		size_t cap = up_capacity(p), pg = up_page_size(p);

		CHECK_EQ(pg, cases[i].page ? cases[i].page : 4096);
		CHECK(cap >= cases[i].ask);
		CHECK_EQ(cap % pg, 0);
		CHECK(cap < (cases[i].ask ? cases[i].ask : 1 * MiB) + pg);
		CHECK_EQ(cap, cases[i].want);
		up_pipe_release(p);
	}
	/* tiny capacities: either refused or at least the two-page minimum */
	{
		struct up_config cfg;
		struct up_pipe *p = NULL;
		int r;

		up_config_init(&cfg);
		cfg.capacity = 1;
		r = up_pipe_create(&cfg, &p);
		CHECK(r == 0 || r == -EINVAL);
		if (r == 0) {
			CHECK(up_capacity(p) >= 2 * up_page_size(p));
			up_pipe_release(p);
		}
	}
}

static void zero_length_io(void)
{
	struct up_pipe *p = mk_pipe(16 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	struct iovec v[2] = { { "", 0 }, { "", 0 } };
	char c;

	CHECK_EQ(up_write(w, "abc", 0), 0);
	CHECK_EQ(up_writev(w, v, 2), 0);
	CHECK_EQ(up_writev(w, v, 0), 0);
	/* blocking reader, empty pipe, len 0: returns 0 at once */
	CHECK_EQ(up_read(r, &c, 0), 0);
	/* a zero-length write on a full non-blocking end is still 0 */
	CHECK_EQ(fill_nb(w, 1, 0), 16 * KiB);
	CHECK_EQ(up_write(w, "abc", 0), 0);
	/* no zero-length "record" appeared: the stream is intact */
	read_pat(r, 1, 0, 16 * KiB);
	CHECK_EQ(up_write(w, "end", 3), 3);
	CHECK_OK(up_close(w));
	{
		char buf[8];

		CHECK_EQ(up_read(r, buf, sizeof(buf)), 3);
		CHECK(memcmp(buf, "end", 3) == 0);
		CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	}
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/*
 * Whole pages are copied with streaming stores (ring.c, copy_nt()), which
 * split each piece into an unaligned head, 64- and 16-byte blocks and a
 * tail: pages filled from many odd-sized, oddly aligned pieces, and from a
 * source at every alignment, must arrive byte for byte.
 */
static void full_pages_from_odd_pieces(void)
{
	static const size_t pages[] = { 4096, 64 * KiB };
	static uint8_t src[3 * 64 * KiB + 64], dst[3 * 64 * KiB + 64];
	size_t pi;

	harness_fill(46, 0, src, sizeof(src));
	for (pi = 0; pi < 2; pi++) {
		struct up_pipe *p = mk_pipe(256 * KiB, pages[pi]);
		struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
		size_t total = 3 * pages[pi], off = 0, got = 0, a;
		struct iovec v[1024];
		int n = 0;

		/* pieces of 1, 2, ... 61 bytes, then 1 again, from odd offsets */
		while (off < total && n < 1024) {
			size_t k = (size_t)(n % 61) + 1;

			if (k > total - off || n == 1023)
				k = total - off;
			v[n].iov_base = src + 1 + off;
			v[n].iov_len = k;
			off += k;
			n++;
		}
		CHECK_EQ(off, total);
		CHECK_EQ(up_writev(w, v, n), (ssize_t)total);
		while (got < total) {
			ssize_t k = up_read(r, dst + got, total - got);

			CHECK(k > 0);
			got += (size_t)k;
		}
		CHECK(memcmp(src + 1, dst, total) == 0);
		/* one whole page from a source at each alignment 0..16 */
		for (a = 0; a <= 16; a++) {
			CHECK_EQ(up_write(w, src + a, pages[pi]), (ssize_t)pages[pi]);
			for (got = 0; got < pages[pi];) {
				ssize_t k = up_read(r, dst + got, pages[pi] - got);

				CHECK(k > 0);
				got += (size_t)k;
			}
			CHECK(memcmp(src + a, dst, pages[pi]) == 0);
		}
		CHECK_OK(up_close(w));
		CHECK_OK(up_close(r));
		up_pipe_release(p);
	}
}

static void writev_readv_gather_scatter(void)
{
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	uint8_t src[20000], dst[20000];
	struct iovec wv[5], rv[4];
	size_t got = 0;

	harness_fill(31, 0, src, sizeof(src));
	wv[0].iov_base = src;
	wv[0].iov_len = 1;
	wv[1].iov_base = src + 1;
	wv[1].iov_len = 0;
	wv[2].iov_base = src + 1;
	wv[2].iov_len = 4999;
	wv[3].iov_base = src + 5000;
	wv[3].iov_len = 10000;
	wv[4].iov_base = src + 15000;
	wv[4].iov_len = 5000;
	CHECK_EQ(up_writev(w, wv, 5), 20000);

	memset(dst, 0, sizeof(dst));
	while (got < sizeof(dst)) {
		/* scatter into four uneven pieces of what is still missing */
		size_t left = sizeof(dst) - got;
		size_t a = left / 7, b = left / 3, c = 1;
		ssize_t n;

		if (a + b + c > left)
			a = b = 0, c = left;
		rv[0].iov_base = dst + got;
		rv[0].iov_len = a;
		rv[1].iov_base = dst + got + a;
		rv[1].iov_len = b;
		rv[2].iov_base = dst + got + a + b;
		rv[2].iov_len = c;
		rv[3].iov_base = dst + got + a + b + c;
		rv[3].iov_len = left - a - b - c;
		n = up_readv(r, rv, 4);
		CHECK_OK(n);
		CHECK(n > 0 && (size_t)n <= left);
		got += (size_t)n;
	}
	CHECK(memcmp(src, dst, sizeof(src)) == 0);

	/* IOV_MAX */
	{
		static struct iovec many[1025];
		static char ones[1025];
		int i;

		memset(ones, 'x', sizeof(ones));
		for (i = 0; i < 1025; i++) {
			many[i].iov_base = ones + i;
			many[i].iov_len = 1;
		}
		CHECK_EQ(up_writev(w, many, 1025), -EINVAL);
		CHECK_EQ(up_writev(w, many, 1024), 1024);
		CHECK_EQ(up_readv(r, many, 1025), -EINVAL);
		memset(ones, 0, sizeof(ones));
		got = 0;
		while (got < 1024) {
			ssize_t n = up_readv(r, many + got, (int)(1024 - got));

			CHECK_OK(n);
			CHECK(n > 0);
			got += (size_t)n;
		}
		CHECK_EQ(got, 1024);
		for (i = 0; i < 1024; i++)
			CHECK_EQ(ones[i], 'x');
	}
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

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

static void stats_counts(void)
{
	static const size_t sz[] = { 100, 200, 300, 400, 500 };
	struct up_pipe *p = mk_pipe(0, 0);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct up_stats st;
	uint64_t reads = 0;
	size_t i, total = 0;
	char buf[256];

	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.bytes_written, 0);
	CHECK_EQ(st.bytes_read, 0);
	CHECK_EQ(st.writes, 0);
	CHECK_EQ(st.reads, 0);
	CHECK_EQ(st.readers, 1);
	CHECK_EQ(st.writers, 1);
	CHECK(st.backend[0] != '\0');
	CHECK(memchr(st.backend, '\0', sizeof(st.backend)) != NULL);
	CHECK(strcmp(st.backend, "io_uring") == 0 || strcmp(st.backend, "io_uring-sqpoll") == 0 ||
	      strcmp(st.backend, "futex") == 0);

	for (i = 0; i < 5; i++) {
		write_pat(w, 51, total, sz[i]);
		total += sz[i];
	}
	total = 0;
	while (total < 1500) {
		ssize_t n = up_read(r, buf, sizeof(buf)); /* 256 at most: several reads */

		CHECK_OK(n);
		CHECK(n > 0);
		total += (size_t)n;
		reads++;
	}
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.bytes_written, 1500);
	CHECK_EQ(st.bytes_read, 1500);
	CHECK_EQ(st.writes, 5);
	CHECK_EQ(st.reads, reads);

	{
		struct up_end *w2 = mk_end(p, UP_WR), *r2 = mk_end(p, UP_RD);

		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.readers, 2);
		CHECK_EQ(st.writers, 2);
		CHECK_OK(up_close(w2));
		CHECK_OK(up_close(r2));
	}
	CHECK_OK(up_close(r));
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.readers, 0);
	CHECK_EQ(st.writers, 1);
	/* counters of closed endpoints still count */
	CHECK_EQ(st.bytes_read, 1500);
	CHECK_EQ(st.bytes_written, 1500);
	CHECK_OK(up_close(w));
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.writers, 0);
	CHECK_EQ(st.writes, 5);
	up_pipe_release(p);
}

static void destructors_accept_null(void)
{
	up_pipe_release(NULL);
	CHECK_EQ(up_close(NULL), 0);
}

static void release_before_close_keeps_ends(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	struct up_stats st;
	char c;

	up_pipe_release(p);
	/* the ends keep the mapping (and the pipe handle) alive */
	write_pat(w, 52, 0, 50000);
	read_pat(r, 52, 0, 50000);
	CHECK(up_end_pipe(r) != NULL);
	CHECK(up_end_pipe(r) == up_end_pipe(w));
	CHECK_OK(up_stats(up_end_pipe(r), &st));
	CHECK_EQ(st.bytes_written, 50000);
	CHECK_EQ(up_capacity(up_end_pipe(w)), 64 * KiB);
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, &c, 1), 0);
	CHECK_OK(up_close(r));
}

/* ---- atomicity: 4 writers, records that must never be interleaved ---- */

#define AT_WRITERS 4
#define AT_RECORDS 1500

struct at_writer {
	struct up_end *w;
	uint32_t id;
	int varsize;
};

/* record: u32 id, u32 seq, u32 len (whole record), body = pattern */
static size_t at_len(uint32_t id, uint32_t seq, int varsize)
{
	if (!varsize)
		return UP_PIPE_BUF;
	return 12 + (size_t)(harness_mix64(((uint64_t)id << 32) | seq) % (UP_PIPE_BUF - 12 + 1));
}

static void *at_writer_fn(void *arg)
{
	struct at_writer *a = arg;
	uint8_t rec[UP_PIPE_BUF];
	uint32_t seq;

	for (seq = 0; seq < AT_RECORDS; seq++) {
		uint32_t len = (uint32_t)at_len(a->id, seq, a->varsize);

		memcpy(rec, &a->id, 4);
		memcpy(rec + 4, &seq, 4);
		memcpy(rec + 8, &len, 4);
		harness_fill(((uint64_t)a->id << 32) | seq, 0, rec + 12, len - 12);
		CHECK_EQ(up_write(a->w, rec, len), (ssize_t)len);
	}
	CHECK_OK(up_close(a->w));
	return NULL;
}

static void atomic_case(size_t page, int varsize)
{
	struct up_pipe *p = mk_pipe(256 * KiB, page);
	struct up_end *r = mk_end(p, UP_RD);
	struct at_writer wa[AT_WRITERS];
	pthread_t t[AT_WRITERS];
	uint32_t next[AT_WRITERS] = { 0 };
	uint8_t *buf = malloc(64 * KiB);
	size_t fill = 0, done = 0;
	struct harness_rng rng;
	int i;

	CHECK(buf != NULL);
	harness_rng_seed(&rng, page * 3 + (size_t)varsize);
	for (i = 0; i < AT_WRITERS; i++) {
		wa[i].w = mk_end(p, UP_WR);
		wa[i].id = (uint32_t)i;
		wa[i].varsize = varsize;
	}
	for (i = 0; i < AT_WRITERS; i++)
		CHECK(pthread_create(&t[i], NULL, at_writer_fn, &wa[i]) == 0);
	for (;;) {
		/* arbitrary read sizes: the reader must not rely on boundaries */
		size_t room = 64 * KiB - fill;
		size_t ask = (size_t)harness_rng_range(&rng, 1, room);
		ssize_t n = up_read(r, buf + fill, ask);
		size_t pos = 0;

		CHECK_OK(n);
		if (n == 0)
			break;
		fill += (size_t)n;
		while (fill - pos >= 12) {
			uint32_t id, seq, len;

			memcpy(&id, buf + pos, 4);
			memcpy(&seq, buf + pos + 4, 4);
			memcpy(&len, buf + pos + 8, 4);
			if (id >= AT_WRITERS || seq != next[id] ||
			    len != at_len(id, seq, varsize)) {
				fprintf(stderr,
					"record %zu: bad header id=%u seq=%u len=%u (expected seq %u)\n",
					done, id, seq, len, id < AT_WRITERS ? next[id] : 0);
				CHECK(0);
			}
			if (fill - pos < len)
				break;
			if (harness_verify(((uint64_t)id << 32) | seq, 0, buf + pos + 12, len - 12) !=
			    (size_t)-1) {
				fprintf(stderr, "record %zu (writer %u seq %u) interleaved/corrupt\n",
					done, id, seq);
				CHECK(0);
			}
			next[id]++;
			done++;
			pos += len;
		}
		memmove(buf, buf + pos, fill - pos);
		fill -= pos;
	}
	CHECK_EQ(fill, 0);
	for (i = 0; i < AT_WRITERS; i++) {
		CHECK(pthread_join(t[i], NULL) == 0);
		CHECK_EQ(next[i], AT_RECORDS);
	}
	CHECK_EQ(done, (size_t)AT_WRITERS * AT_RECORDS);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
	free(buf);
}

static void atomic_4_writers_4k_records_4k_pages(void)
{
	atomic_case(4096, 0);
}

static void atomic_4_writers_4k_records_64k_pages(void)
{
	atomic_case(64 * KiB, 0);
}

static void atomic_4_writers_var_records_4k_pages(void)
{
	atomic_case(4096, 1);
}

static void atomic_4_writers_var_records_64k_pages(void)
{
	atomic_case(64 * KiB, 1);
}

/* ---- sizes: writes larger than the capacity ---- */

struct big_arg {
	struct up_end *w;
	size_t len;
	ssize_t ret;
};

static void *big_writer(void *arg)
{
	struct big_arg *a = arg;
	uint8_t *buf = malloc(a->len);

	CHECK(buf != NULL);
	harness_fill(61, 0, buf, a->len);
	a->ret = up_write(a->w, buf, a->len);
	CHECK_OK(up_close(a->w));
	free(buf);
	return NULL;
}

static void big_write_case(size_t cap, size_t page)
{
	struct up_pipe *p = mk_pipe(cap, page);
	struct up_end *r = mk_end(p, UP_RD);
	struct big_arg a = { mk_end(p, UP_WR), 8 * MiB, 0 };
	uint8_t *buf = malloc(1 * MiB);
	struct harness_rng rng;
	uint64_t off = 0;
	pthread_t t;

	CHECK(buf != NULL);
	harness_rng_seed(&rng, cap ^ page);
	CHECK(pthread_create(&t, NULL, big_writer, &a) == 0);
	for (;;) {
		size_t ask = (size_t)harness_rng_range(&rng, 1, 1 * MiB);
		ssize_t n = up_read(r, buf, ask);

		CHECK_OK(n);
		if (n == 0)
			break;
		CHECK_EQ(harness_verify(61, off, buf, (size_t)n), (size_t)-1);
		off += (uint64_t)n;
	}
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_EQ(a.ret, (ssize_t)(8 * MiB)); /* one blocking call, all of it */
	CHECK_EQ(off, 8 * MiB);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
	free(buf);
}

static void write_larger_than_capacity(void)
{
	big_write_case(64 * KiB, 4096);
	big_write_case(128 * KiB, 64 * KiB);
}

static void write_smaller_than_capacity(void)
{
	struct up_pipe *p = mk_pipe(4 * MiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	bool eof;

	/* fits whole: a non-blocking end takes it in one call */
	{
		uint8_t *buf = malloc(3 * MiB);

		CHECK(buf != NULL);
		harness_fill(62, 0, buf, 3 * MiB);
		CHECK_EQ(up_write(w, buf, 3 * MiB), (ssize_t)(3 * MiB));
		free(buf);
	}
	CHECK_EQ(drain_pat(r, 62, 0, &eof), 3 * MiB);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

/* --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(120);
	harness_fail_on_sigpipe();

	RUN(roundtrip_basic);
	RUN(inorder_many_sizes_4k_pages);
	RUN(inorder_many_sizes_64k_pages);
	RUN(inorder_small_pipe);
	RUN(read_returns_what_is_there);
	RUN(eof_after_writer_close);
	RUN(eof_only_after_all_writers_close);
	RUN(epipe_after_readers_close);
	RUN(epipe_beats_eagain_when_full);
	RUN(nonblock_read_empty_eagain);
	RUN(nonblock_write_full_eagain);
	RUN(nonblock_small_write_all_or_nothing);
	RUN(nonblock_small_write_uses_room_in_last_page);
	RUN(nonblock_large_write_partial);
	RUN(blocking_writer_woken_by_reader);
	RUN(blocking_reader_woken_by_writer);
	RUN(blocking_reader_woken_by_last_writer_close);
	RUN(blocking_peek_woken_by_last_writer_close);
	RUN(blocking_writer_woken_by_last_reader_close);
	RUN(ebadf_wrong_direction);
	RUN(einval_null_args);
	RUN(einval_open_flags);
	RUN(einval_config);
	RUN(capacity_rounding);
	RUN(zero_length_io);
	RUN(writev_readv_gather_scatter);
	RUN(full_pages_from_odd_pieces);
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
	RUN(stats_counts);
	RUN(destructors_accept_null);
	RUN(release_before_close_keeps_ends);
	RUN(atomic_4_writers_4k_records_4k_pages);
	RUN(atomic_4_writers_4k_records_64k_pages);
	RUN(atomic_4_writers_var_records_4k_pages);
	RUN(atomic_4_writers_var_records_64k_pages);
	RUN(write_larger_than_capacity);
	RUN(write_smaller_than_capacity);
	return 0;
}
