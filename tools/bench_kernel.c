/* SPDX-License-Identifier: MIT */
/*
 * bench_kernel.c - the kernel transports of `uringpipe-cat --bench`, each
 * with its buffer asked to be the capacity:
 *
 *   kernel      pipe2(), write()/read(); F_SETPIPE_SZ;
 *   pipe_uring  the same pipe, every write and read one io_uring WRITE or
 *               READ SQE submitted and waited for in one io_uring_enter(),
 *               one ring per thread;
 *   vmsplice    the same pipe; the writer copies each chunk into the next
 *               span of its rotating buffers (the producer making its data
 *               in place, as the zero-copy writer does into the ring) and
 *               vmsplice()s it; the reader read()s;
 *   unix        socketpair(AF_UNIX, SOCK_STREAM), SO_SNDBUF/SO_RCVBUF;
 *   tcp         a 127.0.0.1 connection, SO_SNDBUF/SO_RCVBUF, TCP_NODELAY.
 *
 * The vmsplice writer's buffers (one mapping, used round and round) total
 * twice the pipe's size plus two writes and a page, and the writer moves on
 * through them by the bytes the pipe took, so that it goes round once per
 * more than twice the pipe's size of stream: a pipe holds at most its size
 * in bytes of the pages it was given, so a span is never rewritten while
 * the pipe still refers to it.
 *
 * Every function that makes a system call counts it in w->calls (the
 * callers count the one that returned; the EINTR retries are counted here),
 * which is what the table's system calls per GiB of a kernel transport is.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef UP_CAT_HAVE_URING
#include <liburing.h>
#endif

#include "bench.h"

#define RING_ENTRIES 4

/* SO_SNDBUF/SO_RCVBUF of @fd asked to be @cap: forced when we may (root,
 * CAP_NET_ADMIN), else capped by the kernel at wmem_max/rmem_max. */
static void sock_bufs(int fd, uint64_t cap)
{
	int v = cap > (uint64_t)(1 << 30) ? 1 << 30 : (int)cap;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

static long sock_get(int fd, int opt)
{
	int v = 0;
	socklen_t l = sizeof(v);

	return getsockopt(fd, SOL_SOCKET, opt, &v, &l) < 0 ? -1 : v;
}

static void open_pipe(const struct env *env, int fds[2])
{
	long got;

	if (pipe2(fds, O_CLOEXEC) < 0)
		bench_die("pipe2: %s", strerror(errno));
	if (env->kpipe_req > 0 && fcntl(fds[1], F_SETPIPE_SZ, env->kpipe_req) < 0)
		bench_die("F_SETPIPE_SZ(%d): %s (it worked at start-up)", env->kpipe_req,
			  strerror(errno));
	got = fcntl(fds[1], F_GETPIPE_SZ);
	if (got != env->kpipe_size)
		bench_die("kernel pipe is %ld B, expected %ld B (per-user pipe limits?)", got,
			  env->kpipe_size);
}

/* fds[0] the reading side, fds[1] the writing side. */
static void open_unix(uint64_t cap, int fds[2])
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		bench_die("socketpair: %s", strerror(errno));
	sock_bufs(sv[0], cap);
	sock_bufs(sv[1], cap);
	fds[0] = sv[0];
	fds[1] = sv[1];
}

static void open_tcp(uint64_t cap, int fds[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int one = 1, l, c, s;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || c < 0)
		bench_die("socket(AF_INET): %s", strerror(errno));
	/* Before listen() and connect(): the window scale is chosen then. */
	sock_bufs(l, cap);
	sock_bufs(c, cap);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		bench_die("tcp listen on 127.0.0.1: %s", strerror(errno));
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		bench_die("tcp connect to 127.0.0.1: %s", strerror(errno));
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0)
		bench_die("tcp accept: %s", strerror(errno));
	close(l);
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	sock_bufs(s, cap);
	fds[0] = s;
	fds[1] = c;
}

void bench_kernel_open(struct run *rn)
{
	int fds[2];

	switch (rn->t) {
	case T_UNIX:
		open_unix(rn->o->capacity, fds);
		break;
	case T_TCP:
		open_tcp(rn->o->capacity, fds);
		break;
	default:
		open_pipe(rn->env, fds);
		break;
	}
	/* One descriptor per worker, so each thread's close is its own: the
	 * last writer's is the readers' EOF. */
	for (unsigned i = 0; i < rn->n; i++) {
		struct worker *w = &rn->ws[i];
		int base = w->writer ? fds[1] : fds[0];
		w->fd = w->idx == 0 ? base : fcntl(base, F_DUPFD_CLOEXEC, 0);
		if (w->fd < 0)
			bench_die("dup: %s", strerror(errno));
	}
}

