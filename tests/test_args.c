/* SPDX-License-Identifier: MIT */
/*
 * test_args.c - what the API refuses: an end used in the wrong direction
 * (-EBADF), NULL arguments, bad open flags and bad configurations (-EINVAL),
 * each refusal leaving the pipe and its stream undisturbed; how a
 * requested capacity is rounded to whole pages; and lengths near SIZE_MAX
 * (and iovec totals that wrap), which must be refused or cut short at once,
 * never turned into a page count that wraps (and a loop that never ends).
 */
#include <limits.h>
#include <sys/mman.h>

#include "sem_common.h"

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
				   UP_EARLY_POLL, UP_WR | UP_EARLY_POLL, UP_WR | UP_NO_EARLY,
				   UP_RD | UP_EARLY_POLL | UP_NO_EARLY, -1 };
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
static void tw_cap_huge(struct up_config *c) { c->capacity = ((size_t)1 << 43) + 1; }
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
	/* page 0: the default, capacity / 64 rounded down to a power of
	 * two, from 4 KiB to 64 KiB (the fourth column). */
	static const struct { size_t ask, page, want_page, want; } cases[] = {
		{ 0, 0, 16 * KiB, 1 * MiB },
		{ 100000, 0, 4096, 102400 },
		{ 256 * KiB, 0, 4096, 256 * KiB },
		{ 512 * KiB - 1, 0, 4096, 512 * KiB },
		{ 512 * KiB, 0, 8 * KiB, 512 * KiB },
		{ 3 * MiB + 1, 0, 32 * KiB, 3 * MiB + 32 * KiB },
		{ 64 * MiB, 0, 64 * KiB, 64 * MiB },
		{ 1024 * MiB, 0, 64 * KiB, 1024 * MiB },
		{ 100000, 4096, 4096, 102400 },
		{ 100000, 8192, 8192, 106496 },
		{ 100000, 64 * KiB, 64 * KiB, 131072 },
		{ 1 * MiB, 4096, 4096, 1 * MiB },
		{ 65536, 4096, 4096, 65536 },
		{ 65537, 4096, 4096, 69632 },
		{ 3 * MiB + 1, 1 * MiB, 1 * MiB, 4 * MiB },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct up_pipe *p = mk_pipe(cases[i].ask, cases[i].page);
		size_t cap = up_capacity(p), pg = up_page_size(p);

		CHECK_EQ(pg, cases[i].want_page);
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

/* Lengths near the top of size_t, and the page counts they become. */
static const size_t huge_lens[] = {
	SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX - 4096, SIZE_MAX - 65535,
	(size_t)SSIZE_MAX + 1, (size_t)SSIZE_MAX, (size_t)SSIZE_MAX - 4095,
	(size_t)1 << 44,                /* 2^32 pages of 4 KiB: a u32 count of 0 */
	((size_t)1 << 44) + 1,          /* ... of 1 */
	((size_t)1 << 44) + 4096 * 3,   /* ... of 3 */
};
#define N_HUGE (sizeof(huge_lens) / sizeof(huge_lens[0]))

/* A reservation of @len on an empty pipe: refused (-EINVAL) or cut short to
 * what the pipe can hand out, at once, and the spans add up to it. */
static void reserve_huge_one(struct up_end *w, size_t len)
{
	struct iovec iov[64];
	int cnt = 64, i;
	ssize_t n = up_reserve(w, len, iov, &cnt);
	size_t sum = 0;

	if (n == -EINVAL)
		return;
	CHECK(n > 0);
	CHECK((size_t)n <= len);
	CHECK((size_t)n <= up_capacity(up_end_pipe(w)));
	CHECK(cnt >= 1 && cnt <= 64);
	for (i = 0; i < cnt; i++) {
		memset(iov[i].iov_base, 0x5a, iov[i].iov_len); /* the spans are ours */
		sum += iov[i].iov_len;
	}
	CHECK_EQ(sum, (size_t)n);
	CHECK_EQ(up_commit(w, len), len > (size_t)n ? -EINVAL : 0);
	CHECK_EQ(up_commit(w, 0), 0);
}

static void overflow_reserve_commit(void)
{
	size_t i;
	int b;

	harness_block_sigchld();
	for (b = 0; b < 2; b++) {
		pid_t pid;

		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			struct up_pipe *p = mk_pipe(64 * KiB, 0);
			struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK);
			struct up_end *w = mk_end(p, UP_WR | (b ? UP_NONBLOCK : 0));
			char buf[16];

			for (i = 0; i < N_HUGE; i++)
				reserve_huge_one(w, huge_lens[i]);
			/* commit without a reservation, and over a small one */
			for (i = 0; i < N_HUGE; i++) {
				struct iovec iov[4];
				int cnt = 4;

				CHECK_EQ(up_commit(w, huge_lens[i]), -EINVAL);
				CHECK_EQ(up_reserve(w, 100, iov, &cnt), 100);
				memset(iov[0].iov_base, 'a' + (int)i, 100);
				CHECK_EQ(up_commit(w, huge_lens[i]), -EINVAL);
				CHECK_EQ(up_commit(w, 0), 0);
			}
			/* none of it reached the stream; the pipe still works */
			CHECK_EQ(up_read(r, buf, sizeof(buf)), -EAGAIN);
			CHECK_EQ(up_write(w, "ok", 2), 2);
			CHECK_EQ(up_read(r, buf, sizeof(buf)), 2);
			CHECK(memcmp(buf, "ok", 2) == 0);
			CHECK_OK(up_close(r));
			CHECK_OK(up_close(w));
			up_pipe_release(p);
			_exit(0);
		}
		/* A page count that wraps spins for ever: the deadline fails it. */
		harness_reap_ok(pid, 10, b ? "reserve/commit, non-blocking" : "reserve/commit");
	}
}

