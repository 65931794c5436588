/* SPDX-License-Identifier: MIT */
/*
 * epoll_pollfd.c - a non-blocking reader driven by epoll, as in an event
 * loop (libuv, libevent, your own): the endpoint's up_pollfd() goes into the
 * epoll set next to the loop's other fds.
 *
 * The pattern: call the non-blocking function; on -EAGAIN, up_poll_arm();
 * 1 means "retry now", 0 means "wait for the fd". Readiness may be spurious
 * (retry gives -EAGAIN: arm again). A writer thread sends bursts with pauses
 * so that the reader really waits. Exit 0 on success, 77 where up_pollfd is
 * not supported (futex backend: no io_uring on this host), 1 on failure.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <uringpipe.h>

#define MSGS 200
#define MSG_LEN 1000

static void *writer_main(void *arg)
{
	struct up_end *w = arg;
	unsigned char msg[MSG_LEN];
	int i;

	for (i = 0; i < MSGS; i++) {
		for (size_t k = 0; k < sizeof(msg); k++)
			msg[k] = (unsigned char)(i + (int)k);
		if (up_write(w, msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			break;
		if (i % 20 == 0)
			usleep(2000); /* let the reader run dry and sleep in epoll */
	}
	up_close(w);
	return NULL;
}

int main(void)
{
	struct up_end *ends[2], *r;
	struct epoll_event ev = { .events = EPOLLIN };
	unsigned char buf[4096];
	size_t off = 0;
	unsigned waits = 0;
	pthread_t t;
	int ep, fd, a;

	if (up_pipe2(ends, NULL) < 0)
		return 1;
	/* The reader must be non-blocking: open a second reader with UP_NONBLOCK
	 * on the same pipe and close the blocking one from up_pipe2(). */
	if (up_open(up_end_pipe(ends[0]), UP_RD | UP_NONBLOCK, &r) < 0)
		return 1;
	up_close(ends[0]);
	fd = up_pollfd(r);
	if (fd == -EOPNOTSUPP) {
		printf("skip: up_pollfd not supported here (futex backend)\n");
		up_close(r);
		up_close(ends[1]);
		return 77;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		return 1;
	if (pthread_create(&t, NULL, writer_main, ends[1]) != 0)
		return 1;
	for (;;) {
		ssize_t n = up_read(r, buf, sizeof(buf));

		if (n > 0) {
			for (ssize_t k = 0; k < n; k++, off++)
				if (buf[k] != (unsigned char)(off / MSG_LEN + off % MSG_LEN)) {
					fprintf(stderr, "mismatch at byte %zu\n", off);
					return 1;
				}
			continue;
		}
		if (n == 0)
			break; /* end of stream */
		if (n != -EAGAIN) {
			fprintf(stderr, "up_read: %s\n", up_strerror((int)n));
			return 1;
		}
		a = up_poll_arm(r);
		if (a == 1)
			continue; /* progress possible already: nothing was armed */
		if (a < 0) {
			fprintf(stderr, "up_poll_arm: %s\n", up_strerror(a));
			return 1;
		}
		/* Here a real loop would also wait for its sockets and timers.
		 * EINTR happens without any signal: the endpoint's io_uring task
		 * work interrupts the thread's blocking call. Retry, as loops do. */
		do
			a = epoll_wait(ep, &ev, 1, 10000);
		while (a < 0 && errno == EINTR);
		if (a != 1) {
			fprintf(stderr, "no readiness within 10 s\n");
			return 1;
		}
		waits++;
	}
	pthread_join(t, NULL);
	close(ep);
	up_close(r); /* also closes the pollfd */
	if (off != (size_t)MSGS * MSG_LEN) {
		fprintf(stderr, "got %zu bytes\n", off);
		return 1;
	}
	printf("ok: %zu bytes, %u epoll waits\n", off, waits);
	return 0;
}
