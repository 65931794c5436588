/* SPDX-License-Identifier: MIT */
/*
 * test_rw.c - the pipe(7) contract of plain reads and writes: bytes arrive
 * in order, whole and once, whatever the write and read sizes, the page
 * size and the capacity; a read returns what is there (at least one byte,
 * at most what was asked) without waiting for more; zero-length calls are
 * no-ops; writev/readv gather and scatter; a blocking write larger than the
 * capacity returns its full count once the reader has taken it all.
 */
#include "sem_common.h"
#include "stream_harness.h"

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

/*
 * In order, whole and once: a writer thread sends the list of write sizes
 * below twice (odd sizes, page sizes and either side of them, sizes larger
 * than the pipe), blocking writes each returning its full count; this
 * thread reads with the list of read sizes, round and round, until end of
 * stream (tests/stream_harness.h checks every byte and the total).
 */
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

static size_t inorder_write_size(struct stream_side *s, size_t left)
{
	size_t n = wsizes[s->calls % (sizeof(wsizes) / sizeof(wsizes[0]))];

	return n < left ? n : left;
}

static size_t inorder_read_size(struct stream_side *s)
{
	return rsizes[s->calls % (sizeof(rsizes) / sizeof(rsizes[0]))];
}

static void inorder_case(size_t capacity, size_t page)
{
	struct stream_mode m = {
		.name = "inorder", .capacity = capacity, .page = page,
		.seed = 0x1234 + page, .bytes = inorder_total(),
		.writer_at = STREAM_THREAD, .reader_at = STREAM_HERE,
		.wbuf = 3 << 20, .rbuf = 1 << 20,
		.write_size = inorder_write_size, .read_size = inorder_read_size,
	};

	stream_run(&m);
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
 * Whole pages are copied with streaming stores (core/copy.c, copy_nt()), which
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

/* ---- sizes: writes larger than the capacity ---- */

/* One blocking write of 8 MiB into a pipe of 64 or 128 KiB returns all of
 * it, once a reader thread reading random sizes up to 1 MiB has taken it. */
static void big_write_case(size_t cap, size_t page)
{
	struct stream_mode m = {
		.name = "write_larger_than_capacity", .capacity = cap, .page = page,
		.seed = 61, .bytes = 8 * MiB,
		.writer_at = STREAM_THREAD, .reader_at = STREAM_HERE,
		.wbuf = 8 * MiB, .rbuf = 1 * MiB, .rrng = cap ^ page,
		.write_size = stream_write_rest, .read_size = stream_read_random,
	};

	stream_run(&m);
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

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(roundtrip_basic);
	RUN(inorder_many_sizes_4k_pages);
	RUN(inorder_many_sizes_64k_pages);
	RUN(inorder_small_pipe);
	RUN(read_returns_what_is_there);
	RUN(zero_length_io);
	RUN(writev_readv_gather_scatter);
	RUN(full_pages_from_odd_pieces);
	RUN(write_larger_than_capacity);
	RUN(write_smaller_than_capacity);
	return 0;
}
