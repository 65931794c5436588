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
 *   forked_handle_copy_does_not_mask_death
 *                           a child that holds a copy of its parent's pipe
 *                           handle does not keep the parent's ends alive;
 *   received_fd_kept        the memfd a process sent, kept by its receiver
 *                           and left unread in a socket, does not keep the
 *                           sender's ends alive once it died;
 *   forked_child_sees_parent_die
 *                           a child that took over its parent's ends sees
 *                           the parent's death (its mapping is its own);
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
#include <sys/socket.h>

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

/* Send @fd over the socket @sock (SCM_RIGHTS), one byte of payload. */
static void send_fd(int sock, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char byte = 'F';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;

	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	CHECK_EQ(sendmsg(sock, &m, 0), 1);
}

static int recv_fd(int sock)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *c;
	int fd;

	CHECK_EQ(recvmsg(sock, &m, MSG_CMSG_CLOEXEC), 1);
	c = CMSG_FIRSTHDR(&m);
	CHECK(c && c->cmsg_type == SCM_RIGHTS);
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* SIGKILL @victim, the writer of @r's pipe: @r must then read to end of
 * stream within BOUND_NS. */
static void kill_then_eof(pid_t victim, struct up_end *r, const char *what)
{
	char buf[64];
	uint64_t t0 = harness_now_ns(), ns;
	ssize_t n;
	int st;

	CHECK_SYS(kill(victim, SIGKILL));
	CHECK_EQ(waitpid(victim, &st, 0), victim);
	do
		n = up_read(r, buf, sizeof(buf));
	while (n > 0);
	ns = harness_now_ns() - t0;
	CHECK_EQ(n, 0);
	CHECK(ns < BOUND_NS);
	printf("# end of stream %.2f ms after the kill, %s\n", (double)ns / 1e6, what);
}

/*
 * A process's handle copied into a child by fork() while it had no end open
 * must not keep that process's ends alive once it dies: the victim makes a
 * pipe, forks a child that only holds its copy of the handle, then opens a
 * writer and sends the memfd to us; we read, kill the victim, and must see
 * end of stream while the child still lives.
 */
static void forked_handle_copy_does_not_mask_death(void)
{
	struct up_pipe *q = NULL;
	struct up_end *r = NULL;
	char buf[64];
	int sv[2], fd;
	pid_t victim;

	CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	victim = fork();
	CHECK_SYS(victim);
	if (victim == 0) {
		struct up_pipe *p = mk_pipe();
		struct up_end *w = NULL;
		pid_t holder;

		holder = fork();
		CHECK_SYS(holder);
		if (holder == 0) {
			/* Holds its copy of p (and of its descriptor) and waits
			 * for the socket to close: after the victim's death. */
			close(sv[0]);
			(void)read(sv[1], buf, 1);
			(void)read(sv[1], buf, 1);
			_exit(0);
		}
		CHECK_OK(up_open(p, UP_WR, &w));
		send_fd(sv[1], up_pipe_fd(p));
		CHECK_EQ(up_write(w, "hello", 5), 5);
		for (;;)
			pause(); /* until SIGKILL */
	}
	fd = recv_fd(sv[0]);
	CHECK_OK(up_pipe_attach(fd, &q));
	close(fd);
	CHECK_OK(up_open(q, UP_RD, &r));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	kill_then_eof(victim, r, "the victim's child holding its handle");
	close(sv[0]); /* lets the holder go */
	CHECK_OK(up_close(r));
	up_pipe_release(q);
}

/*
 * A receiver that keeps the descriptor it was sent (after attaching), and a
 * copy of it left unread in a socket, must not keep the sender's ends alive
 * once the sender dies: both are descriptions the sender holds no lock
 * through (up_pipe_fd()). The victim opens a writer, sends the memfd to us
 * and into a socket nobody reads, writes and is killed; we must see end of
 * stream within the bound.
 */
