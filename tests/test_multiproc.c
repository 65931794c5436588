/* SPDX-License-Identifier: MIT */
/*
 * test_multiproc.c - one pipe, several processes.
 *
 * A shared-memory transport must be tested with real processes on one memfd:
 *  - fork, the child closes the ends it inherited (as a pipe(2) user closes
 *    the fds it does not use) and re-attaches with
 *    up_pipe_attach(up_pipe_fd(p)), in both directions;
 *  - fork + exec of this very binary, the memfd passed over a Unix socket with
 *    SCM_RIGHTS (the memfd is close-on-exec, so this is the only way in; the
 *    inherited writer is closed before exec, or the exec'd reader would
 *    hold a writer of its own and never see end of stream), 64 MiB streamed
 *    and checked with an order-sensitive hash;
 *  - a peer that dies without closing counts as closed (EOF / -EPIPE);
 *  - up_pipe_attach() refuses what is not a pipe segment, without crashing.
 *
 * Start-up ordering is made explicit with a kernel pipe used only as a
 * "ready" signal, and anchor ends hold a child's role until its end is
 * open, so each side's end is counted before the other starts moving data
 * (the lifecycle would cope with any order, as a FIFO's: test_lifecycle,
 * test_fork and test_names test the orders). No sleeps are used for
 * ordering.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "harness.h"
#include "stream_harness.h"
#include "uringpipe.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

#define SCM_STREAM_BYTES (64 * MiB)
#define BLOCK_PRIME 1048573u /* the stream is a block of random bytes read at off % prime */

static uint8_t g_block[BLOCK_PRIME + 256 * 1024];

static void block_init(void)
{
	struct harness_rng rng;
	size_t i;

	harness_rng_seed(&rng, 0xb10c);
	for (i = 0; i + 8 <= sizeof(g_block); i += 8) {
		uint64_t v = harness_rng_next(&rng);

		memcpy(g_block + i, &v, 8);
	}
}

