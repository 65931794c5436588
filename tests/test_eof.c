/* SPDX-License-Identifier: MIT */
/*
 * test_eof.c - end of stream and -EPIPE, as pipe(7) has them: a reader sees
 * everything written before the last writer closed, then 0 for ever (not
 * before: while one writer is left, empty is "would block"); once the last
 * reader has closed, every write, writev and reserve gets -EPIPE (never
 * SIGPIPE), also where the pipe is full and -EAGAIN would otherwise be due.
 */
#include "sem_common.h"

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

int main(int argc, char **argv)
{
	sem_init(argc, argv);

	RUN(eof_after_writer_close);
	RUN(eof_only_after_all_writers_close);
	RUN(epipe_after_readers_close);
	RUN(epipe_beats_eagain_when_full);
	return 0;
}
