/* SPDX-License-Identifier: MIT */
/*
 * alloc_cost.c - what the library's private allocator costs a consumer:
 * the calls that allocate (up_pipe2 + two up_close, which take and give
 * back the pipe and endpoint handles; up_buf_alloc + touch + up_buf_free)
 * timed in a loop. Built against the installed package, once per library
 * flavour, so that the flavours are compared as a user links them
 * (docs/DESIGN-NOTES.md, "Packaging"). The data path allocates nothing and
 * is not measured here.
 *
 *   alloc_cost [ROUNDS]    one line per call pattern: ns per iteration,
 *                          the best of ROUNDS rounds (default 5)
 * Exit 0, or 1 when a call fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uringpipe.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pipe_cycle(int iters)
{
	struct up_end *e[2];
	int i, r;

	for (i = 0; i < iters; i++) {
		r = up_pipe2(e, NULL);
		if (r < 0) {
			fprintf(stderr, "up_pipe2: %s\n", up_strerror(r));
			return 1;
		}
		up_close(e[0]);
		up_close(e[1]);
	}
	return 0;
}

static int buf_cycle(int iters, size_t size)
{
	void *b;
	int i, r;

	for (i = 0; i < iters; i++) {
		r = up_buf_alloc(size, -1, &b);
		if (r < 0) {
			fprintf(stderr, "up_buf_alloc: %s\n", up_strerror(r));
			return 1;
		}
		memset(b, i, 64); /* the first page is touched, as a user would */
		up_buf_free(b, size);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 4096, 65536, 1 << 20 };
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	double best, t;
	size_t s;
	int k;

	if (rounds < 1)
		rounds = 1;
	best = 1e30;
	for (k = 0; k < rounds; k++) {
		t = now_ns();
		if (pipe_cycle(2000))
			return 1;
		t = (now_ns() - t) / 2000;
		best = t < best ? t : best;
	}
	printf("pipe2+close        %10.0f ns\n", best);
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		best = 1e30;
		for (k = 0; k < rounds; k++) {
			t = now_ns();
			if (buf_cycle(20000, sizes[s]))
				return 1;
			t = (now_ns() - t) / 20000;
			best = t < best ? t : best;
		}
		printf("buf %7zu B       %10.0f ns\n", sizes[s], best);
	}
	return 0;
}
