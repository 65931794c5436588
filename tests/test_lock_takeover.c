/* SPDX-License-Identifier: MIT */
/*
 * test_lock_takeover.c - a lock whose holder died is taken over, by blocking
 * and by non-blocking ends alike.
 *
 * A child process opens an endpoint, writes its own lock value into the
 * readers' (or writers') lock word, as if it had been SIGKILLed inside
 * up_read (up_write), and exits. The parent's ends must go on: a
 * non-blocking reader once returned -EAGAIN for ever here while data was
 * readable (found by fuzzing). Also: a table full of dead entries.
 *
 * Each child first closes its copies of the parent's ends (ends of its own
 * since the fork, as pipe(2) fds are), so that what it leaves behind when it
 * dies is only the end it opened itself.
 */
#include <sched.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "up_int.h"
#include "bias.h"

/* @inh: the parent's @ninh open ends, which the child closes first. */
static void die_holding(struct up_pipe *p, int role, int which_lock, struct up_end **inh,
			int ninh)
{
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *e;

		harness_close_inherited(inh, ninh);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, role, &e) < 0)
			_exit(1);
		atomic_store(which_lock ? &q->ln->wlock.word : &q->ln->rlock.word, e->lock_id);
		_exit(0); /* no up_close: the lock stays named after us */
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A reader, blocking or not (@flags), finds the readers' lock named after
 * a dead process and takes it over: the bytes written before are read. */
static void reader_takes_over(int flags)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char buf[16];

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD | flags, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	CHECK_EQ(up_write(w, "hello", 5), 5);
	die_holding(p, UP_RD, 0, (struct up_end *[]){ r, w }, 2);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void nonblocking_reader_takes_over(void)
{
	reader_takes_over(UP_NONBLOCK);
}

static void nonblocking_writer_takes_over(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	char buf[16];

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w));
	die_holding(p, UP_WR, 1, (struct up_end *[]){ r, w }, 2);
	CHECK_EQ(up_write(w, "hello", 5), 5);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

static void blocking_reader_takes_over(void)
{
	reader_takes_over(0);
}

/* More processes than the endpoint table has entries die without closing:
 * opening must still work (the dead are reaped when the table is full). */
static void table_of_dead_entries_is_reaped(void)
{
	struct up_pipe *p;
	struct up_end *e;
	unsigned i;

	CHECK_OK(up_pipe_create(NULL, &p));
	for (i = 0; i < 2 * UP_SHM_MAX_ENDS; i++) {
		pid_t pid = fork();
		int status;

		CHECK(pid >= 0);
		if (pid == 0) {
			struct up_pipe *q;
			struct up_end *w;

			if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_WR, &w) < 0)
				_exit(1);
			_exit(0);
		}
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	CHECK_OK(up_open(p, UP_RD, &e));
	up_close(e);
	up_pipe_release(p);
}

/* A reader killed while asleep in up_read is taken off the readers' wait
 * line when it is reaped: its nwait count used to stay for the life of the
 * pipe, so every writer believed in a sleeper and issued wakes. */
static void dead_sleeper_is_taken_off_the_line(void)
{
	struct up_pipe *p;
	struct up_end *r, *w;
	pid_t pid;
	int status;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR, &w));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *e;
		char c;

		harness_close_inherited((struct up_end *[]){ r, w }, 2);
		if (up_pipe_attach(up_pipe_fd(p), &q) < 0 || up_open(q, UP_RD, &e) < 0)
			_exit(1);
		(void)up_read(e, &c, 1); /* sleeps until killed */
		_exit(2);
	}
	/* Asleep in the kernel, announced on the line. */
	while (harness_tid_state(pid) != 'S' || atomic_load(&p->ln->rd_wait.nwait) != 1)
		sched_yield();
	CHECK_SYS(kill(pid, SIGKILL));
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nwait), 1);
	/* 1: the sleeper's own reader. Its copies of r and w were closed
	 * right after the fork; left open, they would be reaped with it (3). */
	CHECK_EQ(up__peers_reap(w), 1);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.nwait), 0);
	CHECK_EQ(atomic_load(&p->ln->rd_wait.npoll), 0);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

