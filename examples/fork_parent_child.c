/* SPDX-License-Identifier: MIT */
/*
 * fork_parent_child.c - a parent and a child process after fork(), one pipe
 * each way: the parent streams 16 MiB to the child, the child answers with a
 * checksum of what it read.
 *
 * Rules shown here:
 *  - the child re-attaches with up_pipe_attach(up_pipe_fd(p)) and opens its
 *    own endpoints; it never uses (nor closes) the handles it inherited;
 *  - each side opens its end before the other starts moving data (a reader
 *    with no writer sees end of stream, a writer with no reader -EPIPE, as
 *    with pipe(7)); a kernel pipe carries the "ready" byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uringpipe.h>

#define TOTAL ((size_t)16 << 20)

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

/* up_read returns what is there: loop for an exact count. */
static ssize_t read_full(struct up_end *r, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = up_read(r, (char *)buf + got, len - got);

		if (n <= 0)
			return n < 0 ? n : (ssize_t)got;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static int child(struct up_pipe *req, struct up_pipe *rep, int ready_fd)
{
	struct up_pipe *q_req, *q_rep;
	struct up_end *r, *w;
	static unsigned char buf[1 << 16];
	uint64_t h = 0xcbf29ce484222325ull;
	ssize_t n;

	if (up_pipe_attach(up_pipe_fd(req), &q_req) < 0 ||
	    up_pipe_attach(up_pipe_fd(rep), &q_rep) < 0 ||
	    up_open(q_req, UP_RD, &r) < 0 || up_open(q_rep, UP_WR, &w) < 0)
		return 1;
	if (write(ready_fd, "!", 1) != 1)
		return 1;
	while ((n = up_read(r, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	if (n < 0 || up_write(w, &h, sizeof(h)) != (ssize_t)sizeof(h))
		return 1;
	up_close(r);
	up_close(w);
	up_pipe_release(q_req);
	up_pipe_release(q_rep);
	return 0;
}

int main(void)
{
	struct up_pipe *req, *rep;
	struct up_end *w, *r;
	static unsigned char buf[1 << 16];
	uint64_t h = 0xcbf29ce484222325ull, answer = 0;
	size_t off = 0, i;
	int rdy[2], status;
	char c;
	pid_t pid;

	if (up_pipe_create(NULL, &req) < 0 || up_pipe_create(NULL, &rep) < 0 ||
	    up_open(req, UP_WR, &w) < 0 || up_open(rep, UP_RD, &r) < 0 || pipe(rdy) < 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		_exit(child(req, rep, rdy[1]));
	if (read(rdy[0], &c, 1) != 1) /* the child's ends exist now */
		return 1;
	while (off < TOTAL) {
		ssize_t n;

		for (i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)(off + i * 7);
		n = up_write(w, buf, sizeof(buf));
		if (n < 0) {
			fprintf(stderr, "up_write: %s\n", up_strerror((int)n));
			return 1;
		}
		h = fnv(h, buf, (size_t)n);
		off += (size_t)n;
	}
	up_close(w); /* end of stream for the child */
	if (read_full(r, &answer, sizeof(answer)) != (ssize_t)sizeof(answer) ||
	    up_read(r, &c, 1) != 0) /* then end of stream: the child closed */
		return 1;
	up_close(r);
	up_pipe_release(req);
	up_pipe_release(rep);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "child failed\n");
		return 1;
	}
	if (answer != h) {
		fprintf(stderr, "checksum mismatch: %llx != %llx\n", (unsigned long long)answer,
			(unsigned long long)h);
		return 1;
	}
	printf("ok: %zu bytes, checksum %016llx\n", off, (unsigned long long)h);
	return 0;
}