static uint64_t fnv1a(uint64_t h, const uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define FNV_INIT 0xcbf29ce484222325ull

static struct up_end *mk_end(struct up_pipe *p, int flags)
{
	struct up_end *e = NULL;

	CHECK_OK(up_open(p, flags, &e));
	CHECK(e != NULL);
	return e;
}

static struct up_pipe *mk_pipe(size_t capacity, size_t page)
{
	struct up_config cfg;
	struct up_pipe *p = NULL;

	up_config_init(&cfg);
	cfg.capacity = capacity;
	cfg.page_size = page;
	CHECK_OK(up_pipe_create(&cfg, &p));
	return p;
}

/* ------------------------------------------------------------------ cases */

/*
 * 16 MiB (and a bit) across processes in every direction: parent to child,
 * child to parent, and between two children while the parent holds no data
 * end at all (anchors only, until both are open). Random write and read
 * sizes up to 64 KiB; tests/stream_harness.h checks every byte and the
 * total, in whichever process reads.
 */
#define FORK_BYTES (16 * MiB + 12345)

static struct stream_mode fork_mode(const char *name, uint64_t seed, size_t bytes)
{
	struct stream_mode m = {
		.name = name, .seed = seed, .bytes = bytes,
		.wbuf = 64 * KiB, .rbuf = 64 * KiB, .wrng = seed, .rrng = seed ^ 0x5555,
		.write_size = stream_write_random, .read_size = stream_read_random,
	};

	return m;
}

static void fork_stream(const char *name, size_t cap, size_t page, uint64_t seed, size_t bytes,
			enum stream_at writer_at, enum stream_at reader_at)
{
	struct stream_mode m = fork_mode(name, seed, bytes);

	m.capacity = cap;
	m.page = page;
	m.writer_at = writer_at;
	m.reader_at = reader_at;
	stream_run(&m);
}

/* One side of such a stream on an end opened by hand (the dead peers). */
static void stream_write(struct up_end *w, uint64_t seed, size_t total)
{
	struct stream_mode m = fork_mode("stream_write", seed, total);
	struct stream_side s;

	stream_side_init(&s, &m, true);
	s.e = w;
	stream_write_side(&s);
}

/* Reads to EOF, checking the pattern; returns the bytes read. */
static size_t stream_read(struct up_end *r, uint64_t seed)
{
	struct stream_mode m = fork_mode("stream_read", seed, 0);
	struct stream_side s;

	stream_side_init(&s, &m, false);
	s.e = r;
	return stream_read_side(&s);
}

static void fork_parent_writes_child_reads(void)
{
	fork_stream(__func__, 256 * KiB, 4096, 101, FORK_BYTES, STREAM_HERE, STREAM_CHILD);
}

static void fork_child_writes_parent_reads(void)
{
	fork_stream(__func__, 256 * KiB, 64 * KiB, 102, FORK_BYTES, STREAM_CHILD, STREAM_HERE);
}

static void fork_both_children(void)
{
	fork_stream(__func__, 64 * KiB, 4096, 103, 4 * MiB, STREAM_CHILD, STREAM_CHILD);
}

/* A peer process that dies without closing counts as closed: the reader
 * gets the bytes the writer wrote, then end of stream instead of a hang. */
static void dead_writer_counts_as_closed(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *r = mk_end(p, UP_RD), *anchor = mk_end(p, UP_WR);
	int rdy[2], status = 0;
	double t_dead, t_eof;
	pid_t pid;

	CHECK_SYS(pipe(rdy));
	pid = harness_fork(60);
	if (pid == 0) {
		struct up_pipe *q;
		struct up_end *w;

		harness_close_inherited((struct up_end *[]){ r, anchor }, 2);
		q = harness_attach(p);
		w = mk_end(q, UP_WR);

		stream_write(w, 104, 10000);
		harness_signal_ready(rdy[1]);
		_exit(0); /* no up_close: the process just dies */
	}
	harness_wait_ready(rdy[0]);
	CHECK_OK(up_close(anchor));
	CHECK_EQ(harness_wait_child(pid, 30, &status), 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	t_dead = harness_now();
	/* the bytes it wrote first, then end of stream (not a hang) */
	printf("# blocking read: a writer that died without up_close must count as closed\n");
	harness_watchdog(10); /* due within 100 ms; 10 s turns "never" into a failure */
	CHECK_EQ(stream_read(r, 104), 10000);
	t_eof = harness_now();
	harness_watchdog(120);
	printf("# dead writer noticed %.1f ms after it was reaped\n", (t_eof - t_dead) * 1e3);
	CHECK(t_eof - t_dead < 5.0); /* 100 ms is due (test_peer_death measures it); this only catches "never" */
	{
		struct up_stats st;

		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.writers, 0);
	}
	CHECK_OK(up_close(r));
	close(rdy[0]);
	close(rdy[1]);
	up_pipe_release(p);
}

static void dead_reader_gives_epipe(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct up_end *w = mk_end(p, UP_WR), *anchor = mk_end(p, UP_RD);
	uint8_t buf[4096];
	int rdy[2], status = 0;
	size_t written = 0;
	ssize_t r;
	pid_t pid;

	CHECK_SYS(pipe(rdy));
	pid = harness_fork(60);
	if (pid == 0) {
		struct up_pipe *q;

		harness_close_inherited((struct up_end *[]){ w, anchor }, 2);
		q = harness_attach(p);
		(void)mk_end(q, UP_RD);
		harness_signal_ready(rdy[1]);
		_exit(0); /* dies holding a reader */
	}
	harness_wait_ready(rdy[0]);
	CHECK_OK(up_close(anchor));
	CHECK_EQ(harness_wait_child(pid, 30, &status), 0);
	/* blocking writes fill the pipe, then must see the reader is gone */
	printf("# blocking write: a reader that died without up_close must count as closed\n");
	harness_watchdog(10); /* due within 100 ms; 10 s turns "never" into a failure */
	memset(buf, 7, sizeof(buf));
	for (;;) {
		r = up_write(w, buf, sizeof(buf));
		if (r == -EPIPE)
			break;
		CHECK_EQ(r, (ssize_t)sizeof(buf));
		written += sizeof(buf);
		CHECK(written <= up_capacity(p));
	}
	harness_watchdog(120);
	CHECK_OK(up_close(w));
	close(rdy[0]);
	close(rdy[1]);
	up_pipe_release(p);
}

/* ---- fork + exec, memfd over SCM_RIGHTS ---- */

static void send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr msg;
	struct cmsghdr *cm;
	struct iovec iov;
	char b = 'F';

	memset(&msg, 0, sizeof(msg));
	memset(cbuf, 0, sizeof(cbuf));
	iov.iov_base = &b;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	CHECK_EQ(sendmsg(sock, &msg, 0), 1);
}

static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr msg;
	struct cmsghdr *cm;
	struct iovec iov;
	char b = 0;
	int fd = -1;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = &b;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	CHECK_EQ(recvmsg(sock, &msg, MSG_CMSG_CLOEXEC), 1);
	CHECK_EQ(b, 'F');
	cm = CMSG_FIRSTHDR(&msg);
	CHECK(cm != NULL);
	CHECK(cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS);
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	CHECK(fd >= 0);
	return fd;
}