/*
 * The other side of taking back a lock whose word names a live end: an end
 * that holds a lock for real (a reader between up_peek and up_consume, a
 * writer with a merge reservation open) keeps it. Its held word claims the
 * lock (lock.h), so a non-blocking taker, however often it retries (each
 * try backs off into the take-back), gets -EAGAIN, and the holder's
 * release still works.
 */
static void live_holders_keep_their_locks(void)
{
	struct up_pipe *p;
	struct up_end *r1, *r2, *w1, *w2, *w3;
	struct iovec iov[4];
	char buf[64];
	int cnt = 4, i;

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r1));
	CHECK_OK(up_open(p, UP_RD | UP_NONBLOCK, &r2));
	/* Two writers from the start: the writers' lock is never biased. */
	CHECK_OK(up_open(p, UP_WR, &w1));
	CHECK_OK(up_open(p, UP_WR, &w2));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w3));
	CHECK_EQ(up_write(w1, "0123456789", 10), 10);
	CHECK_EQ(up_peek(r1, iov, &cnt), 10);
	for (i = 0; i < 1000; i++)
		CHECK_EQ(up_read(r2, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(atomic_load(&p->ln->rlock.word) & ~UP_LOCK_WAITERS, r1->lock_id);
	CHECK_OK(up_consume(r1, 4));
	CHECK_EQ(up_read(r2, buf, sizeof(buf)), 6);
	CHECK(memcmp(buf, "456789", 6) == 0);
	/* A merge reservation holds the writers' lock until commit. */
	CHECK_EQ(up_write(w1, "abc", 3), 3);
	cnt = 4;
	CHECK_EQ(up_reserve(w1, 5, iov, &cnt), 5);
	memcpy(iov[0].iov_base, "defgh", 5);
	CHECK_EQ(atomic_load(&p->ln->wlock.word) & ~UP_LOCK_WAITERS, w1->lock_id);
	for (i = 0; i < 1000; i++)
		CHECK_EQ(up_write(w3, "X", 1), -EAGAIN);
	CHECK_OK(up_commit(w1, 5));
	CHECK_EQ(up_write(w3, "i", 1), 1);
	CHECK_EQ(up_read(r2, buf, sizeof(buf)), 9);
	CHECK(memcmp(buf, "abcdefghi", 9) == 0);
	up_close(w3);
	up_close(w2);
	up_close(w1);
	up_close(r2);
	up_close(r1);
	up_pipe_release(p);
}

/* A poll-mode writer about to arm on the writers' lock word finds it naming
 * a live idle writer that does not claim it: it must not arm (nobody would
 * ever drop that word) but retry, and the retry takes the lock back. */
static void poll_writer_does_not_arm_on_a_stored_word(void)
{
	struct up_pipe *p;
	struct up_end *r, *w, *idle;
	_Atomic uint32_t *word = NULL;
	uint32_t expect = 0;
	char buf[8];

	CHECK_OK(up_pipe_create(NULL, &p));
	CHECK_OK(up_open(p, UP_RD, &r));
	CHECK_OK(up_open(p, UP_WR | UP_NONBLOCK, &w));
	CHECK_OK(up_open(p, UP_WR, &idle));
	atomic_store(&p->ln->wlock.word, idle->lock_id);
	CHECK_EQ(up__wlock_poll_arm(w, &word, &expect), 1);
	CHECK_EQ(w->armed, UP_ARMED_NONE);
	CHECK_EQ(up_write(w, "poll", 4), 4);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 4);
	up_close(idle);
	up_close(w);
	up_close(r);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	harness_watchdog(30);
	RUN(nonblocking_reader_takes_over);
	RUN(nonblocking_writer_takes_over);
	RUN(blocking_reader_takes_over);
	RUN(table_of_dead_entries_is_reaped);
	RUN(dead_sleeper_is_taken_off_the_line);
	RUN(live_holders_keep_their_locks);
	RUN(poll_writer_does_not_arm_on_a_stored_word);
	return 0;
}
