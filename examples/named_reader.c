/* SPDX-License-Identifier: MIT */
/*
 * named_reader.c - the other half of named_writer.c: connects to a pipe by
 * its name and reads it to end of stream.
 *
 *   named_reader NAME [TIMEOUT_MS [LINES]]
 *
 * Waits up to TIMEOUT_MS (default 10000; -1 forever) for a listener to
 * appear at NAME, so the two programs may be started in either order. It
 * checks that the lines are "line 1" to "line N" in order, and, given
 * LINES, that there were that many; prints the count. Exit 0 on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uringpipe.h>

int main(int argc, char **argv)
{
	static char buf[1 << 16];
	struct up_pipe *p;
	struct up_end *r;
	int timeout_ms = argc > 2 ? atoi(argv[2]) : 10000, e;
	long want = argc > 3 ? strtol(argv[3], NULL, 10) : -1, lines = 0, value = 0;
	ssize_t n;

	if (argc < 2) {
		fprintf(stderr, "usage: named_reader NAME [TIMEOUT_MS [LINES]]\n");
		return 2;
	}
	if ((e = up_connect(argv[1], timeout_ms, &p)) < 0) {
		fprintf(stderr, "named_reader: %s: %s\n", argv[1], up_strerror(e));
		return 1;
	}
	if ((e = up_open(p, UP_RD, &r)) < 0) {
		fprintf(stderr, "named_reader: up_open: %s\n", up_strerror(e));
		return 1;
	}
	up_pipe_release(p);
	/* Parse "line N\n" across read boundaries: digits accumulate in
	 * value until the newline. */
	while ((n = up_read(r, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			char c = buf[i];

			if (c >= '0' && c <= '9') {
				value = value * 10 + (c - '0');
			} else if (c == '\n') {
				if (value != ++lines) {
					fprintf(stderr, "named_reader: line %ld reads %ld\n",
						lines, value);
					return 1;
				}
				value = 0;
			}
		}
	}
	up_close(r);
	if (n < 0) {
		fprintf(stderr, "named_reader: up_read: %s\n", up_strerror((int)n));
		return 1;
	}
	if (want >= 0 && lines != want) {
		fprintf(stderr, "named_reader: %ld lines, wanted %ld\n", lines, want);
		return 1;
	}
	printf("named_reader: %ld lines from %s\n", lines, argv[1]);
	return 0;
}