static void read_full_fd(int fd, void *buf, size_t n)
{
	uint8_t *b = buf;

	while (n > 0) {
		ssize_t r = read(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0);
		b += r;
		n -= (size_t)r;
	}
}

/* The exec'ed child: argv = [prog, "--scm-child", sockfd]. */
static int scm_child_main(int sock)
{
	struct up_pipe *q = NULL;
	struct up_end *r;
	struct harness_rng rng;
	uint64_t h = FNV_INIT, res[2];
	size_t total = 0;
	uint8_t *buf = malloc(256 * KiB);
	int fd;

	harness_watchdog(60);
	harness_fail_on_sigpipe();
	CHECK(buf != NULL);
	fd = recv_fd(sock);
	CHECK_OK(up_pipe_attach(fd, &q));
	CHECK_SYS(close(fd)); /* attach duplicated it */
	r = mk_end(q, UP_RD);
	CHECK_EQ(write(sock, "R", 1), 1);
	harness_rng_seed(&rng, 0x5c0);
	for (;;) {
		size_t ask = (size_t)harness_rng_range(&rng, 1, 256 * KiB);
		ssize_t n = up_read(r, buf, ask);

		CHECK_OK(n);
		if (n == 0)
			break;
		h = fnv1a(h, buf, (size_t)n);
		total += (size_t)n;
	}
	CHECK_OK(up_close(r));
	up_pipe_release(q);
	res[0] = total;
	res[1] = h;
	CHECK_EQ(write(sock, res, sizeof(res)), (ssize_t)sizeof(res));
	free(buf);
	return 0;
}

static void exec_child_scm_rights_64mib(void)
{
	struct up_pipe *p = mk_pipe(1 * MiB, 4096);
	struct up_end *w = mk_end(p, UP_WR);
	struct harness_rng rng;
	uint64_t h = FNV_INIT, res[2];
	int sv[2], flags;
	size_t off = 0;
	double t0;
	pid_t pid;

	/* the memfd must not leak into the child by inheritance */
	flags = fcntl(up_pipe_fd(p), F_GETFD);
	CHECK(flags >= 0 && (flags & FD_CLOEXEC));
	CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char fdstr[16];

		/* Before exec: an exec'd program keeps the copy counted. */
		harness_close_inherited(&w, 1);
		if (fcntl(sv[1], F_SETFD, 0) < 0)
			_exit(3);
		snprintf(fdstr, sizeof(fdstr), "%d", sv[1]);
		execl("/proc/self/exe", "test_multiproc", "--scm-child", fdstr, (char *)NULL);
		_exit(4);
	}
	CHECK_SYS(close(sv[1]));
	send_fd(sv[0], up_pipe_fd(p));
	{
		char c = 0;

		read_full_fd(sv[0], &c, 1);
		CHECK_EQ(c, 'R');
	}
	t0 = harness_now();
	harness_rng_seed(&rng, 0x64);
	while (off < SCM_STREAM_BYTES) {
		size_t n = (size_t)harness_rng_range(&rng, 1, 256 * KiB);
		const uint8_t *src = g_block + off % BLOCK_PRIME;

		if (n > SCM_STREAM_BYTES - off)
			n = SCM_STREAM_BYTES - off;
		CHECK_EQ(up_write(w, src, n), (ssize_t)n);
		h = fnv1a(h, src, n);
		off += n;
	}
	CHECK_OK(up_close(w));
	read_full_fd(sv[0], res, sizeof(res));
	printf("# 64 MiB to an exec'ed child in %.0f ms\n", (harness_now() - t0) * 1e3);
	CHECK_EQ(res[0], SCM_STREAM_BYTES);
	if (res[1] != h) {
		fprintf(stderr, "checksum mismatch: child %016llx parent %016llx\n",
			(unsigned long long)res[1], (unsigned long long)h);
		CHECK(0);
	}
	harness_reap_ok(pid, 30, "exec_child_scm_rights_64mib");
	CHECK_SYS(close(sv[0]));
	up_pipe_release(p);
}

/* ---- attach: a second handle, and things that are not pipes ---- */

