/* SPDX-License-Identifier: MIT */
/*
 * fork_parent_child.c - a parent and a child process after fork(), one pipe
 * each way: the parent streams 16 MiB to the child, the child answers with a
 * checksum of what it read.
 *
 * The pipe(2) way, step by step as with kernel pipes:
 *  - up_pipe2() makes both pipes before the fork; the child inherits all
 *    four ends, each copy an end of its own (it counts in the pipe's readers
 *    or writers from the moment of the fork);
 *  - each process closes at once the ends it does not use: the child the
 *    request writer and the reply reader, the parent the other two. Were
 *    the child to keep its copy of the request writer, it would never see
 *    end of stream, exactly as with pipe(2); closing a copy never affects
 *    the other process's ends;
 *  - each uses the ends it kept directly: no re-attach, no "ready" byte. The
 *    ends may start in any order, as a FIFO's: a reader with no writer yet
 *    waits for one, a writer with no reader yet has its data kept.
 * (A child that exec()s must up_close() its copies before exec: the new
 * program could not use them, and they would stay counted until it exits.)
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

/* The child: reads the request stream to its end, answers its checksum. */
static int child(struct up_end *r, struct up_end *w)
{
	static unsigned char buf[1 << 16];
	uint64_t h = 0xcbf29ce484222325ull;
	ssize_t n;

	while ((n = up_read(r, buf, sizeof(buf))) > 0)
		h = fnv(h, buf, (size_t)n);
	if (n < 0 || up_write(w, &h, sizeof(h)) != (ssize_t)sizeof(h))
		return 1;
	up_close(r);
	up_close(w); /* end of stream for the parent */
	return 0;
}

int main(void)
{
	struct up_end *req[2], *rep[2]; /* [0] the reader, [1] the writer */
	static unsigned char buf[1 << 16];
	uint64_t h = 0xcbf29ce484222325ull, answer = 0;
	size_t off = 0, i;
	int status;
	char c;
	pid_t pid;

	if (up_pipe2(req, NULL) < 0 || up_pipe2(rep, NULL) < 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		up_close(req[1]); /* the child reads requests... */
		up_close(rep[0]); /* ...and writes the reply */
		_exit(child(req[0], rep[1]));
	}
	up_close(req[0]); /* the parent writes requests... */
	up_close(rep[1]); /* ...and reads the reply */
	while (off < TOTAL) {
		ssize_t n;

		for (i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)(off + i * 7);
		n = up_write(req[1], buf, sizeof(buf));
		if (n < 0) {
			fprintf(stderr, "up_write: %s\n", up_strerror((int)n));
			return 1;
		}
		h = fnv(h, buf, (size_t)n);
		off += (size_t)n;
	}
	up_close(req[1]); /* end of stream for the child */
	if (read_full(rep[0], &answer, sizeof(answer)) != (ssize_t)sizeof(answer) ||
	    up_read(rep[0], &c, 1) != 0) /* then end of stream: the child closed */
		return 1;
	up_close(rep[0]);
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
