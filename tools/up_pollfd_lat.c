/* SPDX-License-Identifier: MIT */
/*
 * up_pollfd_lat - wake latency through up_pollfd(): from the start of a
 * 8-byte up_write() to the return of the epoll_wait() of a loop armed on
 * the reader (and to the up_read() that gets the bytes), on both wake
 * backends in one run. The reader opens with UP_NO_EARLY: the rounds come
 * at a steady pace, and an early readiness would be no wake to time.
 *
 * Usage: uringpipe-pollfd-lat [--rounds N] [--blocks B] [--gap-us U] [--process]
 *
 * A sender thread writes its clock into pipe P and waits for the loop's
 * reply on pipe Q; before each round it idles --gap-us (default 300 us), so
 * that the loop has read, found -EAGAIN, armed and gone to sleep in
 * epoll_wait. Backends alternate by block (B blocks of N rounds each, per
 * backend; new ends each block, UP_FORCE_FUTEX set or not before up_open),
 * and the samples of each backend are pooled. The two threads are pinned to
 * CPUs 0 and 1 when the affinity mask allows. Figures on a VM move between
 * runs: compare the backends of one run.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uringpipe.h"

static int g_rounds = 2000, g_blocks = 4, g_gap_us = 300;
static bool g_process;
static int g_cpu[2] = { -1, -1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_us(int us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static __attribute__((noreturn)) void die(const char *what, long r)
{
	fprintf(stderr, "uringpipe-pollfd-lat: %s: %s\n", what, strerror((int)(r < 0 ? -r : r)));
	exit(1);
}

static void pin(int i)
{
	cpu_set_t s;

	if (g_cpu[i] < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(g_cpu[i], &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

struct run {
	struct up_end *pw, *pr, *qw, *qr; /* P: sender -> loop, Q: loop -> sender */
	uint64_t *wake, *got;             /* per round: write -> epoll_wait, -> read */
	int n;
	int direct;                       /* rounds whose data came without a wake */
};

static int g_direct[2];

static void *sender(void *arg)
{
	struct run *r = arg;
	uint64_t t, ack;

	pin(0);
	for (int i = 0; i < r->n; i++) {
		nap_us(g_gap_us);
		t = now_ns();
		if (up_write(r->pw, &t, sizeof(t)) != (ssize_t)sizeof(t))
			die("up_write", EIO);
		if (up_read(r->qr, &ack, sizeof(ack)) != (ssize_t)sizeof(ack))
			die("up_read", EIO);
	}
	up_close(r->pw);
	return NULL;
}

/* The loop: read until -EAGAIN, arm, epoll_wait; time each wake. */
static void loop(struct run *r)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC), fd = up_pollfd(r->pr), i = 0;
	uint64_t woke = 0;

	if (fd < 0)
		die("up_pollfd", fd);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll", errno);
	pin(1);
	for (;;) {
		uint64_t t;
		ssize_t n = up_read(r->pr, &t, sizeof(t));

		if (n == 0)
			break;
		if (n == (ssize_t)sizeof(t)) {
			uint64_t now = now_ns();

			if (i < r->n) {
				if (!woke)
					r->direct++;
				r->wake[i] = woke ? woke - t : now - t;
				r->got[i] = now - t;
				i++;
			}
			woke = 0;
			if (up_write(r->qw, &t, sizeof(t)) != (ssize_t)sizeof(t))
				die("up_write", EIO);
			continue;
		}
		if (n != -EAGAIN)
			die("up_read", n);
		n = up_poll_arm(r->pr);
		if (n == 1)
			continue;
		if (n < 0)
			die("up_poll_arm", n);
		while (epoll_wait(ep, &ev, 1, -1) < 0)
			if (errno != EINTR)
				die("epoll_wait", errno);
		woke = now_ns();
	}
	close(ep);
}