/*
 * Writes and reads: a length over SSIZE_MAX is refused, iovec totals that
 * wrap are refused, and a total whose page count wraps a 32-bit counter
 * (2^44 bytes: the caller's buffer need not be that large, the pipe takes
 * only its capacity from the front) is a short write, not -EAGAIN or a spin.
 */
static void overflow_read_write(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 0);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR | UP_NONBLOCK);
	const size_t cap = up_capacity(p);
	unsigned char *src, *dst;
	struct iovec iov[4];
	size_t i;
	int cnt;

	src = mmap(NULL, 2 * cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dst = mmap(NULL, 2 * cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(src != MAP_FAILED && dst != MAP_FAILED);
	harness_fill(7, 0, src, 2 * cap);

	for (i = 0; i < N_HUGE; i++) {
		if (huge_lens[i] > (size_t)SSIZE_MAX)
			CHECK_EQ(up_write(w, src, huge_lens[i]), -EINVAL);
	}
	/* iovec totals that wrap, or pass SSIZE_MAX */
	{
		static const size_t pairs[][2] = {
			{ SIZE_MAX, 2 }, { 2, SIZE_MAX }, { SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1 },
			{ (size_t)SSIZE_MAX, 1 }, { (size_t)SSIZE_MAX - 4095, 8192 },
			{ SIZE_MAX - 4095, 4096 },
		};
		size_t k;

		for (k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
			iov[0].iov_base = src;
			iov[0].iov_len = pairs[k][0];
			iov[1].iov_base = src;
			iov[1].iov_len = pairs[k][1];
			CHECK_EQ(up_writev(w, iov, 2), -EINVAL);
			iov[0].iov_base = dst;
			iov[1].iov_base = dst;
			CHECK_EQ(up_readv(r, iov, 2), -EINVAL);
		}
	}
	CHECK_EQ(up_read(r, dst, 16), -EAGAIN); /* nothing was written */

	/* 2^44 and neighbours: the pipe takes its capacity, a short write */
	for (i = 0; i < N_HUGE; i++) {
		ssize_t n;
		size_t got = 0;

		if (huge_lens[i] > (size_t)SSIZE_MAX)
			continue;
		iov[0].iov_base = src;
		iov[0].iov_len = huge_lens[i];
		n = up_writev(w, iov, 1);
		CHECK(n > 0);
		CHECK((size_t)n <= cap);
		/* a read of SIZE_MAX - k takes what is there */
		while (got < (size_t)n) {
			ssize_t k = up_read(r, dst + got, SIZE_MAX - i);

			CHECK(k > 0);
			got += (size_t)k;
		}
		CHECK_EQ(got, (size_t)n);
		CHECK_EQ(harness_verify(7, 0, dst, got), (size_t)-1);
	}

	/* consume and peek: lengths past what is readable are refused and
	 * leave the stream alone */
	CHECK_EQ(up_write(w, src, 100), 100);
	for (i = 0; i < N_HUGE; i++) {
		struct iovec v[2];

		CHECK_EQ(up_consume(r, huge_lens[i]), -EINVAL);
		cnt = 2;
		CHECK_EQ(up_peek(r, v, &cnt), 100);
		CHECK_EQ(cnt, 1);
		CHECK_EQ(v[0].iov_len, 100);
	}
	cnt = INT_MAX; /* more spans than there are slots: the slots bound it */
	CHECK_EQ(up_peek(r, iov, &cnt), 100);
	CHECK_EQ(cnt, 1);
	cnt = INT_MIN;
	CHECK_EQ(up_peek(r, iov, &cnt), -EINVAL);
	cnt = 0;
	CHECK_EQ(up_reserve(w, 10, iov, &cnt), -EINVAL);
	cnt = INT_MIN;
	CHECK_EQ(up_reserve(w, 10, iov, &cnt), -EINVAL);
	CHECK_EQ(up_consume(r, 100), 0);
	CHECK_EQ(up_read(r, dst, 16), -EAGAIN);

	munmap(src, 2 * cap);
	munmap(dst, 2 * cap);
	CHECK_OK(up_close(r));
	CHECK_OK(up_close(w));
	up_pipe_release(p);
}

static void tw_cap_max_k(struct up_config *c) { c->capacity = SIZE_MAX - 4095; }
static void tw_cap_wrap(struct up_config *c) { c->capacity = SIZE_MAX - 4094; }
static void tw_page_max(struct up_config *c) { c->page_size = SIZE_MAX; }
static void tw_page_max_k(struct up_config *c) { c->page_size = SIZE_MAX - 4095; }
static void tw_page_u32(struct up_config *c) { c->page_size = ((size_t)1 << 32) | 4096; }
static void tw_page_2e32(struct up_config *c) { c->page_size = (size_t)1 << 32; }
static void tw_pool_min_max(struct up_config *c) { c->pool_min = SIZE_MAX; }
static void tw_pool_keep_max(struct up_config *c) { c->pool_keep = SIZE_MAX; }
static void tw_pool_keep_max_k(struct up_config *c) { c->pool_keep = SIZE_MAX - 4095; }

/* Sizes in up_config near SIZE_MAX: refused, or taken as "as much as allowed". */
static void overflow_config(void)
{
	CHECK_EQ(create_with(tw_cap_max), -EINVAL);
	CHECK_EQ(create_with(tw_cap_max_k), -EINVAL);
	CHECK_EQ(create_with(tw_cap_wrap), -EINVAL);
	CHECK_EQ(create_with(tw_page_max), -EINVAL);
	CHECK_EQ(create_with(tw_page_max_k), -EINVAL);
	CHECK_EQ(create_with(tw_page_u32), -EINVAL);
	CHECK_EQ(create_with(tw_page_2e32), -EINVAL);
	/* pool sizes are clamped: a pool of at most twice the capacity, and
	 * keep-everything */
	CHECK_EQ(create_with(tw_pool_min_max), 0);
	CHECK_EQ(create_with(tw_pool_keep_max), 0);
	CHECK_EQ(create_with(tw_pool_keep_max_k), 0);
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(ebadf_wrong_direction);
	RUN(einval_null_args);
	RUN(einval_open_flags);
	RUN(einval_config);
	RUN(capacity_rounding);
	RUN(overflow_reserve_commit);
	RUN(overflow_read_write);
	RUN(overflow_config);
	return 0;
}
