/* SPDX-License-Identifier: MIT */
/*
 * uring_service.c - a service that waits on a uringpipe AND a socket in one
 * io_uring, the way it would wait on its clients and timers.
 *
 * The socket's data comes through an ordinary IORING_OP_RECV; the pipe's
 * wait is an SQE prepared by up_uring_prep_poll() (uringpipe/uring.h). The
 * pipe endpoint is non-blocking: read until -EAGAIN, then prepare the wait;
 * any completion of that SQE just means "read again". A producer thread
 * feeds both sources in bursts and then closes them; the service stops when
 * both are at end of stream and checks the totals.
 * Exit 0 on success, 77 where io_uring (or its futex opcodes) is refused.
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uringpipe.h>
#include <uringpipe/uring.h>

enum { TAG_PIPE = 1, TAG_SOCK = 2 };
#define ROUNDS 100
#define PIPE_MSG 3000
#define SOCK_MSG 100

struct feed { struct up_end *w; int sock; };

static void *producer(void *arg)
{
	struct feed *f = arg;
	char msg[PIPE_MSG];
	int i;

	memset(msg, 'p', sizeof(msg));
	for (i = 0; i < ROUNDS; i++) {
		if (up_write(f->w, msg, sizeof(msg)) != (ssize_t)sizeof(msg) ||
		    send(f->sock, msg, SOCK_MSG, 0) != SOCK_MSG)
			break;
		if (i % 10 == 0)
			usleep(1000); /* the service goes to sleep in the ring */
	}
	up_close(f->w);
	close(f->sock);
	return NULL;
}

int main(void)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct up_end *ends[2], *r;
	struct up_stats st;
	struct feed f;
	char pbuf[8192], sbuf[512];
	size_t pipe_bytes = 0, sock_bytes = 0;
	int sv[2], pipe_open = 1, sock_open = 1, pipe_armed = 0;
	pthread_t t;

	if (io_uring_queue_init(8, &ring, 0) < 0) {
		printf("skip: io_uring refused on this host\n");
		return 77;
	}
	if (up_pipe2(ends, NULL) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 ||
	    up_open(up_end_pipe(ends[0]), UP_RD | UP_NONBLOCK, &r) < 0)
		return 1;
	up_close(ends[0]); /* keep only the non-blocking reader */
	if (up_stats(up_end_pipe(r), &st) < 0 || strncmp(st.backend, "io_uring", 8) != 0) {
		printf("skip: backend is %s (no io_uring futex opcodes)\n", st.backend);
		return 77;
	}
	f.w = ends[1];
	f.sock = sv[1];
	if (pthread_create(&t, NULL, producer, &f) != 0)
		return 1;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_recv(sqe, sv[0], sbuf, sizeof(sbuf), 0);
	io_uring_sqe_set_data64(sqe, TAG_SOCK);
	while (pipe_open || sock_open) {
		/* Drain the pipe; once it would block, put its wait in the ring. */
		while (pipe_open && !pipe_armed) {
			ssize_t n = up_read(r, pbuf, sizeof(pbuf));

			if (n > 0) {
				pipe_bytes += (size_t)n;
			} else if (n == 0) {
				pipe_open = 0; /* end of stream */
			} else if (n == -EAGAIN) {
				sqe = io_uring_get_sqe(&ring);
				if (up_uring_prep_poll(r, sqe) == 1)
					io_uring_prep_nop(sqe); /* ready already: the SQE must not dangle */
				io_uring_sqe_set_data64(sqe, TAG_PIPE);
				pipe_armed = 1;
			} else {
				fprintf(stderr, "up_read: %s\n", up_strerror((int)n));
				return 1;
			}
		}
		if (!pipe_open && !sock_open)
			break;
		if (io_uring_submit_and_wait(&ring, 1) < 0 || io_uring_wait_cqe(&ring, &cqe) < 0)
			return 1;
		if (io_uring_cqe_get_data64(cqe) == TAG_PIPE) {
			pipe_armed = 0; /* any result (0, -EAGAIN, ...) means: read again */
		} else if (cqe->res > 0) {
			sock_bytes += (size_t)cqe->res;
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_recv(sqe, sv[0], sbuf, sizeof(sbuf), 0);
			io_uring_sqe_set_data64(sqe, TAG_SOCK);
		} else {
			sock_open = 0; /* 0: the producer closed its end */
		}
		io_uring_cqe_seen(&ring, cqe);
	}
	pthread_join(t, NULL);
	up_close(r);
	close(sv[0]);
	io_uring_queue_exit(&ring);
	if (pipe_bytes != ROUNDS * PIPE_MSG || sock_bytes != ROUNDS * SOCK_MSG) {
		fprintf(stderr, "pipe %zu, socket %zu bytes\n", pipe_bytes, sock_bytes);
		return 1;
	}
	printf("ok: pipe %zu bytes, socket %zu bytes, one ring\n", pipe_bytes, sock_bytes);
	return 0;
}