static void block(bool futex, uint64_t *wake, uint64_t *got, char *backend, size_t blen)
{
	struct up_pipe *p, *q;
	struct up_stats st;
	struct run r = { .wake = wake, .got = got, .n = g_rounds };
	pthread_t t;
	long e;

	if (futex)
		setenv("UP_FORCE_FUTEX", "1", 1);
	else
		unsetenv("UP_FORCE_FUTEX");
	if ((e = up_pipe_create(NULL, &p)) < 0)
		die("up_pipe_create", e);
	if ((e = up_pipe_create(NULL, &q)) < 0)
		die("up_pipe_create", e);
	if ((e = up_open(p, UP_WR, &r.pw)) < 0 || (e = up_open(p, UP_RD | UP_NONBLOCK | UP_NO_EARLY, &r.pr)) < 0 ||
	    (e = up_open(q, UP_WR, &r.qw)) < 0 || (e = up_open(q, UP_RD, &r.qr)) < 0)
		die("up_open", e);
	up_stats(p, &st);
	snprintf(backend, blen, "%s", st.backend);
	if (g_process) {
		pid_t pid = fork();
		int status;

		if (pid < 0)
			die("fork", errno);
		if (pid == 0) {
			/* The child's copies of the loop's ends would count as
			 * a second reader and writer: only the sender's stay. */
			up_close(r.pr);
			up_close(r.qw);
			sender(&r);
			up_close(r.qr);
			_exit(0);
		}
		up_close(r.pw);
		up_close(r.qr);
		loop(&r);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			die("sender process", EIO);
	} else {
		if (pthread_create(&t, NULL, sender, &r) != 0)
			die("pthread_create", EAGAIN);
		loop(&r);
		pthread_join(t, NULL);
		up_close(r.qr);
	}
	g_direct[futex] += r.direct;
	up_close(r.pr);
	up_close(r.qw);
	up_pipe_release(p);
	up_pipe_release(q);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *backend, const char *what, uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	printf("%-9s %-22s %8.1f %8.1f %9.1f   (%zu rounds)\n", backend, what,
	       (double)v[n / 2] / 1e3, (double)v[n * 99 / 100] / 1e3, (double)v[n - 1] / 1e3, n);
}

int main(int argc, char **argv)
{
	size_t per = 0, total;
	uint64_t *w[2], *g[2];
	char name[2][32] = { "?", "?" };
	cpu_set_t s;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			g_rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
			g_blocks = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gap-us") && i + 1 < argc)
			g_gap_us = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--process"))
			g_process = true;
		else {
			fprintf(stderr, "usage: uringpipe-pollfd-lat [--rounds N] [--blocks B]"
					" [--gap-us U] [--process]\n");
			return 2;
		}
	}
	if (g_rounds < 1 || g_blocks < 1 || g_gap_us < 0)
		return 2;
	if (sched_getaffinity(0, sizeof(s), &s) == 0 && CPU_ISSET(0, &s) && CPU_ISSET(1, &s)) {
		g_cpu[0] = 0;
		g_cpu[1] = 1;
	}
	total = (size_t)g_rounds * (size_t)g_blocks;
	for (int b = 0; b < 2; b++) {
		w[b] = calloc(total, sizeof(uint64_t));
		g[b] = calloc(total, sizeof(uint64_t));
		if (!w[b] || !g[b])
			die("calloc", ENOMEM);
	}
	for (int k = 0; k < g_blocks; k++, per += (size_t)g_rounds)
		for (int b = 0; b < 2; b++)
			block(b == 1, w[b] + per, g[b] + per, name[b], sizeof(name[b]));
	printf("uringpipe-pollfd-lat: %d rounds x %d blocks per backend, gap %d us, cpus %d,%d,"
	       " sender a %s\n", g_rounds, g_blocks, g_gap_us, g_cpu[0], g_cpu[1],
	       g_process ? "process" : "thread");
	printf("%-9s %-22s %8s %8s %9s   (us)\n", "backend", "from up_write() to", "p50", "p99",
	       "max");
	for (int b = 0; b < 2; b++) {
		report(name[b], "epoll_wait() return", w[b], total);
		report(name[b], "up_read() with data", g[b], total);
	}
	printf("rounds whose data was there before the loop slept: %d (%s), %d (%s)\n",
	       g_direct[0], name[0], g_direct[1], name[1]);
	return 0;
}