void bench_kernel_probe(const struct opts *o, struct env *env)
{
	int fds[2];

#ifdef UP_CAT_HAVE_URING
	if (o->on[T_PIPE_URING]) {
		struct io_uring ring;
		int r = io_uring_queue_init(RING_ENTRIES, &ring, 0);
		if (r < 0) /* a seccomp profile, io_uring_disabled */
			bench_die("--vs pipe-uring: io_uring refused here: %s", strerror(-r));
		io_uring_queue_exit(&ring);
	}
#endif

	if (o->on[T_UNIX]) {
		open_unix(o->capacity, fds);
		env->unix_buf[0] = sock_get(fds[1], SO_SNDBUF);
		env->unix_buf[1] = sock_get(fds[0], SO_RCVBUF);
		close(fds[0]);
		close(fds[1]);
	}
	if (o->on[T_TCP]) {
		open_tcp(o->capacity, fds);
		env->tcp_buf[0] = sock_get(fds[1], SO_SNDBUF);
		env->tcp_buf[1] = sock_get(fds[0], SO_RCVBUF);
		close(fds[0]);
		close(fds[1]);
	}
}

int bench_kernel_thread_init(struct worker *w)
{
	if (w->sh->t == T_PIPE_URING) {
#ifdef UP_CAT_HAVE_URING
		struct io_uring *ring = bench_xmalloc(sizeof(*ring));
		int r = io_uring_queue_init(RING_ENTRIES, ring, 0);
		if (r < 0) {
			free(ring);
			snprintf(w->err, sizeof(w->err), "io_uring_queue_init: %s", strerror(-r));
			return r;
		}
		w->ring = ring;
#else
		snprintf(w->err, sizeof(w->err), "pipe-uring: built without liburing");
		return -ENOSYS;
#endif
	}
	if (w->sh->t == T_VMSPLICE && w->writer && !w->vbuf) {
		long psz = fcntl(w->fd, F_GETPIPE_SZ);
		if (psz < 0)
			psz = (long)MiB;
		w->vlen = 2 * (size_t)psz + 2 * w->sh->size + 4096;
		w->vbuf = mmap(NULL, w->vlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (w->vbuf == MAP_FAILED) {
			w->vbuf = NULL;
			snprintf(w->err, sizeof(w->err), "mmap %zu: %s", w->vlen, strerror(errno));
			return -errno;
		}
		memset(w->vbuf, 0, w->vlen); /* faulted in before the start line */
		w->voff = 0;
	}
	return 0;
}

void bench_kernel_close(struct worker *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
#ifdef UP_CAT_HAVE_URING
	if (w->ring) {
		io_uring_queue_exit(w->ring);
		free(w->ring);
		w->ring = NULL;
	}
#endif
	if (w->vbuf)
		munmap(w->vbuf, w->vlen);
	w->vbuf = NULL;
}

#ifdef UP_CAT_HAVE_URING
/* One SQE, submitted and waited for by one io_uring_enter(). */
static ssize_t ring_rw(struct worker *w, bool wr, void *p, size_t n)
{
	struct io_uring *ring = w->ring;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	int r;

	if (!sqe)
		return -EBUSY;
	if (wr)
		io_uring_prep_write(sqe, w->fd, p, (unsigned)n, (uint64_t)-1);
	else
		io_uring_prep_read(sqe, w->fd, p, (unsigned)n, (uint64_t)-1);
	for (;;) {
		r = io_uring_submit_and_wait(ring, 1);
		if (r >= 0)
			break;
		if (r != -EINTR)
			return r;
		w->calls++;
	}
	r = io_uring_peek_cqe(ring, &cqe);
	while (r == -EAGAIN) {
		w->calls++; /* not expected: the wait above had the CQE */
		r = io_uring_wait_cqe(ring, &cqe);
	}
	if (r < 0)
		return r;
	r = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return r;
}
#endif

/* The next span of the rotating buffers, @n bytes of @p copied in, given
 * to the pipe. */
static ssize_t vsplice_write(struct worker *w, const void *p, size_t n)
{
	struct iovec iov;

	if (w->voff + n > w->vlen)
		w->voff = 0;
	memcpy(w->vbuf + w->voff, p, n);
	iov.iov_base = w->vbuf + w->voff;
	iov.iov_len = n;
	for (;;) {
		ssize_t r = vmsplice(w->fd, &iov, 1, 0);
		if (r >= 0) {
			/* Only what the pipe took is used up: the caller's next
			 * call copies the rest to the same place again. Were the
			 * whole span used up, a pipe taking a page at a time would
			 * go round the buffers in less than twice its size of
			 * stream, and rewrite pages it still holds (the
			 * verification pass saw it with 4 KiB reads). */
			w->voff += (size_t)r;
			return r;
		}
		if (errno != EINTR)
			return -errno;
		w->calls++;
	}
}

static ssize_t fd_rw(struct worker *w, bool wr, void *p, size_t n)
{
	for (;;) {
		ssize_t r = wr ? write(w->fd, p, n) : read(w->fd, p, n);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
		w->calls++;
	}
}

ssize_t bench_kernel_write(struct worker *w, const void *p, size_t n)
{
#ifdef UP_CAT_HAVE_URING
	if (w->sh->t == T_PIPE_URING)
		return ring_rw(w, true, (void *)p, n);
#endif
	if (w->sh->t == T_VMSPLICE)
		return vsplice_write(w, p, n);
	return fd_rw(w, true, (void *)p, n);
}

ssize_t bench_kernel_read(struct worker *w, void *p, size_t n)
{
#ifdef UP_CAT_HAVE_URING
	if (w->sh->t == T_PIPE_URING)
		return ring_rw(w, false, p, n);
#endif
	return fd_rw(w, false, p, n);
}
