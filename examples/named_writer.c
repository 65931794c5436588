/* SPDX-License-Identifier: MIT */
/*
 * named_writer.c - one half of two unrelated processes that meet by name
 * (the other is named_reader.c): they share no fd, no parent, nothing but
 * the name, as with a FIFO.
 *
 *   named_writer NAME [LINES]      e.g. named_writer /tmp/events 1000
 *                                   or named_writer @events 1000
 *
 * Makes a pipe, listens at NAME (a path, or "@name" in the abstract
 * namespace; mode 0600: only this user may connect), waits for one reader
 * to connect, writes LINES lines "line N\n" (default 1000) and closes its
 * end: the reader then sees end of stream. Exit 0 on success.
 *
 * Like a FIFO writer's open(2), this one waits for its reader: it listens
 * without a thread (UP_LISTEN_NOTHREAD) and serves the connect itself when
 * poll(2) says one is pending. A long-lived service would use up_listen()
 * instead and let its thread serve every reader that comes.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uringpipe.h>

static int fail(const char *what, int err)
{
	fprintf(stderr, "named_writer: %s: %s\n", what, up_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	struct up_pipe *p;
	struct up_end *w;
	struct up_listener *l;
	struct pollfd pf;
	long lines = argc > 2 ? strtol(argv[2], NULL, 10) : 1000, i;
	int r;

	if (argc < 2 || lines < 0) {
		fprintf(stderr, "usage: named_writer NAME [LINES]\n");
		return 2;
	}
	if ((r = up_pipe_create(NULL, &p)) < 0)
		return fail("up_pipe_create", r);
	/* The ends may open in any order, as a FIFO's: a reader that opens
	 * before our writer waits for it, and what we write before the
	 * reader's up_open is kept for it (up to the capacity, then up_write
	 * waits), never -EPIPE. */
	if ((r = up_open(p, UP_WR, &w)) < 0)
		return fail("up_open", r);
	if ((r = up_listen2(p, argv[1], 0600, UP_LISTEN_NOTHREAD, &l)) < 0)
		return fail(argv[1], r);
	up_pipe_release(p); /* the ends and the listener keep what they need */

	/* Wait for a reader (60 s at most), and hand it the pipe. */
	pf.fd = up_listener_fd(l);
	pf.events = POLLIN;
	do {
		r = poll(&pf, 1, 60000);
		if (r <= 0)
			return fail("waiting for a reader", r == 0 ? -ETIMEDOUT : -EINTR);
	} while ((r = up_listener_serve(l)) == 0); /* 0: that one was dropped */
	if (r < 0)
		return fail("up_listener_serve", r);
	up_listener_close(l); /* one reader only: the name goes away */

	for (i = 1; i <= lines; i++) {
		char line[32];
		int n = snprintf(line, sizeof(line), "line %ld\n", i);
		ssize_t k = up_write(w, line, (size_t)n); /* < UP_PIPE_BUF: atomic */

		if (k < 0)
			return fail("up_write", (int)k);
	}
	up_close(w); /* end of stream, once the reader has read what is left */
	return 0;
}
