/* SPDX-License-Identifier: MIT */
/*
 * test_fork.c - ends inherited across fork(2) work in the child as pipe(2)
 * ends do: both processes hold them from the moment of the fork (the
 * parent's close right after fork() does not end the stream before the
 * child's end counts), closing one in one process leaves the other's, and
 * the child may sleep and wake on them (on the io_uring backend it used to
 * crash in the parent's ring). Run on both backends (test_fork_futex).
 */
#include <sys/wait.h>

#include "sem_common.h"

/* A kernel pipe(2) for ordering the two processes, not for data. */
static void sync_pipe(int fds[2])
{
	CHECK_SYS(pipe2(fds, O_CLOEXEC));
}

static void sync_post(int fd)
{
	char c = 1;

	CHECK_EQ(write(fd, &c, 1), 1);
}

static void sync_wait(int fd)
{
	char c;

	CHECK_EQ(read(fd, &c, 1), 1);
}

/* The parent closes its copy of the writer before the child writes: the
 * reader still gets the child's bytes, and end of stream only after the
 * child closes. */
static void child_writes_after_parent_closes(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	int go[2];
	pid_t pid;
	bool eof;

	sync_pipe(go);
	pid = harness_fork(30);
	if (pid == 0) {
		close(go[1]);
		sync_wait(go[0]);
		write_pat(w, 71, 0, 200 * KiB); /* blocks: the pipe holds 64 KiB */
		CHECK_OK(up_close(w));
		CHECK_OK(up_close(r));
		_exit(0);
	}
	close(go[0]);
	CHECK_OK(up_close(w));
	sync_post(go[1]);
	close(go[1]);
	read_pat(r, 71, 0, 200 * KiB);
	CHECK_EQ(drain_pat(r, 71, 200 * KiB, &eof), 0);
	CHECK(eof);
	harness_reap_ok(pid, 30, "writer child");
	up_close(r);
	up_pipe_release(p);
}

/* The parent closes its copy of the reader right after the fork and keeps
 * writing: no -EPIPE while the child reads, which it does in blocking reads
 * that sleep. */
static void child_reads_after_parent_closes(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	pid_t pid;

	pid = harness_fork(30);
	if (pid == 0) {
		bool eof;

		CHECK_OK(up_close(w));
		read_pat(r, 72, 0, 300 * KiB);
		CHECK_EQ(drain_pat(r, 72, 300 * KiB, &eof), 0);
		CHECK(eof);
		CHECK_OK(up_close(r));
		_exit(0);
	}
	CHECK_OK(up_close(r));
	write_pat(w, 72, 0, 300 * KiB);
	CHECK_OK(up_close(w));
	harness_reap_ok(pid, 30, "reader child");
	up_pipe_release(p);
}

/* The child closes both of its copies and exits; the parent's ends are
 * untouched: its writes still have a reader, and its reader no end of
 * stream until its own writer closes. */
static void child_close_leaves_parent_ends(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD | UP_NONBLOCK), *w = mk_end(p, UP_WR);
	struct up_stats st;
	pid_t pid;
	char c;
	bool eof;

	pid = harness_fork(30);
	if (pid == 0) {
		CHECK_OK(up_close(r));
		CHECK_OK(up_close(w));
		_exit(0);
	}
	harness_reap_ok(pid, 30, "closing child");
	CHECK_OK(up_stats(p, &st));
	CHECK_EQ(st.readers, 1);
	CHECK_EQ(st.writers, 1);
	CHECK_EQ(up_read(r, &c, 1), -EAGAIN);
	write_pat(w, 73, 0, 10000);
	CHECK_EQ(drain_pat(r, 73, 0, &eof), 10000);
	CHECK(!eof);
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, &c, 1), 0);
	up_close(r);
	up_pipe_release(p);
}

/* A child killed at once (before it uses its copies) counts as closed: the
 * parent's reader sees end of stream once the parent's writer closes. */
static void child_killed_counts_as_closed(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	int status;
	pid_t pid;
	char c;

	pid = harness_fork(30);
	if (pid == 0) {
		for (;;)
			pause();
	}
	CHECK_SYS(kill(pid, SIGKILL));
	CHECK_OK(harness_wait_child(pid, 30, &status));
	CHECK(WIFSIGNALED(status));
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, &c, 1), 0); /* blocks until the child is reaped */
	up_close(r);
	up_pipe_release(p);
}

/* Records written by the parent and the child at once through their copies
 * of one writer: every record arrives whole (each is one write of at most
 * 4096 bytes) and none is lost, so the child did not reuse pages the
 * parent's end had taken. */
#define REC 1000
static void write_recs(struct up_end *w, char tag, int n)
{
	char rec[REC];

	memset(rec, tag, sizeof(rec));
	for (int i = 0; i < n; i++)
		CHECK_EQ(up_write(w, rec, sizeof(rec)), (ssize_t)sizeof(rec));
}

static void *parent_writer(void *arg)
{
	struct up_end *w = arg;

	write_recs(w, 'P', 2000);
	CHECK_OK(up_close(w));
	return NULL;
}

