/* SPDX-License-Identifier: MIT */
/*
 * test_liveness.c - liveness that rests on the kernel, not on what the
 * segment says (issue 17).
 *
 *   exec_child_releases     a forked child that execs drops the ends it
 *                           inherited (its descriptor of the memfd is
 *                           close-on-exec, and with it its liveness locks):
 *                           the parent's reader sees end of stream while
 *                           the exec'd program still runs;
 *   readers_count_bumped    a store raises the readers' count after the
 *                           last reader closed: the writer still gets -EPIPE;
 *   writers_count_bumped    the same for the writers' count and end of stream;
 *   readers_count_zeroed    a store says no reader ever came, after one came
 *                           and left: -EPIPE all the same;
 *   writers_count_zeroed    the same for writers and end of stream;
 *   phantom_entries         stores make every free entry of the endpoint
 *                           table look like a writer: they are reaped when
 *                           an end needs an entry, and the pipe carries on.
 * Each call must return within BOUND_NS of the store. A store here is made by
 * this process into the shared mapping: a hostile peer's store is the same
 * bytes, and that peer's having exited adds nothing (the counts hold no
 * lock of anyone's).
 */
#include <inttypes.h>
#include <sys/mman.h>

#include "harness.h"
#include "up_int.h"

#define BOUND_NS 1000000000ull /* 1 s: returned, not blocked; latency printed */

static struct up_pipe *mk_pipe(void)
{
	struct up_config cfg;
	struct up_pipe *p = NULL;

	up_config_init(&cfg);
	cfg.capacity = 64 * 1024;
	CHECK_OK(up_pipe_create(&cfg, &p));
	return p;
}

/* Write until the call fails; returns its error and the time it took. */
static ssize_t write_until_error(struct up_end *w, uint64_t *ns)
{
	static char buf[4096];
	uint64_t t0 = harness_now_ns();
	ssize_t r;

	do {
		r = up_write(w, buf, sizeof(buf));
		CHECK(harness_now_ns() - t0 < BOUND_NS);
	} while (r > 0 || r == -EAGAIN);
	*ns = harness_now_ns() - t0;
	return r;
}

static ssize_t read_until_eof(struct up_end *r, uint64_t *ns)
{
	static char buf[65536];
	uint64_t t0 = harness_now_ns();
	ssize_t n;

	do {
		n = up_read(r, buf, sizeof(buf));
		CHECK(harness_now_ns() - t0 < BOUND_NS);
	} while (n > 0 || n == -EAGAIN);
	*ns = harness_now_ns() - t0;
	return n;
}

static void exec_child_releases(void)
{
	struct up_pipe *p = mk_pipe();
	struct up_end *r = NULL, *w = NULL;
	uint64_t ns;
	int go[2], st;
	pid_t pid;

	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_SYS(pipe2(go, O_CLOEXEC));
	pid = fork();
	CHECK_SYS(pid);
	if (pid == 0) {
		/* Inherits r and w, keeps them (no close), and execs a program
		 * that knows nothing of them and lives until told to go. */
		char fdarg[16];

		snprintf(fdarg, sizeof(fdarg), "%d", go[0]);
		CHECK_SYS(dup2(go[0], 3));
		execl("/bin/sh", "sh", "-c", "read x <&3", (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	CHECK_OK(up_close(w));
	CHECK_EQ(read_until_eof(r, &ns), 0);
	printf("# end of stream %.2f ms after the last writer here closed, the exec'd "
	       "child still running\n", (double)ns / 1e6);
	CHECK_EQ(waitpid(pid, &st, WNOHANG), 0); /* it is still there */
	close(go[1]);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void count_bumped(bool readers)
{
	struct up_pipe *p = mk_pipe();
	struct up_end *r = NULL, *w = NULL, *keep = NULL;
	_Atomic uint32_t *count = readers ? &p->ln->state.readers : &p->ln->state.writers;
	uint64_t ns;

	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w));
	atomic_fetch_add(count, 5); /* the hostile store */
	if (readers) {
		CHECK_OK(up_close(r));
		CHECK_EQ(write_until_error(w, &ns), -EPIPE);
		keep = w;
	} else {
		CHECK_OK(up_close(w));
		CHECK_EQ(read_until_eof(r, &ns), 0);
		keep = r;
	}
	printf("# %s count +5: %s after %.2f ms\n", readers ? "readers'" : "writers'",
	       readers ? "-EPIPE" : "end of stream", (double)ns / 1e6);
	CHECK_OK(up_close(keep));
	up_pipe_release(p);
}

static void readers_count_bumped(void)
{
	count_bumped(true);
}

static void writers_count_bumped(void)
{
	count_bumped(false);
}

static void count_zeroed(bool readers)
{
	struct up_pipe *p = mk_pipe();
	struct up_end *r = NULL, *w = NULL;
	_Atomic uint32_t *count = readers ? &p->ln->state.readers : &p->ln->state.writers;
	uint64_t ns;

	/* The surviving end opens second, so it has seen the other side come. */
	if (readers) {
		CHECK_OK(up_open(p, UP_RD, &r));
		CHECK_OK(up_open(p, UP_WR, &w));
		CHECK_OK(up_close(r));
		atomic_store(count, 0); /* "no reader ever came" */
		CHECK_EQ(write_until_error(w, &ns), -EPIPE);
		CHECK_OK(up_close(w));
	} else {
		CHECK_OK(up_open(p, UP_WR, &w));
		CHECK_OK(up_open(p, UP_RD, &r));
		CHECK_OK(up_close(w));
		atomic_store(count, 0);
		CHECK_EQ(read_until_eof(r, &ns), 0);
		CHECK_OK(up_close(r));
	}
	printf("# %s count zeroed after the side left: %s after %.2f ms\n",
	       readers ? "readers'" : "writers'", readers ? "-EPIPE" : "end of stream",
	       (double)ns / 1e6);
	up_pipe_release(p);
}

static void readers_count_zeroed(void)
{
	count_zeroed(true);
}

static void writers_count_zeroed(void)
{
	count_zeroed(false);
}

static void phantom_entries(void)
{
	struct up_pipe *p = mk_pipe();
	struct up_end *r = NULL, *w = NULL, *w2 = NULL;
	char buf[100];
	uint32_t i, n = 0;

	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	/* Every free entry made to look like a writer of another process
	 * (pid 1, as in a container), as a peer that then exits may leave it. */
	for (i = 0; i < p->g.max_ends; i++) {
		if (atomic_load(&p->ends[i].state) != 0)
			continue;
		atomic_store(&p->ends[i].pid, 1);
		atomic_store(&p->ends[i].state, (7u << 8) | UP_END_WRITER);
		n++;
	}
	CHECK(n > 0);
	/* A new end still opens (the phantoms hold no lock: reaped), and the
	 * pipe carries on. */
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_EQ(up_write(w2, "x", 1), 1);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 1);
	CHECK_OK(up_close(w2));
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_fail_on_sigpipe();
	harness_watchdog(60);
	RUN(exec_child_releases);
	RUN(readers_count_bumped);
	RUN(writers_count_bumped);
	RUN(readers_count_zeroed);
	RUN(writers_count_zeroed);
	RUN(phantom_entries);
	return 0;
}
