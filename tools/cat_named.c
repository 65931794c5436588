/* SPDX-License-Identifier: MIT */
/*
 * cat_named.c - `uringpipe-cat --to NAME` and `--from NAME`: the two halves
 * of the pump in two processes that meet by name (up_listen/up_connect), as
 * `cat FILE > FIFO` and `cat FIFO` meet at a FIFO.
 *
 * --to makes the pipe, opens its writer end, listens at NAME and runs the
 * pump's reader thread (inputs -> pipe). --from connects, opens a reader end
 * and runs the writer thread (pipe -> stdout). The library's lifecycle is
 * pipe(2)'s: a reader that opens before any writer waits for one, and a
 * writer that writes before any reader keeps its data (up to the capacity),
 * so either side may start first.
 *
 * How long --to stays (cat_to_linger). The data sits in the pipe, which
 * lives as long as some process maps it, and the name is how readers get
 * there; a FIFO writer's data likewise waits for readers that open the FIFO
 * later. So --to keeps the name until
 *   1. every input is written, and
 *   2. a reader has had the pipe open: until then the writer end stays
 *      open, so that a reader which connects, reads everything and would
 *      leave at once cannot leave before it was seen (with the writer open
 *      it waits for more instead); this is a FIFO writer's open(2) waiting
 *      for a reader. Then the writer end closes: the readers' end of stream
 *      once they have drained the pipe. And
 *   3. no reader has the pipe open any more: they read to end of stream,
 *      so every byte went to one of them, or the rest went away with the
 *      last of them, as a FIFO's buffer does.
 * Readers that come meanwhile share the stream; one that comes after the
 * name is gone waits for the next --to (as a FIFO reader's open waits for
 * the next writer). up_stats() gives the readers of every process; bytes
 * read by other processes it does not know, which is why "drained" is
 * decided by the readers themselves (they leave at end of stream).
 * The counts are polled, backing off from 0.2 ms to 20 ms: the library has
 * no event for "a reader opened", and nothing here is on the data path.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

#include "cat.h"

#define POLL_MIN_S 0.0002
#define POLL_MAX_S 0.020

/* ------------------------------------------------------------------ --to */

/* The path to remove if a signal ends us while we listen at one; NULL for
 * an abstract name (it vanishes with the socket) or once closed. */
static const char *volatile listen_path;
static const int fatal_sig[] = {SIGINT, SIGTERM, SIGHUP};

static void on_fatal_signal(int sig)
{
	const char *p = listen_path;

	/* unlink(2) is async-signal-safe; the socket file is ours (the
	 * listener bound it and renamed it onto the name). SA_RESETHAND put
	 * the default back: the signal, blocked in here, then ends us. */
	if (p)
		unlink(p);
	raise(sig);
}

static void fatal_signals(bool on)
{
	for (size_t i = 0; i < sizeof(fatal_sig) / sizeof(fatal_sig[0]); i++) {
		struct sigaction sa, old;

		if (sigaction(fatal_sig[i], NULL, &old) < 0)
			continue;
		/* An ignored signal (nohup) stays ignored; one another handler
		 * took is not ours to change. */
		if (on ? old.sa_handler != SIG_DFL : old.sa_handler != on_fatal_signal)
			continue;
		memset(&sa, 0, sizeof(sa));
		sigemptyset(&sa.sa_mask);
		sa.sa_handler = on ? on_fatal_signal : SIG_DFL;
		sa.sa_flags = on ? SA_RESETHAND : 0;
		sigaction(fatal_sig[i], &sa, NULL);
	}
}

/*
 * The first time a process takes the writers' lock of a pipe it has the
 * only writer end of, the library registers it for membarrier(2), which
 * can take 10 ms and more. A small reservation takes the lock: dropping
 * one (commit 0) pays that before anyone connects, not as the latency of
 * a reader waiting for its first byte. Nothing is published.
 */
static void warm_writer(struct up_end *w)
{
	struct iovec iov[1];
	int cnt = 1;

	if (up_reserve(w, 1, iov, &cnt) > 0)
		up_commit(w, 0);
}

int cat_to_listen(const struct cat_opts *o, struct cat_pump *pm, struct up_pipe *p,
		  struct up_listener **l)
{
	int r;

