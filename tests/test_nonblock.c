/* SPDX-License-Identifier: MIT */
/*
 * test_nonblock.c - UP_NONBLOCK ends: an empty pipe reads -EAGAIN (until end
 * of stream, which wins), a full one writes -EAGAIN and never 0; a write of
 * at most PIPE_BUF bytes goes in whole or not at all, a larger one goes in
 * partly, as many bytes as fit; a small write that fits the room left in
 * the last page is accepted.
 */
#include "sem_common.h"

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

/* A small write appends in place when the last published page has room
 * (instead of taking a page of its own), so a non-blocking write that fits
 * that room is accepted although no whole page is free. */
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

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(nonblock_read_empty_eagain);
	RUN(nonblock_write_full_eagain);
	RUN(nonblock_small_write_all_or_nothing);
	RUN(nonblock_small_write_uses_room_in_last_page);
	RUN(nonblock_large_write_partial);
	return 0;
}
