/* SPDX-License-Identifier: MIT */
/*
 * scm_rights.c - two unrelated processes: the pipe's memfd travels over a
 * Unix socket with SCM_RIGHTS, and the receiver attaches to it.
 *
 * To stay one self-contained test, the program forks and execs itself with
 * the argument "child <socket fd>"; the child is then a fresh program image
 * that shares nothing with the parent but the socket. (The memfd is
 * close-on-exec, so it cannot simply be inherited across exec.) The ends
 * are inherited by fork() as pipe(2) fds are, but an exec'd program cannot
 * use them and would keep them counted until it exits, so the child
 * closes its copy of the writer before exec, as it would a pipe fd without
 * O_CLOEXEC: kept, it would hold the stream open and the reader would
 * never see end of stream.
 * The parent streams 8 MiB; the child checks every byte and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uringpipe.h>

#define TOTAL ((size_t)8 << 20)

static unsigned char pattern(size_t off) { return (unsigned char)(off % 251); }

static int send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = "F", .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static int child_main(int sock)
{
	static unsigned char buf[1 << 16];
	struct up_pipe *p;
	struct up_end *r;
	size_t off = 0, i;
	ssize_t n;
	int fd = recv_fd(sock), e;

	if (fd < 0)
		return 1;
	e = up_pipe_attach(fd, &p); /* validates the segment; dups the fd */
	close(fd);
	if (e < 0 || up_open(p, UP_RD, &r) < 0) {
		fprintf(stderr, "child: attach/open: %s\n", up_strerror(e));
		return 1;
	}
	if (write(sock, "R", 1) != 1) /* we are up: the parent may write */
		return 1;
	while ((n = up_read(r, buf, sizeof(buf))) > 0)
		for (i = 0; i < (size_t)n; i++, off++)
			if (buf[i] != pattern(off))
				return 1;
	up_close(r);
	up_pipe_release(p);
	return n == 0 && off == TOTAL ? 0 : 1;
}

int main(int argc, char **argv)
{
	static unsigned char buf[1 << 16];
	struct up_pipe *p;
	struct up_end *w;
	size_t off = 0, i;
	int sv[2], status;
	char arg[16], c;
	pid_t pid;

	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child_main(atoi(argv[2]));
	/* The writer may open before the reader exists, as with a FIFO: the
	 * child's reader waits for it, and its data is kept for the reader. */
	if (up_pipe_create(NULL, &p) < 0 || up_open(p, UP_WR, &w) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) /* no CLOEXEC: sv[1] crosses exec */
		return 1;
	pid = fork();
	if (pid == 0) {
		up_close(w); /* before exec: the new program could not close it */
		close(sv[0]);
		snprintf(arg, sizeof(arg), "%d", sv[1]);
		execl("/proc/self/exe", argv[0], "child", arg, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	/* Wait for the child's "R": had it failed before opening its reader,
	 * our writes would wait for a reader for ever, as a FIFO's would. */
	if (pid < 0 || send_fd(sv[0], up_pipe_fd(p)) < 0 || read(sv[0], &c, 1) != 1)
		return 1;
	while (off < TOTAL) {
		ssize_t n;

		for (i = 0; i < sizeof(buf); i++)
			buf[i] = pattern(off + i);
		if ((n = up_write(w, buf, sizeof(buf))) < 0) {
			fprintf(stderr, "up_write: %s\n", up_strerror((int)n));
			return 1;
		}
		off += (size_t)n;
	}
	up_close(w);
	up_pipe_release(p);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "child failed\n");
		return 1;
	}
	printf("ok: %zu bytes through a memfd passed with SCM_RIGHTS\n", off);
	return 0;
}