static void attach_dups_fd_and_interoperates(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096), *q = NULL;
	struct up_end *r, *w;
	int fd2 = dup(up_pipe_fd(p));
	char buf[16];

	CHECK(fd2 >= 0);
	CHECK_OK(up_pipe_attach(fd2, &q));
	CHECK(up_pipe_fd(q) >= 0 && up_pipe_fd(q) != fd2);
	CHECK_SYS(close(fd2)); /* the caller keeps (and may close) its own fd */
	CHECK_EQ(up_capacity(q), up_capacity(p));
	CHECK_EQ(up_page_size(q), up_page_size(p));
	w = mk_end(q, UP_WR);
	r = mk_end(p, UP_RD);
	CHECK_EQ(up_write(w, "across", 6), 6);
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 6);
	CHECK(memcmp(buf, "across", 6) == 0);
	{
		struct up_stats st;

		/* counts are of the pipe (all handles and processes) */
		CHECK_OK(up_stats(p, &st));
		CHECK_EQ(st.readers, 1);
		CHECK_EQ(st.writers, 1);
	}
	up_pipe_release(q);
	CHECK_OK(up_close(w));
	CHECK_EQ(up_read(r, buf, sizeof(buf)), 0);
	CHECK_OK(up_close(r));
	up_pipe_release(p);
}

static void check_refused(int fd, const char *what)
{
	struct up_pipe *q = NULL;
	int r = up_pipe_attach(fd, &q);

	if (r == 0) {
		fprintf(stderr, "up_pipe_attach accepted %s\n", what);
		up_pipe_release(q);
		CHECK(0);
	}
	if (r != -EPROTO && r != -EBADF && r != -EINVAL) {
		fprintf(stderr, "up_pipe_attach(%s) = %d (%s), want -EPROTO/-EBADF/-EINVAL\n",
			what, r, strerror(-r));
		CHECK(0);
	}
}

static void attach_refuses_non_pipes(void)
{
	struct up_pipe *p = mk_pipe(64 * KiB, 4096);
	struct stat st;
	uint8_t *copy;
	char tmpl[] = "/tmp/up_multiproc_XXXXXX";
	int fd, fds[2];

	check_refused(-1, "fd -1");
	check_refused(-12345, "fd -12345");
	fd = dup(0);
	if (fd < 0)
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_SYS(close(fd));
	check_refused(fd, "a closed fd");
	check_refused(1 << 20, "an fd number beyond any limit");

	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	check_refused(fd, "/dev/null");
	close(fd);

	fd = open("/dev/zero", O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	check_refused(fd, "/dev/zero");
	close(fd);

	fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	check_refused(fd, "a directory");
	close(fd);

	CHECK_SYS(pipe(fds));
	check_refused(fds[0], "a kernel pipe");
	close(fds[0]);
	close(fds[1]);

	CHECK_SYS(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds));
	check_refused(fds[0], "a socket");
	close(fds[0]);
	close(fds[1]);

	/* a regular file with exactly the bytes of a real segment */
	CHECK_SYS(fstat(up_pipe_fd(p), &st));
	CHECK(st.st_size > 0);
	copy = malloc((size_t)st.st_size);
	CHECK(copy != NULL);
	CHECK_EQ(pread(up_pipe_fd(p), copy, (size_t)st.st_size, 0), st.st_size);
	fd = mkstemp(tmpl);
	CHECK(fd >= 0);
	unlink(tmpl);
	CHECK_EQ(write(fd, copy, (size_t)st.st_size), st.st_size);
	check_refused(fd, "a regular file copy of a segment");
	close(fd);

	/* memfds that are not pipe segments */
	fd = memfd_create("up-empty", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(fd >= 0);
	CHECK_SYS(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	check_refused(fd, "an empty sealed memfd");
	close(fd);

	fd = memfd_create("up-zero", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(fd >= 0);
	CHECK_SYS(ftruncate(fd, st.st_size));
	CHECK_SYS(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	check_refused(fd, "a zero-filled sealed memfd");
	close(fd);

	fd = memfd_create("up-tiny", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, copy, 100), 100); /* a valid-looking header, truncated */
	CHECK_SYS(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW));
	check_refused(fd, "a sealed memfd holding only the first 100 bytes");
	close(fd);

	free(copy);
	up_pipe_release(p);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--scm-child") == 0)
		return scm_child_main(atoi(argv[2]));

	harness_init(argc, argv);
	harness_watchdog(120);
	harness_fail_on_sigpipe();
	harness_block_sigchld();
	block_init();

	RUN(fork_parent_writes_child_reads);
	RUN(fork_child_writes_parent_reads);
	RUN(fork_both_children);
	RUN(exec_child_scm_rights_64mib);
	RUN(attach_dups_fd_and_interoperates);
	RUN(attach_refuses_non_pipes);
	RUN(dead_writer_counts_as_closed);
	RUN(dead_reader_gives_epipe);
	return 0;
}