	warm_writer(pm->wr);
	r = up_listen(p, o->to, o->mode, l);

	if (r < 0) {
		const char *why = up_strerror(r);

		if (r == -EADDRINUSE)
			why = "a listener is already serving this name";
		else if (r == -EEXIST)
			why = "a file that is not a socket is in the way";
		fprintf(stderr, CAT_PROG ": --to %s: cannot listen: %s\n", o->to, why);
		return r == -EINVAL || r == -ENAMETOOLONG ? CAT_EXIT_USAGE : CAT_EXIT_PIPE;
	}
	if (o->to[0] != '@') {
		listen_path = o->to;
		fatal_signals(true);
	}
	return CAT_EXIT_OK;
}

void cat_to_close(struct up_listener *l)
{
	if (!l)
		return;
	up_listener_close(l); /* removes the path */
	if (listen_path) {
		listen_path = NULL;
		fatal_signals(false);
	}
}

static void nap(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)(fmod(s, 1.0) * 1e9)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Readers of @p in every process, or -1 if up_stats fails. */
static long readers_now(const struct up_pipe *p)
{
	struct up_stats st;

	return up_stats(p, &st) == 0 ? (long)st.readers : -1;
}

void cat_to_linger(struct cat_pump *pm, struct up_pipe *p, struct cat_named_info *ni)
{
	bool go_on = !pm->peer_gone && !pm->pipe_err;
	double d = POLL_MIN_S;

	/* 2. Hold the writer end until a reader has the pipe open. */
	while (go_on && readers_now(p) == 0) {
		nap(d);
		d = d * 2 < POLL_MAX_S ? d * 2 : POLL_MAX_S;
	}
	ni->reader_came = go_on;
	up_close(pm->wr); /* end of stream, once drained */
	pm->wr = NULL;
	/* 3. Serve the name until no reader is left. */
	d = POLL_MIN_S;
	while (go_on && readers_now(p) > 0) {
		nap(d);
		d = d * 2 < POLL_MAX_S ? d * 2 : POLL_MAX_S;
	}
	ni->last_reader = cat_mono();
}

/* ---------------------------------------------------------------- --from */

int cat_from_connect(const struct cat_opts *o, struct cat_pump *pm, struct up_pipe **p)
{
	double deadline = cat_mono() + (double)o->wait_ms / 1000.0;
	int r;

	for (;;) {
		int left = o->wait_ms;

		if (o->wait_ms > 0) {
			double s = deadline - cat_mono();
			left = s > 0 ? (int)ceil(s * 1000.0) : 0;
		}
		r = up_connect(o->from, left, p);
		/* The listener closed with us in its queue: that --to is
		 * done. Wait for the next one, as a FIFO reader's open waits
		 * for the next writer, within what is left of --wait. */
		if (r != -ECONNRESET || o->wait_ms == 0 || (o->wait_ms > 0 && left == 0))
			break;
		nap(0.001);
	}
	if (r < 0) {
		const char *f = CAT_PROG ": --from %s: %s\n";
		char why[96];

		if (r == -ETIMEDOUT)
			snprintf(why, sizeof(why), "nobody listening after %.3g s (--wait)",
				 (double)o->wait_ms / 1000.0);
		else if (r == -ENOENT || r == -EAGAIN)
			snprintf(why, sizeof(why), "nobody listening (--wait 0: a single try)");
		else if (r == -EACCES)
			snprintf(why, sizeof(why), "permission denied (the --to side's --mode)");
		else if (r == -EPROTO)
			snprintf(why, sizeof(why), "what listens there is not a uringpipe of this"
				 " version");
		else
			snprintf(why, sizeof(why), "cannot connect: %s", up_strerror(r));
		fprintf(stderr, f, o->from, why);
		return r == -EINVAL || r == -ENAMETOOLONG ? CAT_EXIT_USAGE : CAT_EXIT_PIPE;
	}
	r = up_open(*p, UP_RD, &pm->rd);
	if (r < 0) {
		fprintf(stderr, CAT_PROG ": --from %s: cannot open a reader end: %s\n", o->from,
			up_strerror(r));
		up_pipe_release(*p);
		*p = NULL;
		return CAT_EXIT_PIPE;
	}
	return CAT_EXIT_OK;
}
