/* SPDX-License-Identifier: MIT */
/*
 * test_args.c - what the API refuses: an end used in the wrong direction
 * (-EBADF), NULL arguments, bad open flags and bad configurations (-EINVAL),
 * each refusal leaving the pipe and its stream undisturbed; and how a
 * requested capacity is rounded to whole pages.
 */
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

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(ebadf_wrong_direction);
	RUN(einval_null_args);
	RUN(einval_open_flags);
	RUN(einval_config);
	RUN(capacity_rounding);
	return 0;
}