static void parent_and_child_write_at_once(void)
{
	/* 1 MiB: writers take pages in batches of 16, so the parent's end
	 * holds pages in its cache at the fork. */
	struct up_pipe *p = mk_pipe(1 * MiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	static char buf[REC];
	int counts[2] = { 0, 0 };
	size_t have = 0;
	pid_t pid;

	write_recs(w, 'P', 3); /* the parent's end has pages and the bias now */
	pid = harness_fork(30);
	if (pid == 0) {
		CHECK_OK(up_close(r));
		write_recs(w, 'C', 2000);
		CHECK_OK(up_close(w));
		_exit(0);
	}
	pthread_t t;

	CHECK_EQ(pthread_create(&t, NULL, parent_writer, w), 0);
	for (;;) {
		ssize_t n = up_read(r, buf + have, REC - have);

		CHECK_OK(n);
		if (n == 0)
			break;
		have += (size_t)n;
		if (have < REC)
			continue;
		CHECK(buf[0] == 'P' || buf[0] == 'C');
		for (size_t i = 1; i < REC; i++)
			CHECK_EQ(buf[i], buf[0]);
		counts[buf[0] == 'C']++;
		have = 0;
	}
	CHECK_EQ(have, 0);
	CHECK_EQ(counts[0], 2003);
	CHECK_EQ(counts[1], 2000);
	CHECK_EQ(pthread_join(t, NULL), 0);
	harness_reap_ok(pid, 30, "writing child");
	up_close(r);
	up_pipe_release(p);
}

/* The same, step by step: the parent's end holds cached pages at the fork;
 * the child writes a page, then the parent writes one. Had the child kept
 * the parent's cache, both would fill the same page and the child's bytes
 * would be gone before the reader got to them. */
static void child_does_not_reuse_parent_pages(void)
{
	struct up_pipe *p = mk_pipe(1 * MiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *w = mk_end(p, UP_WR);
	static char page[4096], got[4096];
	int done[2];
	pid_t pid;

	sync_pipe(done);
	memset(page, '0', sizeof(page));
	CHECK_EQ(up_write(w, page, sizeof(page)), 4096); /* takes a batch of pages */
	pid = harness_fork(30);
	if (pid == 0) {
		close(done[0]);
		memset(page, 'C', sizeof(page));
		CHECK_EQ(up_write(w, page, sizeof(page)), 4096);
		sync_post(done[1]);
		CHECK_OK(up_close(w));
		CHECK_OK(up_close(r));
		_exit(0);
	}
	close(done[1]);
	sync_wait(done[0]);
	close(done[0]);
	memset(page, 'P', sizeof(page));
	CHECK_EQ(up_write(w, page, sizeof(page)), 4096);
	CHECK_OK(up_close(w));
	for (int i = 0; i < 3; i++) {
		size_t have = 0;

		while (have < sizeof(got)) {
			ssize_t n = up_read(r, got + have, sizeof(got) - have);

			CHECK(n > 0);
			have += (size_t)n;
		}
		for (size_t k = 0; k < sizeof(got); k++)
			CHECK_EQ(got[k], "0CP"[i]);
	}
	harness_reap_ok(pid, 30, "page child");
	CHECK_EQ(up_read(r, got, 1), 0);
	up_close(r);
	up_pipe_release(p);
}

/* A child's copy of an end is its own: stats count the child's traffic
 * only, and the ends of two pipes both work in the child. */
static void two_pipes_in_the_child(void)
{
	struct up_pipe *p1 = mk_pipe(64 * KiB, 4096), *p2 = mk_pipe(64 * KiB, 4096);
	struct up_end *r1 = mk_end(p1, UP_RD), *w1 = mk_end(p1, UP_WR);
	struct up_end *r2 = mk_end(p2, UP_RD), *w2 = mk_end(p2, UP_WR);
	pid_t pid;
	char c;

	write_pat(w1, 74, 0, 5000);
	pid = harness_fork(30);
	if (pid == 0) {
		struct up_stats st;

		/* child: pipe 1 carries the parent's bytes to the child, and
		 * the child answers on pipe 2 */
		CHECK_OK(up_close(w1));
		CHECK_OK(up_close(r2));
		read_pat(r1, 74, 0, 5000);
		CHECK_EQ(up_read(r1, &c, 1), 0);
		write_pat(w2, 75, 0, 7000);
		CHECK_OK(up_stats(p2, &st));
		CHECK_EQ(st.bytes_written, 7000);
		CHECK_OK(up_close(w2));
		CHECK_OK(up_close(r1));
		_exit(0);
	}
	CHECK_OK(up_close(w1));
	CHECK_OK(up_close(w2));
	read_pat(r2, 75, 0, 7000);
	CHECK_EQ(up_read(r2, &c, 1), 0);
	harness_reap_ok(pid, 30, "two-pipe child");
	up_close(r1);
	up_close(r2);
	up_pipe_release(p1);
	up_pipe_release(p2);
}

int main(int argc, char **argv)
{
	sem_init(argc, argv);
	harness_block_sigchld();

	RUN(child_writes_after_parent_closes);
	RUN(child_reads_after_parent_closes);
	RUN(child_close_leaves_parent_ends);
	RUN(child_killed_counts_as_closed);
	RUN(parent_and_child_write_at_once);
	RUN(child_does_not_reuse_parent_pages);
	RUN(two_pipes_in_the_child);
	return 0;
}