static void received_fd_kept(void)
{
	struct up_pipe *q = NULL;
	struct up_end *r = NULL;
	char buf[64];
	int sv[2], unread[2], fd;
	pid_t victim;

	CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, unread));
	victim = fork();
	CHECK_SYS(victim);
	if (victim == 0) {
		struct up_pipe *p = mk_pipe();
		struct up_end *w = NULL;

		CHECK_OK(up_open(p, UP_WR, &w));
		send_fd(unread[1], up_pipe_fd(p));
		send_fd(sv[1], up_pipe_fd(p));
		CHECK_EQ(up_write(w, "hello", 5), 5);
		for (;;)
			pause(); /* until SIGKILL */
	}
	fd = recv_fd(sv[0]);
	CHECK_OK(up_pipe_attach(fd, &q)); /* fd stays open, as a careless receiver's */
	CHECK_OK(up_open(q, UP_RD, &r));
	up_set_timeout(r, 3000); /* a wedge fails here, not at the watchdog */
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 5);
	kill_then_eof(victim, r, "its memfd kept here and queued in a socket");
	close(fd);
	close(unread[0]);
	close(unread[1]);
	close(sv[0]);
	close(sv[1]);
	CHECK_OK(up_close(r));
	up_pipe_release(q);
}

/*
 * A child that took over its parent's ends across fork() sees the parent's
 * death: the victim makes a pipe with both ends, forks a child that keeps
 * its copy of the reader, writes, and is killed; the child must read what
 * was written and then end of stream within the bound.
 */
static void forked_child_sees_parent_die(void)
{
	int go[2], res[2], st;
	uint64_t ns = 0;
	pid_t victim;
	char c;

	CHECK_SYS(pipe2(go, O_CLOEXEC));
	CHECK_SYS(pipe2(res, O_CLOEXEC));
	victim = fork();
	CHECK_SYS(victim);
	if (victim == 0) {
		struct up_pipe *p = mk_pipe();
		struct up_end *r = NULL, *w = NULL;
		pid_t child;

		CHECK_OK(up_open(p, UP_RD, &r));
		CHECK_OK(up_open(p, UP_WR, &w));
		child = fork();
		CHECK_SYS(child);
		if (child == 0) {
			char buf[16];
			uint64_t t0;
			ssize_t n;

			harness_close_inherited(&w, 1);
			CHECK_EQ(up_read(r, buf, sizeof(buf)), 2);
			CHECK_EQ(write(res[1], "R", 1), 1); /* ready: kill my parent */
			CHECK_EQ(read(go[0], &c, 1), 1);   /* it was killed */
			t0 = harness_now_ns();
			n = up_read(r, buf, sizeof(buf));
			ns = harness_now_ns() - t0;
			CHECK_EQ(n, 0);
			CHECK_EQ(write(res[1], &ns, sizeof(ns)), (ssize_t)sizeof(ns));
			_exit(0);
		}
		harness_close_inherited(&r, 1);
		CHECK_EQ(up_write(w, "hi", 2), 2);
		for (;;)
			pause(); /* until SIGKILL */
	}
	CHECK_EQ(read(res[0], &c, 1), 1);
	CHECK_SYS(kill(victim, SIGKILL));
	CHECK_EQ(waitpid(victim, &st, 0), victim);
	CHECK_EQ(write(go[1], "K", 1), 1);
	CHECK_EQ(read(res[0], &ns, sizeof(ns)), (ssize_t)sizeof(ns));
	CHECK(ns < BOUND_NS);
	printf("# the forked child saw end of stream %.2f ms after its parent's death\n",
	       (double)ns / 1e6);
	close(go[0]);
	close(go[1]);
	close(res[0]);
	close(res[1]);
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
	RUN(forked_handle_copy_does_not_mask_death);
	RUN(received_fd_kept);
	RUN(forked_child_sees_parent_die);
	RUN(readers_count_bumped);
	RUN(writers_count_bumped);
	RUN(readers_count_zeroed);
	RUN(writers_count_zeroed);
	RUN(phantom_entries);
	return 0;
}
