/* SPDX-License-Identifier: MIT */
/*
 * test_count_windows.c - a process killed between the steps of opening or
 * closing an end: its peers must never lose a live end's share of the
 * reader or writer count (an early end of stream, an early -EPIPE), and a
 * share left behind must go once the side has no entry left.
 *
 * Opening claims an entry, then counts the end (the count, then the entry's
 * mark); closing clears the mark, takes the count, then frees the entry
 * (core/peer.c, up__end_count()). A child process goes through those steps
 * with the library's own functions and exits after one of them, as a
 * SIGKILL there would leave it. The parent holds its own reader and writer
 * open throughout; its calls run with a timeout, during which its sleep
 * reaps the dead child's entry:
 *
 *   claimed   after the claim, before the count: a reaper that takes a
 *             share out then takes the parent's;
 *   uncounted after the count is taken, before the free: the same, twice;
 *   counted   after the count, before the mark: the share stays until the
 *             side has no entry, then goes (the parent's own close must
 *             still give end of stream or -EPIPE, within the bound).
 *
 * Each on the writers' side (the parent's reader must time out, never read
 * end of stream) and the readers' (the parent's writer, with the pipe full,
 * must time out, never get -EPIPE).
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ring.h"

#define WAIT_MS  300
#define BOUND_MS 3000u

enum step { CLAIMED, UNCOUNTED, COUNTED };
static const char *const step_name[] = { "claimed", "uncounted", "counted" };

/* In the child: take an entry of @role in @p and stop after @step. */
static void child_steps(struct up_pipe *inherited, uint32_t role, enum step step)
{
	struct up_pipe *q = harness_attach(inherited);
	_Atomic uint32_t *count = role == UP_END_READER ? &q->ln->state.readers
							: &q->ln->state.writers;
	uint32_t idx, st;

	CHECK_OK(up__end_claim(q, role, getpid(), UP_LIVE_OWNER, up__live_pidns(), &idx, &st));
	if (step == CLAIMED)
		_exit(0);
	if (step == COUNTED) {
		up__side_join(count); /* the mark is never stored */
		_exit(0);
	}
	up__end_count(q, idx, st, count);
	up__end_uncount(q, idx, st, count);
	_exit(0); /* the entry is never freed */
}

static void one(uint32_t role, enum step step)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	struct up_stats s;
	static char big[64 * 1024];
	char buf[16];
	pid_t pid;
	int st;
	ssize_t n;
	const char *side = role == UP_END_READER ? "readers" : "writers";

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	up_set_timeout(r, WAIT_MS);
	up_set_timeout(w, WAIT_MS);
	pid = harness_fork(30);
	if (pid == 0) {
		harness_close_inherited((struct up_end *[]){ r, w }, 2);
		child_steps(p, role, step);
	}
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	if (role == UP_END_WRITER) {
		/* Our writer is open: a read times out, after reaping. */
		n = up_read(r, buf, sizeof(buf));
		CHECK_OK(up_stats(p, &s));
		printf("#   %s, %s: read -> %zd, writers %u\n", side, step_name[step], n, s.writers);
		CHECK_EQ(n, -ETIMEDOUT);
		CHECK(s.writers >= 1);
		/* Our writer closes: end of stream within the bound, the left
		 * share (COUNTED) put right by then. */
		up_set_timeout(r, BOUND_MS);
		CHECK_OK(up_close(w));
		CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
		CHECK_OK(up_close(r));
	} else {
		/* Our reader is open: a writer filling the pipe times out. */
		do
			n = up_write(w, big, sizeof(big));
		while (n > 0);
		CHECK_OK(up_stats(p, &s));
		printf("#   %s, %s: write -> %zd, readers %u\n", side, step_name[step], n, s.readers);
		CHECK_EQ(n, -ETIMEDOUT);
		CHECK(s.readers >= 1);
		up_set_timeout(w, BOUND_MS);
		CHECK_OK(up_close(r));
		CHECK_EQ(up_write(w, big, sizeof(big)), -EPIPE);
		CHECK_OK(up_close(w));
	}
	up_pipe_release(p);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	for (uint32_t role = UP_END_READER; role <= UP_END_WRITER; role++) {
		for (int step = CLAIMED; step <= COUNTED; step++) {
			one(role, (enum step)step);
			printf("ok %s %s\n", role == UP_END_READER ? "readers" : "writers",
			       step_name[step]);
		}
	}
	return 0;
}
