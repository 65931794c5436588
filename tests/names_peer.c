/* SPDX-License-Identifier: MIT */
/*
 * names_peer.c - the other process of test_names: an unrelated program that
 * shares nothing with the test but a name (and the report pipe).
 *
 *   names_peer NAME rd|wr|conn BYTES SEED REPORT_FD TIMEOUT_MS
 *
 * Connects to NAME with up_connect(NAME, TIMEOUT_MS); then, whether or not
 * the test's end is open yet (the ends open in any order, as a FIFO's),
 *   rd:   opens a reader and reads BYTES of the harness pattern SEED, then
 *         expects end of stream;
 *   wr:   opens a writer, writes BYTES of the pattern, closes;
 *   conn: stops there (exit 0 if it connected).
 * It reports on REPORT_FD (tests/names_peer.h) and exits 0 on success, 2
 * when up_connect() failed, 1 on any other failure.
 */
#include "harness.h"
#include "names_peer.h"

static void report(int fd, char tag, int res)
{
	struct names_peer_rec rec;

	memset(&rec, 0, sizeof(rec));
	rec.tag = tag;
	rec.res = res;
	rec.t_ns = harness_now_ns();
	CHECK_EQ(write(fd, &rec, sizeof(rec)), (ssize_t)sizeof(rec));
}

int main(int argc, char **argv)
{
	static unsigned char buf[1 << 16];
	struct up_pipe *p = NULL;
	struct up_end *e = NULL;
	uint64_t bytes, seed, off = 0;
	int fd, timeout_ms, r;

	if (argc != 7) {
		fprintf(stderr, "usage: names_peer NAME rd|wr|conn BYTES SEED REPORT_FD TIMEOUT_MS\n");
		return 1;
	}
	bytes = strtoull(argv[3], NULL, 0);
	seed = strtoull(argv[4], NULL, 0);
	fd = atoi(argv[5]);
	timeout_ms = atoi(argv[6]);
	harness_fail_on_sigpipe();

	report(fd, 'S', 0);
	r = up_connect(argv[1], timeout_ms, &p);
	report(fd, 'C', r);
	if (r < 0)
		return 2;
	if (strcmp(argv[2], "conn") == 0) {
		up_pipe_release(p);
		return 0;
	}
	if (strcmp(argv[2], "rd") == 0) {
		CHECK_OK(up_open(p, UP_RD, &e));
		report(fd, 'O', 0);
		for (;;) {
			ssize_t n = up_read(e, buf, sizeof(buf));

			CHECK_OK(n);
			if (n == 0)
				break;
			CHECK(off + (uint64_t)n <= bytes);
			CHECK_EQ(harness_verify(seed, off, buf, (size_t)n), (size_t)-1);
			off += (uint64_t)n;
		}
		CHECK_EQ(off, bytes);
	} else {
		CHECK(strcmp(argv[2], "wr") == 0);
		CHECK_OK(up_open(p, UP_WR, &e));
		report(fd, 'O', 0);
		while (off < bytes) {
			size_t n = bytes - off < sizeof(buf) ? (size_t)(bytes - off) : sizeof(buf);
			ssize_t w;

			harness_fill(seed, off, buf, n);
			w = up_write(e, buf, n);
			CHECK_OK(w);
			off += (uint64_t)w;
		}
	}
	CHECK_OK(up_close(e));
	up_pipe_release(p);
	return 0;
}
